package fusefs

// The mount's side of the invalidator (internal/invalidate,
// docs/DESIGN.md#invalidate-room): go-fuse's inode tree as its Tree and
// Node, and the own-change brackets the watcher installs in it.

import (
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/internal/invalidate"
)

// WatchOptions tunes the caching policy that a watcher makes safe.
type WatchOptions struct {
	// ShortTimeout is the entry/attribute timeout for subtrees the watcher
	// could not watch (inotify exhausted), and for everything while the
	// watcher is down.
	ShortTimeout time.Duration
}

// AttachWatcher starts the invalidation goroutine over the mount's inode
// tree and returns it: the callbacks to give the watcher (watcher.Config's
// OnEvents, OnOverflow, OnUnwatched) and the functions that tell it of own
// changes. Call once, before mounting.
func (f *FS) AttachWatcher(o WatchOptions) *invalidate.Invalidation {
	f.inv = invalidate.Start(inodeTree{f}, invalidate.Options{
		ShortTimeout: o.ShortTimeout, Guard: f.cfg.Guard, Logger: f.log})
	f.shortTimeout = o.ShortTimeout
	return f.inv
}

// ownMove brackets an own rename of from to to for the watcher, like
// ownChange(from, to); the returned end must be called once, after the
// rename, with moved set when it succeeded (RENAME_EXCHANGE included).
// Without a move tracker it is ownChange. k is what the move leaves at
// each name, as far as the caller knows (ignore.Policy.Moved).
func (o ownChanges) ownMove(from, to string, k ignore.MoveKinds) (end func(moved bool)) {
	f := o.f
	moved := func(ok bool) {
		// Rule files below an exempt name are never read: a package
		// manager's renames inside node_modules/ need no record.
		if ok && f.cfg.Policy != nil && !(f.exempt(to, true) && f.exempt(from, true)) {
			f.cfg.Policy.Moved(from, to, k) // docs/DESIGN.md#exempt-widening
		}
	}
	if o.move != nil {
		rules := o.pinRules([]string{from, to})
		endMove := o.move(from, to)
		return func(ok bool) {
			endMove(ok)
			moved(ok)
			// As ownChange's end: a moved rule file changes the rules.
			o.invalidateRules(rules)
		}
	}
	e := o.ownChange(from, to)
	return func(ok bool) {
		moved(ok)
		e()
	}
}

// lookupInode walks go-fuse's in-memory tree from root to rel; it returns
// the deepest known inode and whether it is rel itself.
func lookupInode(root *fs.Inode, rel string) (*fs.Inode, bool) {
	n, ok := invalidate.Lookup(inodeNode{in: root}, rel)
	return n.(inodeNode).in, ok
}

// inodeTree is the FS's go-fuse inode tree as the invalidator's
// invalidate.Tree; used from the invalidation goroutine only.
type inodeTree struct{ f *FS }

// Bridged is closed once the mount has its server (FS.served): go-fuse's
// node bridge has initialised the root (NewNodeFS writes the root's
// children map unlocked, so no walk may run before) and learnt its
// server in Init, which every notification reads.
func (t inodeTree) Bridged() <-chan struct{} { return t.f.served }

// Root is the root inode.
func (t inodeTree) Root() invalidate.Node {
	return inodeNode{in: t.f.root.EmbeddedInode(), rootDev: t.f.bk.rootDev}
}

// Lstat stats the backing path of rel (FS.backing), not following a
// symlink at the end.
func (t inodeTree) Lstat(rel string) (*syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(t.f.backing(rel), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Ino is the inode number the loopback gives a backing stat (stableAttr).
func (t inodeTree) Ino(st *syscall.Stat_t) uint64 { return t.f.bk.stableAttr(st, 0).Ino }

// ControlDir is the control tree's name at the root.
func (t inodeTree) ControlDir() string { return ctltree.DirName }

// inodeNode is one go-fuse inode as an invalidate.Node; rootDev is the
// backing root's st_dev (backing.rootDev).
type inodeNode struct {
	in      *fs.Inode
	rootDev uint64
}

// Child is the known child name, or nil.
func (n inodeNode) Child(name string) invalidate.Node {
	if c := n.in.GetChild(name); c != nil {
		return inodeNode{in: c, rootDev: n.rootDev}
	}
	return nil
}

// Children are the known children by name.
func (n inodeNode) Children() map[string]invalidate.Node {
	ch := n.in.Children()
	out := make(map[string]invalidate.Node, len(ch))
	for name, c := range ch {
		out[name] = inodeNode{in: c, rootDev: n.rootDev}
	}
	return out
}

// IsDir reports whether the inode is a directory.
func (n inodeNode) IsDir() bool { return n.in.IsDir() }

// Ino is the inode's stable inode number.
func (n inodeNode) Ino() uint64 { return n.in.StableAttr().Ino }

// ID maps the inode back to the backing file identity. The loopback
// numbers inodes as ino XOR a device mix that is zero on the workspace's
// own device; a control-tree inode (bit 62) or a number 0 has none.
func (n inodeNode) ID() (guard.FileID, bool) {
	sa := n.in.StableAttr()
	if sa.Ino == 0 || sa.Ino&(1<<62) != 0 {
		return guard.FileID{}, false
	}
	return guard.FileID{Dev: n.rootDev, Ino: sa.Ino}, true
}

// NotifyContent drops the inode's cached attributes and pages.
func (n inodeNode) NotifyContent() { n.in.NotifyContent(0, 0) }

// NotifyEntry drops the dentry name below the inode.
func (n inodeNode) NotifyEntry(name string) { n.in.NotifyEntry(name) }

// RmChild forgets the child name in go-fuse's tree.
func (n inodeNode) RmChild(name string) { n.in.RmChild(name) }
