package fusefs

// The single backing-access layer. Every access of the daemon to a
// backing file starts from the workspace root descriptor (backing.rootFd, FS.bk), opened
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

// Close releases the backing root descriptor and the descriptors of every
// file and directory handle whose RELEASE never arrived (the kernel sends it
// asynchronously; a mount torn down first never gets it). It must be called only once
// the server has stopped (no FUSE request in flight): a request still
// running could otherwise use a descriptor number reused for another file.
// Later backing accesses fail with EBADF. Idempotent; never fails.
func (f *FS) Close() error {
	f.handles.closeHandles() // handles whose RELEASE never came (handles.go)
	f.unpins.close()         // pins of removed files still queued (lateclose.go)
	if fd := f.bk.rootFd.Swap(-1); fd >= 0 {
		unix.Close(int(fd))
	}
	return nil
}

// backing is the mount's way to its backing directory: the root
// descriptor every access starts from, walked beneath with openat2
// (docs/DESIGN.md#dirfd-walk). Safe for concurrent use once New set it.
type backing struct {
	rootFd  atomic.Int64     // O_PATH descriptor of the root; -1 after Close
	rootDev uint64           // st_dev of the root (stableAttr)
	cross   *crossmount.Mode // the open flags of hashing reads (openForHashAt)
}

// rootDir returns the backing root descriptor, not owned (-1 after Close).
func (b *backing) rootDir() dirFd { return dirFd{FD: int(b.rootFd.Load())} }

// openDir opens the workspace-relative directory rel ("" is the root) for
// *at calls. Errors (as errno): ELOOP when a component is a symlink (also
// one that replaced a directory since the kernel looked it up: the daemon
// never follows it), ENOTDIR when one is not a directory, ENOENT, EACCES,
// EXDEV for a ".." escaping the root (never built by go-fuse's tree). The
// caller closes the result.
func (b *backing) openDir(rel string) (dirFd, syscall.Errno) {
	d := b.rootDir()
	if d.FD < 0 {
		return dirFd{FD: -1}, syscall.EBADF
	}
	for rel != "" {
		piece := rel
		if len(piece) > walkPiece {
			i := strings.LastIndexByte(rel[:walkPiece], '/')
			if i <= 0 {
				d.Close()
				return dirFd{FD: -1}, syscall.ENAMETOOLONG
			}
			piece, rel = rel[:i], rel[i+1:]
		} else {
			rel = ""
		}
		fd, errno := openDirBeneath(d.FD, piece)
		d.Close()
		if errno != 0 {
			return dirFd{FD: -1}, errno
		}
		d = dirFd{FD: fd, Own: true}
	}
	return d, 0
}

// prepareAt is the one way to a backing file: it opens the directory of the
// workspace-relative path rel and returns it with the leaf name, for an *at
// call that must not follow a final symlink. The root itself ("") is "."
// in the root descriptor. Errors: those of openDir.
func (b *backing) prepareAt(rel string) (dirFd, string, syscall.Errno) {
	if rel == "" {
		d := b.rootDir()
		if d.FD < 0 {
			return d, "", syscall.EBADF
		}
		return d, ".", 0
	}
	dir, leaf := path.Split(rel)
	d, errno := b.openDir(strings.TrimSuffix(dir, "/"))
	return d, leaf, errno
}

// lstatRel stats the workspace-relative path rel without following any
// symlink on the way or at the end. Errors: those of prepareAt and statx.
func (b *backing) lstatRel(rel string, st *syscall.Stat_t) syscall.Errno {
	d, leaf, errno := b.prepareAt(rel)
	if errno != 0 {
		return errno
	}
	defer d.Close()
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
func (b *backing) stableAttr(st *syscall.Stat_t, gen uint64) fs.StableAttr {
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	swappedRootDev := (b.rootDev << 32) | (b.rootDev >> 32)
	return fs.StableAttr{Mode: uint32(st.Mode), Gen: gen, Ino: (swapped ^ swappedRootDev) ^ st.Ino}
}

// openForHashAt opens the workspace-relative file rel read-only for the
// guard's hashing, beneath the root and through no symlink (a final
// symlink fails with ELOOP), without touching its atime when permitted
// (see openForHash).
func (b *backing) openForHashAt(rel string) (*os.File, error) {
	d, leaf, errno := b.prepareAt(rel)
	if errno != 0 {
		return nil, errno
	}
	defer d.Close()
	return openForHashIn(d, leaf, rel, b.cross.HashFlags())
}
