package fusefs

import (
	"context"
	"sort"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
)

// OpendirHandle lists a directory. The root's listing leaves out the
// control tree, and a real entry of the same name (which the control tree
// shadows): .rubino is reachable by name only, so recursive tools (grep -r,
// find, tar, cp -r, rsync, git) never walk into it and never open a stream
// file (docs/DESIGN.md#control-tree-visibility). Other directories are
// go-fuse's descriptor-based stream (openDirStreamAt: the directory is
// opened relative to its parent, never through a symlink).
func (n *Node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !n.isRoot() {
		// go-fuse's descriptor stream is also its directory handle
		// (FileReaddirenter, FileSeekdirer, FileReleasedirer, Fsyncdir).
		ds, errno := n.openDirStreamAt(n.rel())
		if errno != 0 {
			return nil, 0, errno
		}
		return n.fs.keepDir(ds), 0, 0 // FS.Close closes it if RELEASEDIR never comes
	}
	list, errno := n.rootEntries()
	if errno != 0 {
		return nil, 0, errno
	}
	return newListDir(list), 0, 0
}

// rootEntries lists the workspace root without ctlDirName. The list is
// read whole at opendir, so READDIR and READDIRPLUS serve the same entries
// at the same offsets (index + 1) however the kernel pages them.
func (n *Node) rootEntries() ([]fuse.DirEntry, syscall.Errno) {
	ds, errno := n.openDirStreamAt("")
	if errno != 0 {
		return nil, errno
	}
	defer ds.Close()
	var list []fuse.DirEntry
	for ds.HasNext() {
		e, errno := ds.Next()
		if errno != 0 {
			return nil, errno
		}
		if e.Name != ctlDirName {
			list = append(list, e)
		}
	}
	return list, 0
}

// hideShadowedLink keeps the root's link count consistent with its
// listing: a real .rubino directory in the workspace counts in the backing
// root's st_nlink ("2 + subdirectories") but is not listed (the control
// tree shadows it, and the control tree itself is not listed either), so
// it is taken off. Tools that trust st_nlink to count subdirectories
// (find's leaf optimisation) then see the listing's number. a is the
// root's attributes as stat'ed; one extra lstat runs only when the root
// has subdirectories.
func (f *FS) hideShadowedLink(a *fuse.Attr) {
	if a.Nlink <= 2 {
		return
	}
	var st syscall.Stat_t
	if f.lstatRel(ctlDirName, &st) == 0 && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		a.Nlink--
	}
}

// listDir is a directory handle over a fixed list; offsets are indices + 1.
type listDir struct {
	list []fuse.DirEntry
	next int
}

func newListDir(list []fuse.DirEntry) *listDir {
	for i := range list {
		list[i].Off = uint64(i + 1)
	}
	return &listDir{list: list}
}

// Readdirent returns the next entry, or nil at the end.
func (d *listDir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if d.next >= len(d.list) {
		return nil, 0
	}
	e := d.list[d.next]
	d.next++
	return &e, 0
}

// Seekdir moves to the entry after offset off.
func (d *listDir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off > uint64(len(d.list)) {
		off = uint64(len(d.list))
	}
	d.next = int(off)
	return 0
}

// Releasedir drops the list.
func (d *listDir) Releasedir(ctx context.Context, releaseFlags uint32) { d.list = nil }

// guardedChild is a regular, non-exempt child about to be mutated.
type guardedChild struct {
	ok  bool // the guard applies: it exists, is regular and not exempt
	rel string
	st  syscall.Stat_t
	id  guard.FileID
}

// guardedAt lstats the workspace path rel and reports whether the guard
// applies to mutating it; tracked is f.tracks(rel).
func (f *FS) guardedAt(rel string, tracked bool) guardedChild {
	if !tracked {
		return guardedChild{rel: rel}
	}
	var st syscall.Stat_t
	if errno := f.lstatRel(rel, &st); errno != 0 || !regular(&st) {
		return guardedChild{rel: rel}
	}
	return guardedChild{ok: true, rel: rel, st: st, id: guard.StatOf(&st).ID}
}

// lockFresh locks the identities of the guarded files at rels and returns
// them as stat'ed again under the locks, with the unlock. A decision must
// use a stat taken under the lock: a mutation that slipped in between the
// first stat and the lock would otherwise be judged on a stale hash-cache
// key (and a lost update let through). When a name was replaced meanwhile
// (another identity), it unlocks and tries again.
func (f *FS) lockFresh(rels ...string) ([]guardedChild, func()) {
	tracked := make([]bool, len(rels)) // exemption depends on the path only
	for i, rel := range rels {
		tracked[i] = f.tracks(rel)
	}
	probe := func() []guardedChild {
		out := make([]guardedChild, len(rels))
		for i, rel := range rels {
			out[i] = f.guardedAt(rel, tracked[i])
		}
		return out
	}
	for attempt := 0; ; attempt++ {
		before := probe()
		var ids []guard.FileID
		for _, g := range before {
			if g.ok {
				ids = append(ids, g.id)
			}
		}
		unlock := f.lockAll(ids...)
		after := probe()
		same := true
		for i := range after {
			if after[i].ok && (!before[i].ok || after[i].id != before[i].id) {
				same = false
			}
		}
		if same || attempt >= 16 {
			// After 16 replacements in a row, decide on what is locked:
			// a still-unlocked newcomer is treated as unguarded-absent.
			for i := range after {
				if after[i].ok && (!before[i].ok || after[i].id != before[i].id) {
					after[i].ok = false
				}
			}
			return after, unlock
		}
		unlock()
	}
}

