package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// withOpenFd runs fn with the descriptor of one of n's open file handles
// and returns its result, or ok false (fn not run) when n has no open
// handle. The descriptor is n's own inode by construction, whatever its
// name leads to now, and it stays open while fn runs: fn runs under the
// handles' lock, which a handle's Release takes (through its drop) before
// it closes the descriptor. fn must not block on anything but the backing
// file system. When a non-nil usable refuses the descriptor, ok is false.
func (n *Node) withOpenFd(fn func(fd int) (int, error), usable func(fd int) bool) (sz int, errno syscall.Errno, ok bool) {
	o := &n.handles
	o.mu.Lock()
	defer o.mu.Unlock()
	for lf := range o.set {
		fd, live := lf.PassthroughFd()
		if !live {
			continue
		}
		if usable != nil && !usable(fd) {
			return 0, 0, false
		}
		sz, err := fn(fd)
		return sz, fs.ToErrno(err), true
	}
	return 0, 0, false
}

// readXattr runs the xattr read (getxattr or listxattr) on n: through one
// of its open handles when it has one (byFd: fgetxattr, flistxattr; one
// syscall, no walk, and the open inode itself even once its name is gone:
// the kernel's security.capability probe on write and chown, and fgetxattr
// on a descriptor of a file unlinked while open, arrive while a handle is
// open), else by name (byName on the directory and leaf from prepareAt; see
// syscallcompat xattr.go, checked by xattrAt to lead to n's own inode).
// Errors: the backing call's, as errno; ESTALE for another file.
// docs/DESIGN.md#xattr-probes
func (n *Node) readXattr(byFd func(fd int) (int, error), byName func(d dirFd, leaf string) (int, error)) (uint32, syscall.Errno) {
	if sz, errno, ok := n.withOpenFd(byFd, nil); ok {
		return uint32(max(sz, 0)), errno
	}
	var sz int
	errno := n.xattrAt(n.rel(), func(d dirFd, leaf string) (err error) {
		sz, err = byName(d, leaf)
		return err
	})
	return uint32(max(sz, 0)), errno
}

// Getxattr reads an extended attribute of the node itself (readXattr).
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return n.readXattr(
		func(fd int) (int, error) { return unix.Fgetxattr(fd, attr, dest) },
		func(d dirFd, leaf string) (int, error) { return getxattrAt(d, leaf, attr, dest) })
}

// Listxattr lists the extended attributes of the node itself (readXattr).
func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return n.readXattr(
		func(fd int) (int, error) { return unix.Flistxattr(fd, dest) },
		func(d dirFd, leaf string) (int, error) { return listxattrAt(d, leaf, dest) })
}
