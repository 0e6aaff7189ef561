package fusefs

// Reads of a guarded file on a shared backing directory
// (docs/DESIGN.md#close-to-open).
//
// A read-only handle registers its read at open and is then served by
// kernel passthrough or the page cache: bytes the daemon never sees, read
// later than the hash it registered. With one mount that is safe, since
// every change between the two goes through this daemon and makes the
// record stale. With other mounts of the backing directory it is not:
// another host can change the file between the hash and the read, and
// change it back to the hashed bytes before the session writes (an empty
// file during another writer's truncate-then-write is the common case),
// and the session writes a value derived from bytes the guard never saw.
// So on a shared mount (Config.Shared, or a peer seen: crossmount.Mode.Shared) a guarded read-only handle is a direct-I/O handle
// whose READs reach the daemon, and the first READ registers the bytes it
// serves, hashed and read under the identity lock and a cross-mount read
// lock, as one step against other mounts' guarded mutations.

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/internal/crossmount"
)

// readShared serves one READ of h, a shared read handle: under the
// identity lock and the cross-mount read lock, the first READ registers
// the file's current content as read by the handle's session and reads
// buf from it; a later READ that finds the file changed since (by stat
// identity) registers the read in flux (it vouches for no content: the
// session has seen parts of two versions); an attribute change is not a
// change of content (ownStat.sameContent). The bytes are read into buf
// before the locks are dropped (not spliced later). Errors: pread(2)'s.
func (h *File) readShared(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	gc := h.who.guardCaller(h.fs)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settle()
	unlock := h.fs.cfg.Guard.Lock(h.id)
	defer unlock()
	var n int
	errno := h.fd(func(fd int) syscall.Errno {
		unlockR, locked := h.fs.cross.ReadLock(fd)
		defer unlockR()
		t, err := fdTarget(h.node.rel(), fd)
		if err != nil {
			return toErrno(err)
		}
		switch {
		case !h.track:
		case !locked:
			h.fs.cfg.Guard.NoteReadInFluxBy(gc, t) // another mount held the lock too long
		case !h.registered:
			h.registered, h.readStat = true, t.Stat
			if err := h.fs.cfg.Guard.NoteReadBy(gc, t); err != nil {
				h.fs.log.Warn("registering a read failed: the session must read the file again", "path", t.Path, "session", h.who.session, "err", err)
			}
		case !(ownStat{ok: true, st: h.readStat}).sameContent(t.Stat):
			h.readStat = t.Stat
			h.fs.cfg.Guard.NoteReadInFluxBy(gc, t)
		}
		var e error
		n, e = crossmount.PreadDirect(fd, buf, off)
		return toErrno(e)
	})
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(buf[:n]), 0
}

// toErrno converts err (nil, or from a syscall) to an errno.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
