package fusefs

import (
	"context"
	"path"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Node is a backing file or directory: go-fuse's LoopbackNode, wrapped so
// that mutations ask the guard. Operations it does not override (mkdir,
// rmdir, symlink, link, mknod, readlink, xattrs, statfs, getattr) are the
// loopback's, unguarded: issue 2 lists them as always allowed.
type Node struct {
	*fs.LoopbackNode
	fs *FS
}

// WrapChild wraps every node the loopback creates (lookup, create, mkdir,
// mknod, symlink, link) in a Node, so the whole tree is guarded. Control-tree
// nodes pass through unchanged. Source: go-fuse fs/api.go NodeWrapChilder.
func (n *Node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	ln, ok := ops.(*fs.LoopbackNode)
	if !ok {
		return ops
	}
	return &Node{LoopbackNode: ln, fs: n.fs}
}

// isRoot reports whether n is the mount root.
func (n *Node) isRoot() bool { return n.EmbeddedInode() == n.fs.root.EmbeddedInode() }

// rel returns n's workspace-relative path ("" for the root), from go-fuse's
// in-memory tree.
func (n *Node) rel() string {
	return n.Path(n.fs.root.EmbeddedInode())
}

// childRel returns the workspace-relative path of child name of n.
func (n *Node) childRel(name string) string {
	return path.Join(n.rel(), name)
}

// Lookup resolves a name. At the root, ctlDirName resolves to the control
// tree and shadows a real entry of that name; everything else is the
// loopback's lookup.
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name == ctlDirName && n.isRoot() {
		return n.fs.ctlLookupRoot(ctx, n.EmbeddedInode(), out)
	}
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if (errno == 0 || errno == syscall.ENOENT) && n.fs.shortTimeouts(n.childRel(name)) {
		// Also for ENOENT: go-fuse keeps a negative entry's timeout set
		// here instead of the mount-wide NegativeTimeout.
		out.SetEntryTimeout(n.fs.shortTimeout)
		out.SetAttrTimeout(n.fs.shortTimeout)
	}
	return ch, errno
}

// Getattr is the loopback's, with short timeouts in unwatched subtrees.
func (n *Node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	errno := n.LoopbackNode.Getattr(ctx, unwrapHandle(fh), out)
	if errno == 0 && n.fs.shortTimeouts(n.rel()) {
		out.SetTimeout(n.fs.shortTimeout)
	}
	return errno
}

// cacheFlags returns the open flags that keep the page cache across opens:
// only with a watcher vouching for rel.
func (n *Node) cacheFlags(rel string) uint32 {
	if n.fs.keepCache && !n.fs.shortTimeouts(rel) {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// Statfs reports the backing filesystem's statistics.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return n.LoopbackNode.Statfs(ctx, out)
}

// regular reports whether st describes a regular file.
func regular(st *syscall.Stat_t) bool { return st.Mode&syscall.S_IFMT == syscall.S_IFREG }
