package fusefs

// The single backing-access layer. Every access of the daemon to a
// backing file starts from the workspace root descriptor (FS.rootFd), opened
// once at New: the directory of the file is reached with openat2(2) under
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, and the file itself with an *at call
// on its name that does not follow a final symlink (AT_SYMLINK_NOFOLLOW,
// O_NOFOLLOW). So
//
//   - a symlink inside the workspace is given to the kernel as a symlink and
//     never followed by the daemon: a directory swapped for a symlink to "/"
//     between the kernel's lookup and the operation fails the operation
//     (ELOOP) instead of reaching outside;
//   - no absolute backing path is built, so workspace paths longer than
//     PATH_MAX work (the walk is cut into pieces openat2 accepts).
//
// The model is gocryptfs' prepareAtSyscall (internal/fusefrontend): one
// function gives a directory descriptor and a leaf name, and each operation
// is the matching *at syscall. The watcher (package watcher, and internal/invalidate) still
// uses paths: it only watches, it serves no request.

import (
	"fmt"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/crossmount"
)

// walkPiece is the longest path string handed to one openat2 call. openat2
// refuses a path of PATH_MAX (4096) bytes or more with ENAMETOOLONG, so a
// longer workspace-relative path is walked in pieces cut at '/'; a piece
// always fits one name (NAME_MAX is 255).
const walkPiece = 2000

// resolveBeneath is how every directory of the walk is resolved: below the
// root descriptor, through no symlink at all (RESOLVE_NO_SYMLINKS implies
// RESOLVE_NO_MAGICLINKS; both are named for the reader).
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// noOpenat2 is set once openat2 answered ENOSYS (kernels before 5.6, or a
// seccomp filter that does not know it); the walk then goes one name at a
// time with openat(O_NOFOLLOW), which is as strict, only slower.
var noOpenat2 atomic.Bool

// dirFd is a directory descriptor of the backing workspace for *at calls:
// the root descriptor itself (not owned) or one the walk opened (owned).
type dirFd struct {
	fd  int
	own bool
}

// close releases an owned descriptor.
func (d dirFd) close() {
	if d.own {
		unix.Close(d.fd)
	}
}

// openRoot opens the backing root as an O_PATH directory descriptor: the
// start of every backing access. backing may be /proc/self/fd/N (in-place
// mounts); that magic link is followed here, once, by design.
func openRoot(backing string) (int, error) {
	fd, err := unix.Open(backing, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// Close releases the backing root descriptor and the descriptors of every
// file and directory handle whose RELEASE never arrived (the kernel sends it
// asynchronously; a mount torn down first never gets it). It must be called only once
// the server has stopped (no FUSE request in flight): a request still
// running could otherwise use a descriptor number reused for another file.
// Later backing accesses fail with EBADF. Idempotent; never fails.
func (f *FS) Close() error {
	f.closeHandles() // handles whose RELEASE never came (handles.go)
	if fd := f.rootFd.Swap(-1); fd >= 0 {
		unix.Close(int(fd))
	}
	return nil
}

// rootDir returns the backing root descriptor, not owned (-1 after Close).
func (f *FS) rootDir() dirFd { return dirFd{fd: int(f.rootFd.Load())} }

// openDir opens the workspace-relative directory rel ("" is the root) for
// *at calls. Errors (as errno): ELOOP when a component is a symlink (also
// one that replaced a directory since the kernel looked it up: the daemon
// never follows it), ENOTDIR when one is not a directory, ENOENT, EACCES,
// EXDEV for a ".." escaping the root (never built by go-fuse's tree). The
// caller closes the result.
func (f *FS) openDir(rel string) (dirFd, syscall.Errno) {
	d := f.rootDir()
	if d.fd < 0 {
		return dirFd{fd: -1}, syscall.EBADF
	}
	for rel != "" {
		piece := rel
		if len(piece) > walkPiece {
			i := strings.LastIndexByte(rel[:walkPiece], '/')
			if i <= 0 {
				d.close()
				return dirFd{fd: -1}, syscall.ENAMETOOLONG
			}
			piece, rel = rel[:i], rel[i+1:]
		} else {
			rel = ""
		}
		fd, errno := openDirBeneath(d.fd, piece)
		d.close()
		if errno != 0 {
			return dirFd{fd: -1}, errno
		}
		d = dirFd{fd: fd, own: true}
	}
	return d, 0
}

// openDirBeneath opens the relative directory path p below dirfd without
// following any symlink.
func openDirBeneath(dirfd int, p string) (int, syscall.Errno) {
	if !noOpenat2.Load() {
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
				noOpenat2.Store(true)
			default:
				return -1, fs.ToErrno(err)
			}
			break
		}
	}
	// One name at a time: O_NOFOLLOW|O_PATH opens a symlink itself, and
	// O_DIRECTORY then refuses it with ENOTDIR, so none is followed.
	d := dirFd{fd: dirfd}
	for _, name := range strings.Split(p, "/") {
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			d.close()
			return -1, syscall.EXDEV // what RESOLVE_BENEATH answers to an escape
		}
		fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		d.close()
		if err != nil {
			return -1, fs.ToErrno(err)
		}
		d = dirFd{fd: fd, own: true}
	}
	if !d.own { // p named dirfd itself: hand out a descriptor of our own
		fd, err := unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fs.ToErrno(err)
		}
		return fd, 0
	}
	return d.fd, 0
}

