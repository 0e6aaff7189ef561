package fusefs

// Changes the daemon made to a backing file before the kernel's page
// cache (docs/DESIGN.md#mutation-path: flux from before the decision).

import (
	"sync"

	"github.com/rubinofs/rubinofs/guard"
)

// fluxCounts counts, per identity, changes the daemon made to the backing
// file that the kernel may not have applied to its page cache yet: an
// O_TRUNC open, a truncate, fallocate or copy_file_range. The kernel
// applies such a change to its cache only after our reply, so until then a
// reader may be served older bytes from the cache than any hash taken now
// describes. The zero value is empty; safe for concurrent use.
type fluxCounts struct {
	mu sync.Mutex
	m  map[guard.FileID]int
}

// add counts (+1) or uncounts (-1) a change of id.
func (c *fluxCounts) add(id guard.FileID, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[guard.FileID]int)
	}
	if c.m[id] += delta; c.m[id] <= 0 {
		delete(c.m, id)
	}
}

// in reports whether id has a change the kernel may not have applied.
func (c *fluxCounts) in(id guard.FileID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id] > 0
}
