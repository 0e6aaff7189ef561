package fusefs

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// lateCloseQueue bounds the descriptors waiting for a lateCloser's
// batch; past it a descriptor is closed in the request, as before. Well
// inside the descriptors the handle budget leaves the daemon (at least
// 256: fdBudget), of which pins are one use.
const lateCloseQueue = 64

// lateCloseDelay is how long a lateCloser gathers descriptors before it
// closes them in one batch: one timer wakeup for the several removals a
// tool makes meanwhile (an `rm -rf` through the mount removes a file
// every 100-300 µs here), where one wakeup each cost about as much CPU as
// it saved the request.
const lateCloseDelay = time.Millisecond

// lateCloser closes, in batches after the request's reply, the O_PATH
// descriptors that pin a removed or replaced file left with no link
// until the guard has been told (pinIn). Their close is the file's last
// reference: the kernel then frees the inode and its blocks in close(2)
// (ext4's truncate, and with the discard mount option a synchronous
// discard of every extent), which a removal through the mount would
// otherwise wait for: a third of a guarded UNLINK's daemon time in
// `git checkout -- .` on this machine (docs/DESIGN.md#late-unpin). A pin
// held a little longer only delays the reuse of its inode number, which
// is what it is for. The zero value is ready; safe for concurrent use.
// close closes what is queued and waits for a batch being closed
// (FS.Close, once no request runs).
type lateCloser struct {
	mu     sync.Mutex
	fds    []int
	armed  bool // a batch's timer is set
	closed bool
	wg     sync.WaitGroup // batches whose timer is set or running
}

// closeLater queues fd for the next batch, setting its timer when none
// is set, or closes it at once when the queue is full or the closer
// closed.
func (c *lateCloser) closeLater(fd int) {
	c.mu.Lock()
	if c.closed || len(c.fds) >= lateCloseQueue {
		c.mu.Unlock()
		unix.Close(fd)
		return
	}
	c.fds = append(c.fds, fd)
	if !c.armed {
		c.armed = true
		c.wg.Add(1)
		time.AfterFunc(lateCloseDelay, c.flush)
	}
	c.mu.Unlock()
}

// flush closes the queued descriptors (a batch's timer).
func (c *lateCloser) flush() {
	defer c.wg.Done()
	c.mu.Lock()
	fds := c.fds
	c.fds, c.armed = nil, false
	c.mu.Unlock()
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// close closes every queued descriptor, waits for a batch whose timer is
// set, and makes later descriptors close at once. Idempotent.
func (c *lateCloser) close() {
	c.mu.Lock()
	c.closed = true
	fds := c.fds
	c.fds = nil
	c.mu.Unlock()
	for _, fd := range fds {
		unix.Close(fd)
	}
	c.wg.Wait()
}
