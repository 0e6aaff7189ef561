package syscallcompat

// Stats and opens that ask the filesystem, not the kernel's caches, for
// an uncached backing (docs/DESIGN.md#uncached-view); internal/crossmount
// decides when they are used.

import (
	"syscall"

	"golang.org/x/sys/unix"
)

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
