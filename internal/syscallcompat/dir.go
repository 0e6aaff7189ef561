package syscallcompat

// Directory descriptors of the backing workspace and the walk beneath
// them (docs/DESIGN.md#syscall-room, docs/DESIGN.md#dirfd-walk): openat2(2)
// under RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, one name at a time with
// O_NOFOLLOW where openat2 is missing.

import (
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// resolveBeneath is how every directory of the walk is resolved: below the
// root descriptor, through no symlink at all (RESOLVE_NO_SYMLINKS implies
// RESOLVE_NO_MAGICLINKS; both are named for the reader).
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// NoOpenat2 is set once openat2 answered ENOSYS (kernels before 5.6, or a
// seccomp filter that does not know it); the walk then goes one name at a
// time with openat(O_NOFOLLOW), which is as strict, only slower. Tests set
// it to take the fallback. Safe for concurrent use.
var NoOpenat2 atomic.Bool

// Dir is a directory descriptor of the backing workspace for *at calls:
// the root descriptor itself (not owned) or one the walk opened (owned).
// FD is -1 for "no directory". A Dir is a plain value: the one who opened
// an owned Dir closes it once (Close), after every copy's last use.
type Dir struct {
	FD  int  // the descriptor (O_PATH|O_DIRECTORY)
	Own bool // whether Close closes FD
}

// Close releases an owned descriptor.
func (d Dir) Close() {
	if d.Own {
		unix.Close(d.FD)
	}
}

// OpenRoot opens the backing root as an O_PATH directory descriptor: the
// start of every backing access; the caller closes it. Errors: those of
// open(2). backing may be /proc/self/fd/N (in-place
// mounts); that magic link is followed here, once, by design.
func OpenRoot(backing string) (int, error) {
	fd, err := unix.Open(backing, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// OpenDirBeneath opens the relative directory path p below dirfd without
// following any symlink, as a new O_PATH descriptor the caller closes.
// Errors: ELOOP or ENOTDIR for a symlink component, EXDEV for a ".."
// escape, ENOENT, EACCES, ENAMETOOLONG, as errno.
func OpenDirBeneath(dirfd int, p string) (int, syscall.Errno) {
	if !NoOpenat2.Load() {
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveBeneath}
		for attempt := 0; ; attempt++ {
			fd, err := unix.Openat2(dirfd, p, &how)
			switch {
			case err == nil:
				return fd, 0
			case err == unix.EAGAIN && attempt < 8:
				// RESOLVE_BENEATH asks for a retry when a rename raced
				// the walk; it never does without "..", but a retry is
				// cheap where a spurious failure is not.
				continue
			case err == unix.ENOSYS:
				NoOpenat2.Store(true)
			default:
				return -1, toErrno(err)
			}
			break
		}
	}
	// One name at a time: O_NOFOLLOW|O_PATH opens a symlink itself, and
	// O_DIRECTORY then refuses it with ENOTDIR, so none is followed.
	d := Dir{FD: dirfd}
	for _, name := range strings.Split(p, "/") {
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			d.Close()
			return -1, syscall.EXDEV // what RESOLVE_BENEATH answers to an escape
		}
		fd, err := unix.Openat(d.FD, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		d.Close()
		if err != nil {
			return -1, toErrno(err)
		}
		d = Dir{FD: fd, Own: true}
	}
	if !d.Own { // p named dirfd itself: hand out a descriptor of our own
		fd, err := unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, toErrno(err)
		}
		return fd, 0
	}
	return d.FD, 0
}

// StatAt stats leaf in d without following a final symlink (statx(2) with
// the birth time, as go-fuse's loopback: it picks the inode generation).
// leaf "" stats d itself. Errors: those of statx, as errno.
func StatAt(d Dir, leaf string, st *syscall.Stat_t) (gen uint64, errno syscall.Errno) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if leaf == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var x unix.Statx_t
	err := unix.Statx(d.FD, leaf, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x)
	if err == unix.ENOSYS { // no statx: fstatat, and no birth time
		var ust unix.Stat_t
		if err := unix.Fstatat(d.FD, leaf, &ust, flags); err != nil {
			return 0, toErrno(err)
		}
		StatFromUnix(&ust, st)
		return 1, 0
	}
	if err != nil {
		return 0, toErrno(err)
	}
	StatFromStatx(&x, st)
	if x.Mask&unix.STATX_BTIME == 0 || (x.Btime.Sec == 0 && x.Btime.Nsec == 0) {
		return 1, 0 // go-fuse's genFromBtime
	}
	return uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec), 0
}

// PathFdAt opens leaf in d as an O_PATH descriptor without following it (a
// symlink is opened as itself) and stats it into st; the caller closes the
// descriptor. Errors: those of openat(2) and statx(2), as errno.
func PathFdAt(d Dir, leaf string, st *syscall.Stat_t) (int, syscall.Errno) {
	fd, err := unix.Openat(d.FD, leaf, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, toErrno(err)
	}
	if _, errno := StatAt(Dir{FD: fd}, "", st); errno != 0 {
		unix.Close(fd)
		return -1, errno
	}
	return fd, 0
}

// OpenForHashIn opens leaf in the directory d read-only for the guard's
// hashing, not following a final symlink (ELOOP), without touching its
// atime when permitted (O_NOATIME, dropped on EPERM); rel names the
// returned file, extra adds open flags (crossmount.Mode.HashFlags). Errors:
// those of openat(2).
func OpenForHashIn(d Dir, leaf, rel string, extra int) (*os.File, error) {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | extra
	open := func(flags int) (int, error) { return unix.Openat(d.FD, leaf, flags, 0) }
	fd, err := OpenRetryDirect(flags|unix.O_NOATIME, open)
	if err == unix.EPERM {
		fd, err = OpenRetryDirect(flags, open)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}
