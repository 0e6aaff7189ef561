package fusefs

// The descriptor budget: how many file handles (open files and
// directories) the callers of one uid may hold through the mount, and all
// of them together (docs/DESIGN.md#fd-budget).

import (
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// fdBudget bounds the handles the kernel holds open on the daemon: each
// holds a backing descriptor, all of them count against the daemon's
// RLIMIT_NOFILE, and a daemon out of descriptors fails every request of
// every caller (EMFILE, and EIO where a create needed one). Past perUID
// handles of one uid (on an allow_other mount; on another, only the
// mount's user reaches it and perUID is total), or total of all, an
// OPEN, CREATE, TMPFILE or OPENDIR
// fails with EMFILE for that caller alone, as if its own table were
// full, before anything is opened or created. A reserve below the
// limit stays for the daemon's own descriptors (the journal, the
// watcher, pins, the state). Handles are counted at the raw request
// level by their fh, from the reply to an open until its RELEASE (or
// RELEASEDIR). Concurrency: mu guards the maps; refused is atomic.
type fdBudget struct {
	total, perUID int // bounds, in handles

	mu    sync.Mutex
	open  int
	byUID map[uint32]int
	byFh  map[uint64]uint32 // the uid of each counted handle

	refused atomic.Uint64
}

// newFdBudget sizes the budget from limit, the daemon's descriptor limit
// (RLIMIT_NOFILE's soft value, which the Go runtime raises to the hard
// one at start): a reserve of an eighth (256 to 4,096 descriptors), the
// rest for handles, a quarter of that for one uid (at least 64).
func newFdBudget(limit int) *fdBudget {
	reserve := min(max(limit/8, 256), 4096)
	total := max(limit-reserve, 64)
	return &fdBudget{total: total, perUID: max(total/4, 64),
		byUID: map[uint32]int{}, byFh: map[uint64]uint32{}}
}

// fdLimit returns the daemon's descriptor limit, or 1,024 when it cannot
// be read.
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	return int(min(rl.Cur, 1<<30))
}

// take reserves a handle for uid: false (the caller gets EMFILE) when uid
// holds perUID handles or all callers total.
func (b *fdBudget) take(uid uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open >= b.total || b.byUID[uid] >= b.perUID {
		b.refused.Add(1)
		return false
	}
	b.open++
	b.byUID[uid]++
	return true
}

// settle ends a take: with ok and fh non-zero, the handle fh is counted
// for uid until released; otherwise (the open failed, or no handle was
// made) the reservation is given back.
func (b *fdBudget) settle(uid uint32, fh uint64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok && fh != 0 {
		b.byFh[fh] = uid
		return
	}
	b.drop(uid)
}

// released stops counting handle fh. Called before go-fuse's release,
// which frees fh for the next open.
func (b *fdBudget) released(fh uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if uid, ok := b.byFh[fh]; ok {
		delete(b.byFh, fh)
		b.drop(uid)
	}
}

// drop gives back one handle of uid. Called with mu held.
func (b *fdBudget) drop(uid uint32) {
	b.open--
	if b.byUID[uid]--; b.byUID[uid] <= 0 {
		delete(b.byUID, uid)
	}
}

// status is the budget's part of .rubino/status ("handles").
func (b *fdBudget) status() (string, any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	most := 0
	for _, n := range b.byUID {
		most = max(most, n)
	}
	return "handles", map[string]any{"open": b.open, "total": b.total, "per_uid": b.perUID,
		"most_by_one_uid": most, "refused": b.refused.Load()}
}

// opening runs open, an OPEN, CREATE, TMPFILE or OPENDIR of caller, within the
// budget: EMFILE without calling it when the caller's uid is past its
// share, else its status, with the handle it made (*fh after it) counted.
func (b *fdBudget) opening(caller *fuse.Caller, fh *uint64, open func() fuse.Status) fuse.Status {
	if !b.take(caller.Uid) {
		return fuse.Status(syscall.EMFILE)
	}
	ok := false
	defer func() { b.settle(caller.Uid, *fh, ok) }() // a handler's panic (go-fuse answers EIO) gives the slot back too
	st := open()
	ok = st == fuse.OK
	return st
}
