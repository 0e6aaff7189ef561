package fusefs

import (
	"context"
	"syscall"
)

// Attribute rules of the backing filesystem that the daemon's own syscalls
// (as root, on the caller's behalf) do not give by themselves
// (docs/DESIGN.md#posix-owner-ctime).

// ownWhiteout gives the whiteout a RENAME_WHITEOUT left at name in the
// directory dirRel (d, or opened again when d.FD < 0) to the caller of
// ctx, as natively (the kernel makes it with the renaming process's fsuid
// and fsgid; the daemon's renameat2 made it root's). Errors are ignored:
// the rename has succeeded.
func (n *Node) ownWhiteout(ctx context.Context, d dirFd, dirRel, name string) {
	if d.FD < 0 {
		var errno syscall.Errno
		if d, errno = n.fs.bk.openDir(dirRel); errno != 0 {
			return
		}
		defer d.Close()
	}
	preserveOwner(ctx, d, d, name)
}
