package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
)

// Node is a backing file or directory of the workspace: an inode of
// go-fuse's tree (the embedded fs.Inode, as gocryptfs' nodes have) whose
// operations are all implemented here (node*.go, loopback.go; the list is
// node_api_check.go). Mutations of existing regular files ask the guard
// (docs/DESIGN.md#mutation-path); mkdir, rmdir, symlink, link, mknod,
// readlink, xattrs, statfs and getattr are always allowed
// (docs/DESIGN.md#guarded-ops). Every backing
// access is relative to the workspace root descriptor and follows no
// symlink (backing.go).
type Node struct {
	fs.Inode
	fs *FS
	// handles are the inode's open file handles (handles.go), for
	// attribute changes once its name is gone.
	handles openHandles
	// io counts the open handles by kernel io mode (iomode.go).
	io ioModes
	// ptw are the open read-write passthrough handles (ptwrite.go).
	ptw ptWriters
}

// isRoot reports whether n is the mount root.
func (n *Node) isRoot() bool { return n.EmbeddedInode() == n.fs.root.EmbeddedInode() }

// rel returns n's workspace-relative path ("" for the root), from go-fuse's
// in-memory tree.
func (n *Node) rel() string {
	return n.Path(n.fs.root.EmbeddedInode())
}

// childPath is path.Join of a directory's workspace-relative path ("" is
// the root) and a child name.
func childPath(dirRel, name string) string { return strings.TrimPrefix(dirRel+"/"+name, "/") }

// Lookup resolves a name. At the root, ctltree.DirName resolves to the control
// tree and shadows a real entry of that name (the root's listing shows
// neither: docs/DESIGN.md#control-tree-visibility); everything else is
// looked up in the backing directory (lookupAt).
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name == ctltree.DirName && n.isRoot() {
		return n.fs.ctl.LookupRoot(ctx, n.EmbeddedInode(), out)
	}
	var rel string
	var ch *fs.Inode
	errno := n.byDir(func(r string) (errno syscall.Errno) { // names.go: never a stale path's ENOENT cached
		rel = r
		ch, errno = n.lookupAt(ctx, rel, name, out)
		return errno
	})
	return ch, n.entryTimeouts(rel, name, out, errno)
}

// entryTimeouts returns errno and, when name in directory rel lies in an
// unwatched subtree, sets out's short timeouts (also for ENOENT: go-fuse
// keeps them instead of the mount-wide NegativeTimeout).
func (n *Node) entryTimeouts(rel, name string, out *fuse.EntryOut, errno syscall.Errno) syscall.Errno {
	if (errno == 0 || errno == syscall.ENOENT) && n.fs.inv.Short(childPath(rel, name)) {
		out.SetEntryTimeout(n.fs.shortTimeout)
		out.SetAttrTimeout(n.fs.shortTimeout)
	}
	return errno
}

// Getattr stats the node (through its handle when the kernel names one),
// with short timeouts in unwatched subtrees. The root's link count leaves
// out a shadowed real .rubino directory (hideShadowedLink).
func (n *Node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var rel string
	errno := n.byNode(func(r string) syscall.Errno { // names.go
		rel = r
		return n.getattrAt(ctx, rel, unwrapHandle(fh), out)
	})
	if errno == 0 && n.isRoot() {
		n.fs.hideShadowedLink(&out.Attr)
	}
	if errno == 0 && n.fs.inv.Short(rel) {
		out.SetTimeout(n.fs.shortTimeout)
	}
	return errno
}

// cacheFlags returns the open flags that keep the page cache across opens:
// only with a watcher vouching for rel, and never on a shared mount
// (crossmount.Mode.Shared: close-to-open, docs/DESIGN.md#close-to-open).
func (n *Node) cacheFlags(rel string) uint32 {
	return policy{cache: n.fs.cachesPages(rel, n.fs.cross.Shared())}.cacheFlag()
}

// Statfs reports the statistics of the filesystem holding the workspace
// root (fstatfs of the root descriptor). Errors: EBADF after Close.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s syscall.Statfs_t
	if err := syscall.Fstatfs(int(n.fs.bk.rootFd.Load()), &s); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatfsT(&s)
	return 0
}

// regular reports whether st describes a regular file.
func regular(st *syscall.Stat_t) bool { return st.Mode&syscall.S_IFMT == syscall.S_IFREG }
