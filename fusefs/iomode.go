package fusefs

// Per-inode io-mode bookkeeping for kernel passthrough
// (docs/DESIGN.md#passthrough-io-modes).
//
// The kernel keeps one io mode per inode (fs/fuse/iomode.c, Linux 6.9+):
// while a handle opened with FOPEN_PASSTHROUGH is open, every other open of
// the inode must carry FOPEN_PASSTHROUGH too, and while a handle that uses
// the page cache is open, a passthrough open is refused. Either refusal
// reaches the caller's open(2) as EIO. A handle opened with
// FOPEN_DIRECT_IO alone takes no mode, until a shared mmap of it enters the
// cached mode. So each Node counts its open handles by the mode they hold,
// and every open decides its own mode under the Node's lock from those
// counts.

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ioModes counts the open handles of one inode by the kernel io mode they
// hold. The zero value is ready to use. Concurrency: mu guards the counts.
//
// A count is taken when the daemon decides an open, before the kernel sees
// the reply, and dropped once go-fuse has served the handle's RELEASE
// (releases.releaseDone), after the kernel has left the mode (it does so before
// it sends RELEASE), so the counts never miss a mode the kernel holds.
type ioModes struct {
	mu    sync.Mutex
	pt    int // handles opened with FOPEN_PASSTHROUGH
	other int // every other handle
}

// ioOpen decides the io mode of a new handle of n. prefer: the handle
// would rather be a passthrough one. pt is true when the handle must be
// opened with FOPEN_PASSTHROUGH: it prefers it and no other handle of n is
// open, or a passthrough handle of n is open already, whatever it prefers.
// done drops the count again, once.
//
// Every non-passthrough handle keeps passthrough away, even a direct-I/O
// one (which takes no kernel io mode until a shared mmap of it puts the
// inode in the cached mode, unseen by the daemon): go-fuse counts its
// backing file's users per node and drops one at every RELEASE of the
// node, passthrough or not, so a non-passthrough handle released while a
// backing file is registered would unregister it under a passthrough
// handle, and the next passthrough open would register a second backing
// file, which the kernel refuses (EIO).
func (n *Node) ioOpen(prefer bool) (pt bool, done func()) {
	m := &n.io
	m.mu.Lock()
	pt = m.pt > 0 || (prefer && m.other == 0)
	if pt {
		m.pt++
	} else {
		m.other++
	}
	m.mu.Unlock()
	var once sync.Once
	return pt, func() {
		once.Do(func() {
			m.mu.Lock()
			if pt {
				m.pt--
			} else {
				m.other--
			}
			m.mu.Unlock()
		})
	}
}

// openHandle registers lf, a handle of n opened with the open(2) flags
// flags, with n's open handles (keepHandle) and decides its io mode
// (ioOpen). The handle's Release calls the returned drop with its context
// before it closes lf: lf leaves n's open handles at once, and the io-mode
// count once go-fuse has served the RELEASE (releases.afterRelease).
func (n *Node) openHandle(lf *fs.LoopbackFile, flags uint32, prefer bool) (pt bool, drop func(ctx context.Context)) {
	pt, done := n.ioOpen(prefer)
	keepDrop := n.keepHandle(lf, flags)
	return pt, func(ctx context.Context) {
		keepDrop()
		n.fs.released.afterRelease(ctx, done)
	}
}

// releases holds, by RELEASE request (its cancel channel), what is left
// to do once go-fuse has served it. The zero value is ready; safe for
// concurrent use.
type releases struct{ m sync.Map } // <-chan struct{} -> func()

// afterRelease runs done once go-fuse has finished serving the RELEASE
// whose context is ctx (rawHooks.Release calls releases.releaseDone), or at once
// when ctx is no request's. Only go-fuse drops its own count of the node's
// backing-file users after the handle's Release returns: an io-mode count
// dropped before it could let a passthrough open register a backing file
// that this release then unregisters.
func (r *releases) afterRelease(ctx context.Context, done func()) {
	if c, ok := ctx.(*fuse.Context); ok && c.Cancel != nil {
		// A leftover of a request whose releaseDone never came runs now.
		if old, loaded := r.m.Swap(c.Cancel, done); loaded {
			old.(func())()
		}
		return
	}
	done()
}

// releaseDone runs what afterRelease left for the RELEASE request whose
// cancel channel is cancel (unique among the requests in flight).
func (r *releases) releaseDone(cancel <-chan struct{}) {
	if done, ok := r.m.LoadAndDelete(cancel); ok {
		done.(func())()
	}
}

// guardedPassthrough reports whether a guarded handle may prefer kernel
// passthrough: passthrough is on (Config.Passthrough) and no reader of
// .rubino/accesslog is attached. The access log shows every read and
// write of a guarded file while it is read, and those of a passthrough
// handle never reach the daemon.
func (f *FS) guardedPassthrough() bool {
	return f.cfg.Passthrough && !f.cfg.Observe.AccessLogActive()
}

// writeOnlyDirect reports whether a handle opened with flags and the open
// reply flags openFlags is a direct-I/O handle open for writing only: it
// cannot be mapped (mmap(2) of a file needs read access) and all its
// read(2) and write(2) reach the daemon, so as a passthrough handle (with
// FOPEN_DIRECT_IO, guardedHandle) it loses nothing, and it lets
// readers opened while it is open be passthrough ones.
func writeOnlyDirect(flags, openFlags uint32) bool {
	return openFlags&fuse.FOPEN_DIRECT_IO != 0 && flags&syscall.O_ACCMODE == syscall.O_WRONLY
}

// ptFile is a guarded handle opened with FOPEN_PASSTHROUGH: a read-only
// handle whose read was registered at open, or any guarded handle opened
// while a passthrough handle holds the inode (ioOpen). The latter also
// gets FOPEN_DIRECT_IO (guardedHandle), which the kernel obeys before
// passthrough for read(2) and write(2), so its writes still reach
// File.Write and can be refused; only mmap(2) goes to the backing file.
// Every other operation is the File's.
type ptFile struct {
	*File
}

// PassthroughFd offers the handle's backing descriptor to go-fuse, which
// registers it as the inode's backing file at the first passthrough open.
func (p *ptFile) PassthroughFd() (int, bool) {
	return p.lf.PassthroughFd()
}

// asFile returns the guarded File behind a handle of a guarded file, in
// passthrough mode or not.
func asFile(fh fs.FileHandle) (*File, bool) {
	switch h := fh.(type) {
	case *File:
		return h, true
	case *ptFile:
		return h.File, true
	}
	return nil, false
}

// guardedHandle returns the handle and the open flags for h, a guarded
// handle, in the io mode ioOpen decided (pt). A passthrough handle gets
// FOPEN_DIRECT_IO too unless it is read-only and its read was registered
// at open (read): the daemon must still see its writes (to decide and
// credit them) and, when the read was not registered yet, its first READ.
// openFlags are the flags h would get without passthrough.
func guardedHandle(h *File, pt, writable, read bool, openFlags uint32) (fs.FileHandle, uint32) {
	if !pt {
		return h, openFlags
	}
	if writable || !read {
		h.direct = true
		return &ptFile{File: h}, fuse.FOPEN_DIRECT_IO
	}
	return &ptFile{File: h}, 0
}
