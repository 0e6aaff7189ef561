package fusefs

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// The caller's umask is applied by the daemon, not by the kernel
// (FUSE_DONT_MASK; docs/DESIGN.md#posix-acl): natively a directory with a
// default POSIX ACL gives new entries that ACL instead of the umask, and
// only the daemon can see the backing directory's ACL. The kernel sends
// the unmasked mode and the umask with CREATE, MKDIR, MKNOD and TMPFILE;
// go-fuse's node API passes on the mode only, so rawHooks keeps the umask
// of each such request by its cancel channel (unique among in-flight
// requests; the bridge hands it to the node as fuse.Context.Cancel) until
// the request returns.

// fallbackUmask is applied when a request's umask is unknown (a node
// method reached without rawHooks, which the mount never does): the
// common default, on the safe side.
const fallbackUmask = 0o022

// createMode returns the mode a new entry in the backing directory d gets
// for the request of ctx: mode as the kernel sent it, less the caller's
// umask unless d has a default ACL (then the backing filesystem applies
// the ACL, as natively; the daemon's own umask is 0).
func createMode(ctx context.Context, d dirFd, mode uint32) uint32 {
	umask := uint32(fallbackUmask)
	if c, ok := ctx.(*fuse.Context); ok {
		if v, ok := syscallcompat.UmaskOf(c.Cancel); ok {
			umask = v
		}
	}
	if umask&0o777 == 0 || syscallcompat.HasDefaultACL(d) {
		return mode
	}
	return mode &^ (umask & 0o777)
}