// lockAll takes the identity locks of ids in a fixed order (no deadlock
// between two renames locking the same pair) and returns one unlock.
func (f *FS) lockAll(ids ...guard.FileID) func() {
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].Dev != ids[j].Dev {
			return ids[i].Dev < ids[j].Dev
		}
		return ids[i].Ino < ids[j].Ino
	})
	var unlocks []func()
	for i, id := range ids {
		if i > 0 && id == ids[i-1] {
			continue
		}
		unlocks = append(unlocks, f.cfg.Guard.Lock(id))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// Unlink removes a name. Removing an existing regular file is a guarded
// mutation (op unlink); other types are always allowed. When the last link
// is gone the guard is told (Guard.NoteLastNameGone), and forgets the
// identity once no handle on it is open any more.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	dirRel := n.rel()
	rel := childPath(dirRel, name)
	defer n.fs.ownChange(rel)()
	gs, unlock := n.fs.lockFresh(rel)
	defer unlock()
	g := gs[0]
	if !g.ok {
		return n.unlinkAt(dirRel, name)
	}
	c := n.fs.callerOf(ctx)
	if n.fs.guarded(c) {
		if errno := n.fs.decide(c, guard.OpUnlink, n.fs.target(g.rel, &g.st)); errno != 0 {
			return errno
		}
	}
	defer n.fs.pinInode(rel)() // until the guard is told (pinInode)
	errno := n.unlinkAt(dirRel, name)
	if errno != 0 {
		return errno
	}
	if g.st.Nlink <= 1 {
		n.fs.cfg.Guard.NoteLastNameGone(g.id, c.session)
	} else {
		n.fs.cfg.Guard.NoteMutation(g.id, c.session)
	}
	return 0
}

// Rename renames a name. Renaming onto an existing regular file is a guarded
// mutation of that target (op rename-over), and RENAME_EXCHANGE guards both
// sides (op exchange); renaming a file away is always allowed. The records
// follow the identities, so a read file keeps its record under its new name
// and an atomic save (write tmp, rename over a read file) passes.
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	dirRel, newDirRel := n.rel(), np.rel()
	srcRel, dstRel := childPath(dirRel, name), childPath(newDirRel, newName)
	gs, unlock := n.fs.lockFresh(srcRel, dstRel)
	defer unlock()
	src, srcGuarded := gs[0], gs[0].ok
	dst, dstGuarded := gs[1], gs[1].ok
	exchange := flags&unixRenameExchange != 0
	noReplace := flags&unixRenameNoreplace != 0

	c := n.fs.callerOf(ctx)
	if n.fs.guarded(c) {
		if dstGuarded && !noReplace {
			op := guard.OpRenameOver
			if exchange {
				op = guard.OpExchange
			}
			if errno := n.fs.decide(c, op, n.fs.target(dst.rel, &dst.st)); errno != 0 {
				return errno
			}
		}
		if exchange && srcGuarded {
			if errno := n.fs.decide(c, guard.OpExchange, n.fs.target(src.rel, &src.st)); errno != 0 {
				return errno
			}
		}
	}
	if dstGuarded {
		defer n.fs.pinInode(dstRel)() // until the guard is told (pinInode)
	}
	// ownMove: the watcher follows an own directory move to its new paths.
	end := n.fs.ownMove(srcRel, dstRel)
	errno := n.renameAt(dirRel, name, np, newDirRel, newName, flags)
	end(errno == 0)
	if errno != 0 {
		return errno
	}
	g := n.fs.cfg.Guard
	if srcGuarded {
		g.Rename(src.id, dstRel)
	}
	if dstGuarded {
		if exchange {
			g.Rename(dst.id, srcRel)
			n.fs.cfg.Guard.NoteMutation(dst.id, c.session)
		} else if dst.st.Nlink <= 1 {
			g.NoteLastNameGone(dst.id, c.session)
		}
	}
	if srcGuarded && exchange {
		n.fs.cfg.Guard.NoteMutation(src.id, c.session)
	}
	return 0
}

// Rename flags from renameat2(2).
const (
	unixRenameNoreplace = 1 << 0
	unixRenameExchange  = 1 << 1
)

// Mkdir, Rmdir, Symlink, Link and Mknod are never guarded (issue 2: always
// allowed), bracketed as the daemon's own changes for the watcher; the
// backing calls are descriptor-relative (loopback.go).

// Mkdir creates a directory.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	dirRel := n.rel()
	defer n.fs.ownChange(childPath(dirRel, name))()
	return n.mkdirAt(ctx, dirRel, name, mode, out)
}

// Rmdir removes an empty directory.
func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	dirRel := n.rel()
	defer n.fs.ownChange(childPath(dirRel, name))()
	return n.rmdirAt(dirRel, name)
}

// Symlink creates a symbolic link.
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	dirRel := n.rel()
	defer n.fs.ownChange(childPath(dirRel, name))()
	return n.symlinkAt(ctx, dirRel, target, name, out)
}

// Link creates a hard link. The target is reached by its node's path,
// retried by its next name when another name of it is being unlinked or
// renamed (byNode, names.go).
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	tn, ok := target.(*Node)
	if !ok || tn.fs != n.fs {
		return nil, syscall.EXDEV // no backing node of this mount, as the loopback answers
	}
	dirRel := n.rel()
	var ch *fs.Inode
	errno := tn.byNode(func(srcRel string) (errno syscall.Errno) {
		// The target's link count and ctime change too.
		defer n.fs.ownChange(childPath(dirRel, name), srcRel)()
		ch, errno = n.linkAt(ctx, dirRel, tn, srcRel, name, out)
		return errno
	})
	return ch, errno
}

// Mknod creates a device node, fifo or socket.
func (n *Node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	dirRel := n.rel()
	defer n.fs.ownChange(childPath(dirRel, name))()
	return n.mknodAt(ctx, dirRel, name, mode, rdev, out)
}
