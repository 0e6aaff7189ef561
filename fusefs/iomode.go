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
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ioModes counts the open handles of one inode by the kernel io mode they
// hold. The zero value is ready to use. Concurrency: mu guards the counts.
//
// A count is taken when the daemon decides an open, before the kernel sees
// the reply, and dropped when the daemon serves the handle's RELEASE, after
// the kernel has left the mode (it does so before it sends RELEASE), so
// the counts never miss a handle the kernel holds.
type ioModes struct {
	mu     sync.Mutex
	pt     int // handles opened with FOPEN_PASSTHROUGH
	cached int // handles that use, or may come to use, the page cache
}

// ioOpen decides the io mode of a new handle of n. prefer: the handle
// would rather be a passthrough one; mapped: as a non-passthrough handle
// it may use the page cache (a cached handle, or a direct-I/O handle open
// for reading, which a shared mmap puts in the cached mode). pt is true
// when the handle must be opened with FOPEN_PASSTHROUGH: it prefers it and
// no handle of n may use the page cache, or a passthrough handle of n is
// open already, whatever it prefers. done drops the count again; it is
// idempotent and is called at the handle's release.
func (n *Node) ioOpen(prefer, mapped bool) (pt bool, done func()) {
	m := &n.io
	m.mu.Lock()
	pt = m.pt > 0 || (prefer && m.cached == 0)
	counted := pt || mapped
	switch {
	case pt:
		m.pt++
	case mapped:
		m.cached++
	}
	m.mu.Unlock()
	var once sync.Once
	return pt, func() {
		if !counted {
			return
		}
		once.Do(func() {
			m.mu.Lock()
			if pt {
				m.pt--
			} else {
				m.cached--
			}
			m.mu.Unlock()
		})
	}
}

// openHandle registers lf, a handle of n opened with the open(2) flags
// flags, with n's open handles (keepHandle) and decides its io mode
// (ioOpen). The returned drop undoes both; the handle's Release calls it
// before it closes lf.
func (n *Node) openHandle(lf *fs.LoopbackFile, flags uint32, prefer, mapped bool) (pt bool, drop func()) {
	pt, done := n.ioOpen(prefer, mapped)
	keepDrop := n.keepHandle(lf, flags)
	return pt, func() {
		keepDrop()
		done()
	}
}

// mayMap reports whether a non-passthrough handle opened with flags and
// the open reply flags openFlags may use the page cache: every handle
// except a direct-I/O one that cannot be mapped (open for writing only:
// mmap(2) of a file needs read access).
func mayMap(flags, openFlags uint32) bool {
	return openFlags&fuse.FOPEN_DIRECT_IO == 0 || flags&syscall.O_ACCMODE != syscall.O_WRONLY
}

// ptFile is a guarded handle opened with FOPEN_PASSTHROUGH: a read-only
// handle whose read was registered at open, or any guarded handle opened
// while a passthrough handle holds the inode (ioOpen). The latter also
// gets FOPEN_DIRECT_IO (guardedPassthrough), which the kernel obeys before
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

// guardedPassthrough returns the handle and the open flags for h, a guarded
// handle, in the io mode ioOpen decided (pt). A passthrough handle gets
// FOPEN_DIRECT_IO too unless it is read-only and its read was registered
// at open (read): the daemon must still see its writes (to decide and
// credit them) and, when the read was not registered yet, its first READ.
// openFlags are the flags h would get without passthrough.
func guardedPassthrough(h *File, pt, writable, read bool, openFlags uint32) (fs.FileHandle, uint32) {
	if !pt {
		return h, openFlags
	}
	if writable || !read {
		h.direct = true
		return &ptFile{File: h}, fuse.FOPEN_DIRECT_IO
	}
	return &ptFile{File: h}, 0
}