// prepareAt is the one way to a backing file: it opens the directory of the
// workspace-relative path rel and returns it with the leaf name, for an *at
// call that must not follow a final symlink. The root itself ("") is "."
// in the root descriptor. Errors: those of openDir.
func (f *FS) prepareAt(rel string) (dirFd, string, syscall.Errno) {
	if rel == "" {
		d := f.rootDir()
		if d.fd < 0 {
			return d, "", syscall.EBADF
		}
		return d, ".", 0
	}
	dir, leaf := path.Split(rel)
	d, errno := f.openDir(strings.TrimSuffix(dir, "/"))
	return d, leaf, errno
}

// statAt stats leaf in d without following a final symlink (statx(2) with
// the birth time, as go-fuse's loopback: it picks the inode generation).
// leaf "" stats d itself. Errors: those of statx, as errno.
func statAt(d dirFd, leaf string, st *syscall.Stat_t) (gen uint64, errno syscall.Errno) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if leaf == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var x unix.Statx_t
	err := unix.Statx(d.fd, leaf, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x)
	if err == unix.ENOSYS { // no statx: fstatat, and no birth time
		var ust unix.Stat_t
		if err := unix.Fstatat(d.fd, leaf, &ust, flags); err != nil {
			return 0, fs.ToErrno(err)
		}
		crossmount.StatFromUnix(&ust, st)
		return 1, 0
	}
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	crossmount.StatFromStatx(&x, st)
	if x.Mask&unix.STATX_BTIME == 0 || (x.Btime.Sec == 0 && x.Btime.Nsec == 0) {
		return 1, 0 // go-fuse's genFromBtime
	}
	return uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec), 0
}

// lstatRel stats the workspace-relative path rel without following any
// symlink on the way or at the end. Errors: those of prepareAt and statx.
func (f *FS) lstatRel(rel string, st *syscall.Stat_t) syscall.Errno {
	d, leaf, errno := f.prepareAt(rel)
	if errno != 0 {
		return errno
	}
	defer d.close()
	_, errno = statAt(d, leaf, st)
	return errno
}

// stableAttr is the identity of a backing file in go-fuse's tree and to
// the kernel: its type, its generation gen (from the birth time, statAt)
// and its inode number. The number is the backing inode number for a file
// on the workspace root's device, so stat through the mount shows the
// backing numbers; for a file on another device (a mount inside the
// workspace) the device, its 32-bit halves swapped, is XORed in: it lands
// above the inode numbers filesystems hand out in practice, so equal
// numbers on two devices stay apart.
func (f *FS) stableAttr(st *syscall.Stat_t, gen uint64) fs.StableAttr {
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	swappedRootDev := (f.rootDev << 32) | (f.rootDev >> 32)
	return fs.StableAttr{Mode: uint32(st.Mode), Gen: gen, Ino: (swapped ^ swappedRootDev) ^ st.Ino}
}

// procPath names leaf in d through /proc/self/fd, for the calls that have
// no *at form (l*xattr) or none that works on an O_PATH descriptor (chmod,
// truncate). The magic link /proc/self/fd/N is the descriptor's directory
// itself, so nothing in the workspace is resolved by name but leaf, and
// leaf is not followed by the l* calls. "" names d itself.
func procPath(d dirFd, leaf string) string {
	if leaf == "" {
		return fmt.Sprintf("/proc/self/fd/%d", d.fd)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.fd, leaf)
}

// openForHashAt opens the workspace-relative file rel read-only for the
// guard's hashing, beneath the root and through no symlink (a final
// symlink fails with ELOOP), without touching its atime when permitted
// (see openForHash).
func (f *FS) openForHashAt(rel string) (*os.File, error) {
	d, leaf, errno := f.prepareAt(rel)
	if errno != 0 {
		return nil, errno
	}
	defer d.close()
	return openForHashIn(d, leaf, rel, f.cross.HashFlags())
}

// openForHashIn is openForHashAt for leaf in the directory d (rel names
// the file) with the extra open flags extra (crossmount.Mode.HashFlags).
func openForHashIn(d dirFd, leaf, rel string, extra int) (*os.File, error) {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | extra
	open := func(flags int) (int, error) { return unix.Openat(d.fd, leaf, flags, 0) }
	fd, err := crossmount.OpenRetryDirect(flags|unix.O_NOATIME, open)
	if err == unix.EPERM {
		fd, err = crossmount.OpenRetryDirect(flags, open)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}
