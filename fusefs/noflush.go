package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// noFlushFlag returns FOPEN_NOFLUSH for a read-only open (openFlags are
// OPEN's flags), 0 otherwise: the kernel then sends no FLUSH when a
// descriptor of the handle is closed (fs/fuse/file.c, fuse_flush; only
// without a writeback cache, which rubinofs never asks for). Every handle
// type's Flush is a no-op without writes: File credits writes and settles a
// daemon-first change that only a writable handle makes, a control file's
// handle (internal/ctlfs) passes a partial line only a write leaves, and
// the loopback's dup+close of the backing descriptor flushes nothing of a
// read-only descriptor. RELEASE
// still arrives and does the handle's bookkeeping.
//
// rawHooks.Open asks for it only while no reader is attached to
// .rubino/accesslog: a handle opened while one is shows its closes there as
// FLUSH lines, under the session that opened it.
// docs/DESIGN.md#noflush-read-only
func noFlushFlag(openFlags uint32) uint32 {
	if openFlags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return fuse.FOPEN_NOFLUSH
	}
	return 0
}
