package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// linkByHandle gives tn, a node without a name (an O_TMPFILE file), the
// name name in the directory dirRel: linkat(2) of the /proc/self/fd link
// of one of tn's open handles, followed, as the caller's own
// linkat(/proc/self/fd/N, AT_SYMLINK_FOLLOW) does natively (the
// write-then-name pattern of atomic file creation). The backing kernel
// refuses what it refuses natively: an O_TMPFILE opened with O_EXCL, or a
// file unlinked while open (ENOENT; the kernel already refuses both
// before the LINK is sent). EXDEV when tn has no open handle, as the
// loopback answers for a node without a name.
//
// The new name is not the session's own file for the guard: its content
// was written through an unguarded handle, so, like a file that appeared
// outside the mount, it must be read before it is changed by name.
func (n *Node) linkByHandle(ctx context.Context, at dirFd, dirRel string, tn *Node, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fd, _, ok := tn.handleFd(false)
	if !ok {
		return nil, syscall.EXDEV
	}
	defer unix.Close(fd)
	if errno := n.exemptLinkByHandle(ctx, fd, childPath(dirRel, name)); errno != 0 {
		return nil, errno // never an exempt alias of a guarded name (exemptname.go)
	}
	src := procPath(dirFd{FD: fd}, "")
	return n.makeAt(ctx, at, dirRel, name, 0, false, out, new(syscall.Stat_t), func(d dirFd) error {
		return unix.Linkat(unix.AT_FDCWD, src, d.FD, name, unix.AT_SYMLINK_FOLLOW)
	})
}
