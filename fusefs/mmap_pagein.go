package fusefs

import (
	"syscall"

	"github.com/rubinofs/rubinofs/guard"
)

// Page-in READs (docs/DESIGN.md#mmap-page-in). The kernel sends READ for
// two different things: a read(2) served straight to the caller's buffer
// (a direct-I/O handle, O_DIRECT), and a fill of its page cache (readahead,
// and the fault of a mapped page). Only the first carries the caller's
// lock owner (FUSE_READ_LOCKOWNER: fs/fuse/file.c sets it in
// fuse_send_read, on the direct path only). A direct-I/O handle
// (FS.refusableIO) has no cached read(2), so a page-cache READ through it
// is always a fault of a mapping of that handle, and a store through a
// shared mapping faults its page in exactly so. go-fuse's node API passes
// on only the offset, so rawHooks keeps each page-cache READ's cancel
// channel (unique among in-flight requests; the bridge hands it to the
// node as fuse.Context.Cancel) until the request returns, as it does for
// umasks (syscallcompat.MarkPageIn, IsPageIn).

// mapPageIn decides a page-in through this direct-I/O (guarded, writable)
// handle: the fault of a mapping of it, which may be the first store
// through a shared writable mapping. It is not a read of the session (it
// registers nothing), and it is served only while the session may write
// the file now; otherwise it gets the guard's errno, which the kernel
// turns into SIGBUS for the faulting access, and the denial log names
// op mmap-write. Called with h.mu held.
func (h *File) mapPageIn() syscall.Errno {
	if !h.check {
		return 0
	}
	if h.granted {
		last := h.fs.cfg.Guard.LastMutation(h.id)
		if last.Seq == h.seq || last.Session == h.who.session {
			return 0 // the handle's own right still holds (File.mutate)
		}
	}
	var errno syscall.Errno
	h.fd(func(fd int) syscall.Errno {
		t, err := fdTarget(h.node.rel(), fd)
		if err != nil {
			errno = syscall.EIO
			return 0
		}
		errno = h.fs.decide(h.who, guard.OpMapWrite, t)
		return 0
	})
	return errno
}
