package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Attribute rules of the backing filesystem that the daemon's own syscalls
// (as root, on the caller's behalf) do not give by themselves
// (docs/DESIGN.md#posix-owner-ctime).

// entryGid returns the group a new entry of a caller whose fsgid is
// callerGid gets in the directory parent: the directory's group when it
// has the set-group-ID bit (the backing filesystem gave the entry that
// group already, so -1: keep it), else callerGid. On a failed stat of
// parent it answers callerGid, as before the rule.
func entryGid(parent dirFd, callerGid uint32) int {
	var st syscall.Stat_t
	if syscall.Fstat(parent.fd, &st) == nil && st.Mode&syscall.S_ISGID != 0 {
		return -1
	}
	return int(callerGid)
}

// setattrChanges is the part of a SETATTR's valid mask that changes an
// attribute (mode, owner, size, times).
const setattrChanges = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE |
	fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_CTIME

// onlyCtime reports whether in changes no attribute: the SETATTR the
// kernel sends for chown(path, -1, -1), which natively still sets ctime
// to now (notify_change with ATTR_CTIME alone). Without a writeback cache
// the kernel does not pass the ctime on (FATTR_CTIME), so the mask is
// empty.
func onlyCtime(in *fuse.SetAttrIn) bool {
	return in.Valid&setattrChanges == 0 || in.Valid&setattrChanges == fuse.FATTR_CTIME
}

// touchCtimeAt sets leaf's ctime to now as chown(leaf, -1, -1) does,
// without following a symlink.
func touchCtimeAt(d dirFd, leaf string) syscall.Errno {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if leaf == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Fchownat(d.fd, leaf, -1, -1, flags); err != nil {
		return err.(syscall.Errno)
	}
	return 0
}

// ownWhiteout gives the whiteout a RENAME_WHITEOUT left at name in the
// directory dirRel (d, or opened again when d.fd < 0) to the caller of
// ctx, as natively (the kernel makes it with the renaming process's fsuid
// and fsgid; the daemon's renameat2 made it root's). Errors are ignored:
// the rename has succeeded.
func (n *Node) ownWhiteout(ctx context.Context, d dirFd, dirRel, name string) {
	if d.fd < 0 {
		var errno syscall.Errno
		if d, errno = n.fs.openDir(dirRel); errno != 0 {
			return
		}
		defer d.close()
	}
	preserveOwner(ctx, d, d, name)
}
