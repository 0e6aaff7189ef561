package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Clearing set-user-ID and set-group-ID bits on writes and truncations by
// callers without CAP_FSETID (docs/DESIGN.md#killpriv). The mount does not
// negotiate FUSE_HANDLE_KILLPRIV(_V2): the kernel removes the bits itself,
// as a SETATTR mode change, before a write through the page cache, a
// truncate(2) and an ftruncate(2). Two paths get no such SETATTR and are
// completed here, with the same rule the kernel's FUSE setattr applies
// (fs/fuse/dir.c): set-user-ID always, set-group-ID only with group-exec.
//   - a write through a direct-I/O handle (File.dropPrivs);
//   - an open with O_TRUNC: with FUSE_ATOMIC_O_TRUNC the truncation is the
//     daemon's OPEN, and the kernel's follow-up setattr (which carries the
//     mode change) is never sent (fs/fuse/dir.c, ATTR_OPEN).
//
// The daemon writes and truncates as root, which keeps the bits, so the
// caller's lack of CAP_FSETID is taken from its uid: uid 0 is taken to hold
// it, every other uid not to (go-fuse's node API passes neither the WRITE's
// nor the OPEN's kill flags).

// callerKillsPriv reports whether the caller of ctx is taken to lack
// CAP_FSETID: a FUSE request by a uid other than 0.
func callerKillsPriv(ctx context.Context) bool {
	c, ok := ctx.(*fuse.Context)
	return ok && c.Uid != 0
}

// killPrivOnTrunc completes an O_TRUNC open of lf by the caller of ctx:
// the set-id bits the kernel's own truncation would have removed
// (docs/DESIGN.md#killpriv). A no-op without O_TRUNC in flags.
func killPrivOnTrunc(ctx context.Context, flags uint32, fd int) {
	if flags&syscall.O_TRUNC != 0 && callerKillsPriv(ctx) {
		killPrivFd(fd)
	}
}
