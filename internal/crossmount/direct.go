package crossmount

// The write-time view of a backing file on a filesystem whose client
// caches another host's change may hide (docs/DESIGN.md#uncached-view).

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// DirectFlags returns flags, the open(2) flags of a backing regular file,
// with O_DIRECT added to a read-only open on an uncached backing
// (Config.Uncached), so its reads bypass the client's page cache: what
// it reads is the server's content, once its size is fresh (StatSync)
// and, on GlusterFS, with quick-read off (it serves O_DIRECT reads of
// small files from its cache: docs/multihost.md#glusterfs). Writable opens stay
// buffered (O_DIRECT writes need aligned buffers, offsets and lengths);
// their writes reach the server before the cross-mount lock is dropped
// (LockFd's unlock syncs them). Elsewhere flags unchanged.
func (x *Mode) DirectFlags(flags uint32) uint32 {
	if x.cfg.Uncached && flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return flags | syscall.O_DIRECT
	}
	return flags
}

// HashFlags is the extra open(2) flag of the guard's hashing opens:
// O_DIRECT on an uncached backing (DirectFlags), else 0.
func (x *Mode) HashFlags() int {
	if x.cfg.Uncached {
		return unix.O_DIRECT
	}
	return 0
}

// FstatView is the stat of fd, a backing descriptor, that a decision may
// rest on: on an uncached backing (Config.Uncached) the filesystem's own
// (FstatSync), elsewhere fstat(2). Errors: those of statx or fstat.
func (x *Mode) FstatView(fd int, st *syscall.Stat_t) error {
	if x.cfg.Uncached {
		return syscallcompat.FstatSync(fd, st)
	}
	return syscall.Fstat(fd, st)
}

// StatView is FstatView of the name path relative to dirfd (AT_FDCWD: an
// absolute path) with flags (AT_SYMLINK_NOFOLLOW): on an uncached backing
// StatSync, elsewhere fstatat(2).
func (x *Mode) StatView(dirfd int, path string, flags int, st *syscall.Stat_t) error {
	if x.cfg.Uncached {
		return syscallcompat.StatSync(dirfd, path, flags, st)
	}
	return unix.Fstatat(dirfd, path, (*unix.Stat_t)(unsafe.Pointer(st)), flags)
}

// SyncBeforeUnlock writes fd's buffered writes through to the server on
// an uncached backing (fdatasync(2); GlusterFS's write-behind otherwise
// keeps them in this client after the write returned), so another host
// that takes the cross-mount lock next reads them. Errors are ignored:
// the write already succeeded, and the next decision hashes what is there.
func (x *Mode) SyncBeforeUnlock(fd int) {
	if x.cfg.Uncached {
		unix.Fdatasync(fd)
	}
}

// PreadDirect is pread(2) of len(buf) bytes at off from fd, which may be
// open with O_DIRECT (DirectFlags): then it reads the aligned window
// around [off, off+len(buf)) into an aligned buffer and copies the part
// asked for. n is the bytes read into buf.
func PreadDirect(fd int, buf []byte, off int64) (int, error) {
	if syscallcompat.FdDirect(fd) == 0 {
		return syscall.Pread(fd, buf, off)
	}
	start := off &^ (guard.DirectAlign - 1)
	end := (off + int64(len(buf)) + guard.DirectAlign - 1) &^ (guard.DirectAlign - 1)
	win := guard.AlignedBuf(int(end - start)) // direct reads need an aligned buffer
	n, err := syscall.Pread(fd, win, start)
	if n <= int(off-start) {
		return 0, err
	}
	return copy(buf, win[off-start:n]), err
}
