package crossmount

// The write-time view of a backing file on a filesystem whose client
// caches another host's change may hide (docs/DESIGN.md#uncached-view).

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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
		return FstatSync(fd, st)
	}
	return syscall.Fstat(fd, st)
}

// StatView is FstatView of the name path relative to dirfd (AT_FDCWD: an
// absolute path) with flags (AT_SYMLINK_NOFOLLOW): on an uncached backing
// StatSync, elsewhere fstatat(2).
func (x *Mode) StatView(dirfd int, path string, flags int, st *syscall.Stat_t) error {
	if x.cfg.Uncached {
		return StatSync(dirfd, path, flags, st)
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
	if FdDirect(fd) == 0 {
		return syscall.Pread(fd, buf, off)
	}
	start := off &^ (directAlign - 1)
	end := (off + int64(len(buf)) + directAlign - 1) &^ (directAlign - 1)
	win := alignedBuf(int(end - start))
	n, err := syscall.Pread(fd, win, start)
	if n <= int(off-start) {
		return 0, err
	}
	return copy(buf, win[off-start:n]), err
}

// directAlign is the alignment (bytes) of O_DIRECT buffers and offsets.
const directAlign = 4096

// alignedBuf returns n bytes starting at a multiple of directAlign.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	if off != 0 {
		off = directAlign - off
	}
	return b[off : off+n : off+n]
}

// StatSync stats path relative to dirfd (path "" with AT_EMPTY_PATH in
// flags: dirfd itself) into st, asking the filesystem rather than the
// kernel's attribute cache: statx(2) with AT_STATX_FORCE_SYNC. On a FUSE
// backing that is a GETATTR to the client (GlusterFS: to the brick once
// md-cache, performance.stat-prefetch, is off), on NFS a GETATTR to the
// server. It also refreshes the kernel's cached size of the inode, which
// ends a FUSE O_DIRECT read: a read at or past the cached size returns 0
// without asking the filesystem, so a file another host grew from empty
// would read as empty until the attribute timeout (1 s) passed
// (docs/DESIGN.md#uncached-view). Without statx (ENOSYS) it is
// fstatat(2). Errors: statx's.
func StatSync(dirfd int, path string, flags int, st *syscall.Stat_t) error {
	var x unix.Statx_t
	err := unix.Statx(dirfd, path, flags|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &x)
	if err == unix.ENOSYS {
		var ust unix.Stat_t
		if err := unix.Fstatat(dirfd, path, &ust, flags); err != nil {
			return err
		}
		StatFromUnix(&ust, st)
		return nil
	}
	if err != nil {
		return err
	}
	StatFromStatx(&x, st)
	return nil
}

// FstatSync is StatSync of the descriptor fd itself.
func FstatSync(fd int, st *syscall.Stat_t) error {
	return StatSync(fd, "", unix.AT_EMPTY_PATH, st)
}

// FdDirect is O_DIRECT when fd, a backing descriptor, was opened with it
// (DirectFlags), else 0: a reopen of it for hashing reads as it does.
func FdDirect(fd int) int {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return 0
	}
	return fl & unix.O_DIRECT
}

// OpenRetryDirect opens with open(flags) and, when the filesystem refuses
// O_DIRECT (EINVAL), once more without it.
// An O_DIRECT descriptor's inode has its size refreshed (FstatSync), so
// that its reads run to the file's real end.
func OpenRetryDirect(flags int, open func(flags int) (int, error)) (int, error) {
	fd, err := open(flags)
	if err == unix.EINVAL && flags&unix.O_DIRECT != 0 {
		fd, err = open(flags &^ unix.O_DIRECT)
	} else if err == nil && flags&unix.O_DIRECT != 0 {
		var st syscall.Stat_t
		FstatSync(fd, &st)
	}
	return fd, err
}

// StatFromStatx fills st from x (go-fuse fs/loopback_linux.go statFromStatx).
func StatFromStatx(x *unix.Statx_t, st *syscall.Stat_t) {
	*st = syscall.Stat_t{}
	st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	st.Ino = x.Ino
	st.Nlink = uint64(x.Nlink)
	st.Mode = uint32(x.Mode)
	st.Uid, st.Gid = x.Uid, x.Gid
	st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	st.Size = int64(x.Size)
	st.Blksize = int64(x.Blksize)
	st.Blocks = int64(x.Blocks)
	st.Atim = syscall.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)}
	st.Mtim = syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)}
	st.Ctim = syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)}
}

// StatFromUnix copies a unix.Stat_t into a syscall.Stat_t.
func StatFromUnix(u *unix.Stat_t, st *syscall.Stat_t) {
	*st = syscall.Stat_t{
		Dev: u.Dev, Ino: u.Ino, Nlink: u.Nlink, Mode: u.Mode, Uid: u.Uid, Gid: u.Gid,
		Rdev: u.Rdev, Size: u.Size, Blksize: u.Blksize, Blocks: u.Blocks,
		Atim: syscall.Timespec(u.Atim), Mtim: syscall.Timespec(u.Mtim), Ctim: syscall.Timespec(u.Ctim),
	}
}
