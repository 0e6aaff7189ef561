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
//
// Without a handle, the name may no longer lead to n's inode: the file was
// unlinked while open, and fchmod, fchown, futimens (which the kernel sends
// without a handle), or truncate(2) of its /proc/PID/fd link, are to change
// it. Those go to the descriptor of one of n's open handles (handles.go;
// setattrFd for attributes, truncateFd for a size), never to whatever file
// the name leads to now, and are no own change of that name for the
// watcher (an external replacement of the name must not be taken for
// ours). Without an open handle, or when its file was moved out of the
// workspace (insideOrGone, docs/DESIGN.md#handle-fallback): ENOENT when the
// name is gone, ESTALE when it leads to another file (see setattrAt).
func (n *Node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.isRoot() {
		defer n.fs.hideShadowedLink(&out.Attr) // as Getattr reports it
	}
	rel := n.rel()
	_, sizing := in.GetSize()
	if h, ok := asFile(fh); ok && sizing {
		var errno syscall.Errno
		merr := h.mutate(guard.OpTruncate, func() syscall.Errno {
			errno = n.setattrAt(ctx, rel, h.lf, in, out)
			return errno
		})
		if merr != 0 {
			return merr
		}
		return errno
	}
	if _, isFile := unwrapHandle(fh).(fs.FileSetattrer); !isFile {
		if errno := n.nameErrno(rel); errno != 0 {
			fd, writable, ok := n.handleFd(sizing)
			if !ok {
				return errno
			}
			defer unix.Close(fd)
			if !n.fs.bk.insideOrGone(fd) {
				return errno // moved out of the workspace: as by name
			}
			if sizing {
				return n.truncateFd(ctx, rel, fd, writable, in, out)
			}
			n.fs.oc.settleDeferredNode(n) // ownattr.go: the change sets the ctime
			return setattrFd(fd, writable, in, out)
		}
	}
	if !sizing {
		n.fs.oc.settleDeferredNode(n) // ownattr.go: the change sets the ctime
		// A mode change is journaled (chmod); a change of the mtime is
		// noted, not recorded (jTimes: a rewind restores no times, but
		// the conflict rule compares the mtime); chown is neither
		// (docs/DESIGN.md#journal-hook). None is guarded.
		jop := ""
		if _, chmod := in.GetMode(); chmod {
			jop = jChmod
		} else if _, mtime := in.GetMTime(); mtime {
			jop = jTimes
		}
		return n.fs.mutate(ctx, mutation{
			kind:    fresh,
			subject: subject{names: []mutName{{rel: rel}}},
			jop:     jop,
			run:     func([]dirFd) syscall.Errno { return n.setattrAt(ctx, rel, unwrapHandle(fh), in, out) },
		})
	}
	// A truncate by path is a guarded mutation
	// (docs/DESIGN.md#mutation-path). It changes the backing file before
	// the kernel's cache, so readers registering meanwhile are in flux
	// (change truncated). After our reply the kernel updates its cache within the same
	// syscall; a reader registering in that last window is not covered: no
	// later request of this caller tells us it is done.
	return n.fs.mutate(ctx, mutation{
		subject: subject{names: []mutName{{rel: rel, change: truncated}}},
		asks:    []ask{{0, guard.OpTruncate}},
		jop:     jTruncate,
		run: func([]dirFd) syscall.Errno {
			return n.setattrAt(ctx, rel, unwrapHandle(fh), in, out)
		},
	})
}

// nameErrno returns 0 when the workspace path rel leads to n's own inode,
// else why not: the lookup's errno (ENOENT when the name is gone), or
// ESTALE when it leads to another file.
func (n *Node) nameErrno(rel string) syscall.Errno {
	d, leaf, errno := n.fs.bk.prepareAt(rel)
	if errno != 0 {
		return errno
	}
	defer d.Close()
	var st syscall.Stat_t
	gen, errno := statAt(d, leaf, &st)
	if errno == 0 && !n.sameInode(&st, gen) {
		errno = syscall.ESTALE
	}
	return errno
}

// truncateFd is a size change (with any other attributes of in) of n's
// inode through fd, a duplicate of an open handle's descriptor, when n's
// name is gone: truncate(2) of the /proc/PID/fd link of a file unlinked
// while open. For a guarded file it is a guarded mutation like a truncate
// by path (docs/DESIGN.md#mutation-path), on the file fd holds; rel is for
// display and exemption only.
func (n *Node) truncateFd(ctx context.Context, rel string, fd int, writable bool, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.fs.mutate(ctx, mutation{
		subject: onFd(rel, fd),
		asks:    []ask{{0, guard.OpTruncate}},
		run:     func([]dirFd) syscall.Errno { return setattrFd(fd, writable, in, out) },
	})
}

// unwrapHandle returns the loopback handle under one of ours, for loopback
// methods that type-assert their handle.
func unwrapHandle(fh fs.FileHandle) fs.FileHandle {
	switch h := fh.(type) {
	case *File:
		return h.lf
	case *ptFile:
		return h.lf
	case *plainFile:
		return h.loopbackOps
	case *ptWriter:
		return h.LoopbackFile
	case *keptFile:
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
	if h, ok := asFile(fhOut); ok {
		return count, h.mutate(guard.OpCopyInto, copyOp)
	}
	if p, ok := fhOut.(*plainFile); ok {
		if errno := p.hj.Change(jWrite, p.node.rel()); errno != 0 {
			return 0, errno
		}
	}
	return count, copyOp()
}

// Setxattr sets an extended attribute (an ACL copy by sed -i or cp -p
// changes the mode this way): never guarded, an own change for the watcher.
// Like the reads (xattr_fd.go) it goes through one of n's open handles
// when there is one: the node's own inode even once its name is gone
// (fsetxattr on a descriptor of a file unlinked while open), unless that
// file was moved out of the workspace (insideOrGone): then by name, which
// fails as the name does.
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	rel := n.rel()
	n.fs.oc.settleDeferredNode(n) // ownattr.go: the change sets the ctime
	defer n.fs.oc.ownChange(rel)()
	if _, errno, ok := n.withOpenFd(func(fd int) (int, error) {
		return 0, unix.Fsetxattr(fd, attr, data, int(flags))
	}, n.fs.bk.insideOrGone); ok {
		return errno
	}
	return n.setxattrAt(rel, attr, data, flags)
}

// Removexattr removes an extended attribute, as an own change, through an
// open handle when there is one (as Setxattr).
func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	rel := n.rel()
	n.fs.oc.settleDeferredNode(n) // ownattr.go: the change sets the ctime
	defer n.fs.oc.ownChange(rel)()
	if _, errno, ok := n.withOpenFd(func(fd int) (int, error) { return 0, unix.Fremovexattr(fd, attr) }, n.fs.bk.insideOrGone); ok {
		return errno
	}
	return n.removexattrAt(rel, attr)
}
