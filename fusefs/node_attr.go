package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

// Setattr changes attributes. A size change of an existing regular file is a
// guarded mutation (op truncate): through a handle (ftruncate) it follows the
// handle's write right, by path (truncate(2)) the guard decides here and the
// session is credited right after. chmod, chown and utimens are not guarded:
// touch with identical bytes keeps records fresh because the hash decides.
func (n *Node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetSize(); !ok {
		defer n.fs.ownChange(n.rel())()
		return n.LoopbackNode.Setattr(ctx, unwrapHandle(fh), in, out)
	}
	if h, ok := fh.(*File); ok {
		var errno syscall.Errno
		merr := h.mutate(guard.OpTruncate, func() syscall.Errno {
			errno = n.LoopbackNode.Setattr(ctx, h.lf, in, out)
			return errno
		})
		if merr != 0 {
			return merr
		}
		return errno
	}
	rel := n.rel()
	defer n.fs.ownChange(rel)()
	if !n.fs.tracks(rel) {
		return n.LoopbackNode.Setattr(ctx, unwrapHandle(fh), in, out)
	}
	gs, unlock := n.fs.lockFresh(rel)
	defer unlock()
	if !gs[0].ok {
		return n.LoopbackNode.Setattr(ctx, unwrapHandle(fh), in, out)
	}
	st, id := gs[0].st, gs[0].id
	c := n.fs.callerOf(ctx)
	// A truncate by path changes the backing file before the kernel's
	// cache; readers registering meanwhile are in flux. (After our reply
	// the kernel updates its cache within the same syscall; a reader
	// registering in that last window is not covered: no later request
	// of this caller tells us it is done.)
	n.fs.addFlux(id, 1)
	defer n.fs.addFlux(id, -1)
	if n.fs.guarded(c) {
		if errno := n.fs.decide(c, guard.OpTruncate, n.fs.target(rel, &st)); errno != 0 {
			return errno
		}
	}
	if errno := n.LoopbackNode.Setattr(ctx, unwrapHandle(fh), in, out); errno != 0 {
		return errno
	}
	n.fs.cfg.Guard.NoteMutation(id, c.session)
	if err := syscall.Lstat(n.fs.backing(rel), &st); err == nil {
		if err := n.fs.cfg.Guard.NoteWrite(c.session, n.fs.target(rel, &st)); err != nil {
			n.fs.log.Printf("crediting truncate of %s: %v", rel, err)
		}
	}
	return 0
}

// unwrapHandle returns the loopback handle under one of ours, for loopback
// methods that type-assert their handle.
func unwrapHandle(fh fs.FileHandle) fs.FileHandle {
	switch h := fh.(type) {
	case *File:
		return h.lf
	case *plainFile:
		return h.loopbackOps
	case *ptWriter:
		return h.LoopbackFile
	}
	return fh
}

// CopyFileRange copies between two open files in the backing filesystem.
// Writing into a guarded file follows the destination handle's write right,
// exactly like a write(2) through it (op copy_file_range).
func (n *Node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle,
	offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok1 := unwrapHandle(fhIn).(*fs.LoopbackFile)
	dst, ok2 := unwrapHandle(fhOut).(*fs.LoopbackFile)
	if !ok1 || !ok2 {
		return 0, syscall.ENOTSUP
	}
	var count uint32
	copyOp := func() syscall.Errno {
		oi, oo := int64(offIn), int64(offOut)
		n, err := unix.CopyFileRange(mustFd(in), &oi, mustFd(dst), &oo, int(length), int(flags))
		count = uint32(max(n, 0))
		return fs.ToErrno(err)
	}
	if h, ok := fhOut.(*File); ok {
		return count, h.mutate(guard.OpCopyInto, copyOp)
	}
	return count, copyOp()
}

// Setxattr sets an extended attribute (an ACL copy by sed -i or cp -p
// changes the mode this way): never guarded, an own change for the watcher.
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	defer n.fs.ownChange(n.rel())()
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

// Removexattr removes an extended attribute, as an own change.
func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	defer n.fs.ownChange(n.rel())()
	return n.LoopbackNode.Removexattr(ctx, attr)
}
