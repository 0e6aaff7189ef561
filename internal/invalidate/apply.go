package invalidate

// Applying one external change, or all of them, to the guard and the
// kernel's caches (docs/DESIGN.md#invalidate-room).

import (
	"path"
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
	"github.com/rubinofs/rubinofs/watcher"
)

// Lookup walks the known tree from root to rel ("" the root); it returns
// the deepest known node and whether it is rel itself.
func Lookup(root Node, rel string) (Node, bool) {
	cur := root
	if rel == "" {
		return cur, true
	}
	for _, name := range strings.Split(rel, "/") {
		next := cur.Child(name)
		if next == nil {
			return cur, false
		}
		cur = next
	}
	return cur, true
}

// apply handles one external change.
func (inv *Invalidation) apply(ev watcher.Event) {
	dir, name := path.Split(ev.Path)
	dir = strings.TrimSuffix(dir, "/")
	parent, ok := Lookup(inv.tree.Root(), dir)
	if !ok {
		// The kernel knows nothing below an unknown directory: nothing is
		// cached there to invalidate. The guard still learns of it.
		inv.invalidateGuard(ev.Path, nil, ev.Op)
		return
	}
	child := parent.Child(name)
	inv.invalidateGuard(ev.Path, child, ev.Op)
	gone := ev.Op&(watcher.Remove|watcher.Rename) != 0
	stayed := false // child is a directory still at its name
	if child != nil {
		// Drop data and attributes of the inode itself.
		child.NotifyContent()
		switch st, err := inv.tree.Lstat(ev.Path); {
		case err != nil || inv.tree.Ino(st) != child.Ino():
			// The name is gone from the backing directory, or leads to
			// another file by now: update the loopback's tree, which
			// builds backing paths (docs/DESIGN.md#moved-out-of-tree).
			parent.RmChild(name)
		case child.IsDir() && st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
			stayed = true
		}
	}
	// Drop the dentry (positive or negative) so the next lookup sees the
	// backing directory; and the parent's attributes (mtime, nlink) and
	// its cached listing (docs/DESIGN.md#dir-cache: the kernel resets a
	// readdir cache whose pages are gone; NotifyEntry alone does nothing
	// for a name the kernel has no dentry of). A directory still at its
	// name (the same inode) keeps its dentry: the kernel unhashes an
	// invalidated dentry even when it is a process's working directory,
	// whose getcwd(2) then fails with ENOENT until the name is looked up
	// again, and a directory whose listing or times changed needs only its
	// inode dropped (docs/DESIGN.md#poll-keeps-cwd).
	if gone || !stayed {
		parent.NotifyEntry(name)
	}
	parent.NotifyContent()
}

// invalidateGuard drops hash-cache state of the file at rel (known by its
// inode when the tree has one, or by a fresh lstat) and revokes the write
// rights of handles on it (an external mutation, guard.NoteMutation).
//
// An attribute-only change (op is just watcher.Chmod: chmod, chown, touch,
// a link count change) revokes nothing: it changes no byte, and the hash is
// authoritative (an external touch keeps a read fresh), so a handle whose
// session's view of the content still holds keeps its right, and its own
// writes since its read still count as its own. Any write, truncate,
// create, remove or rename in the same batch window sets another bit, and
// a write is never reported as Chmod alone (inotify raises IN_MODIFY for
// every write(2) and truncate).
func (inv *Invalidation) invalidateGuard(rel string, child Node, op watcher.Op) {
	var ids []guard.FileID
	if st, err := inv.tree.Lstat(rel); err == nil {
		ids = append(ids, guard.StatOf(st).ID)
	}
	if child != nil {
		if id, ok := child.ID(); ok && (len(ids) == 0 || ids[0] != id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		inv.o.Guard.Invalidate(id)
		if op != watcher.Chmod {
			inv.o.Guard.NoteMutation(id, sessions.External)
		}
	}
}

// invalidateAll drops every cached entry, attribute and page the kernel may
// hold, and every hash-cache entry: the answer to lost events. The root's
// control directory is left alone.
func (inv *Invalidation) invalidateAll() {
	inv.o.Guard.Hashes().Reset()
	root := inv.tree.Root()
	ctl := inv.tree.ControlDir()
	var walk func(in Node, isRoot bool)
	walk = func(in Node, isRoot bool) {
		for name, ch := range in.Children() {
			if isRoot && name == ctl {
				continue
			}
			walk(ch, false)
			ch.NotifyContent()
			if id, ok := ch.ID(); ok {
				inv.o.Guard.NoteMutation(id, sessions.External)
			}
			in.NotifyEntry(name)
		}
	}
	walk(root, true)
	root.NotifyContent()
}
