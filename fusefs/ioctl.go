package fusefs

// ioctl(2) through the mount. The kernel forwards a file's ioctls to the
// daemon (FUSE_IOCTL), which runs them on the backing descriptor
// (fs.LoopbackFile.Ioctl). Some change the backing inode: chattr(1)'s
// FS_IOC_SETFLAGS and FS_IOC_FSSETXATTR set inode flags and the ctime. The
// watcher tells own changes from external ones by comparing a file's lstat
// with what the daemon's last own change of it left (package watcher), so
// such an ioctl must be bracketed as an own change like any other: else the
// pending event of the write just before it is judged against a ctime the
// ioctl has moved since, taken for an external edit, and the file's cached
// state is dropped under its writers (stress-ng's iomix stressor, which
// toggles inode flags between writes, had writes refused as stale this
// way). Every ioctl is bracketed, whatever its command: telling the ones
// that change the inode apart would need a list of every file system's
// commands, and bracketing a read-only one only makes the watcher put off
// judging the file's events until it returns.
//
// The one exception is TCGETS, isatty(3)'s probe, which sed, Python's
// open() and most stdio programs send for every file they open: it is
// answered ENOTTY at once, with no bracket and no backing call. A FUSE
// request for it comes only from a regular file or directory of the mount
// (a device or fifo node's ioctls go to its driver), which is never a
// terminal, and every backing file system answers ENOTTY without changing
// anything.
//
// ioctls are not guarded: inode flags are attributes, not content, allowed
// like chmod, chown and utimens (README.md, the guard's table). The kernel
// itself checks the caller's right to change them
// (CAP_LINUX_IMMUTABLE for the immutable and append-only flags).

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// ownIoctl runs an ioctl of a handle of rel's file as an own change;
// TCGETS gets ENOTTY at once (see above).
func (f *FS) ownIoctl(rel string, h fs.FileIoctler, ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	if cmd == unix.TCGETS {
		return 0, syscall.ENOTTY
	}
	defer f.oc.ownChange(rel)()
	return h.Ioctl(ctx, cmd, arg, input, output)
}

// Ioctl runs an ioctl on the handle's backing descriptor as an own change
// (see above); the errno is the backing file system's.
func (h *File) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	if cmd == unix.TCGETS {
		return 0, syscall.ENOTTY // nothing to settle: see above
	}
	h.fs.oc.settleDeferredNode(h.node) // ownattr.go: FS_IOC_SETFLAGS and the like set the ctime
	return h.fs.ownIoctl(h.node.rel(), h.loopbackOps, ctx, cmd, arg, input, output)
}

// Ioctl runs an ioctl on the handle's backing descriptor as an own change.
func (p *plainFile) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	return p.node.fs.ownIoctl(p.node.rel(), p.loopbackOps, ctx, cmd, arg, input, output)
}

// Ioctl runs an ioctl on the handle's backing descriptor as an own change
// (a read-only handle may change inode flags too: the kernel asks only
// that the caller own the file).
func (k *keptFile) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	return k.node.fs.ownIoctl(k.node.rel(), k.LoopbackFile, ctx, cmd, arg, input, output)
}
