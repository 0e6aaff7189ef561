package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// OpendirHandle lists a directory. The root's listing leaves out the
// control tree, and a real entry of the same name (which the control tree
// shadows): .rubino is reachable by name only, so recursive tools (grep -r,
// find, tar, cp -r, rsync, git) never walk into it and never open a stream
// file (docs/DESIGN.md#control-tree-visibility). Other directories are
// go-fuse's descriptor-based stream (openDirStreamAt: the directory is
// opened relative to its parent, never through a symlink). Where the
// watcher vouches for the directory the kernel keeps its listing across
// opens (dirCacheFlags, docs/DESIGN.md#dir-cache).
func (n *Node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	if !n.isRoot() {
		// go-fuse's descriptor stream is also its directory handle
		// (FileReaddirenter, FileSeekdirer, FileReleasedirer, Fsyncdir).
		var ds fs.DirStream
		var fd int
		errno := n.byDir(func(r string) (errno syscall.Errno) { // names.go
			rel = r
			ds, fd, errno = n.openDirStreamAt(rel)
			return errno
		})
		if errno != 0 {
			return nil, 0, errno
		}
		return n.fs.handles.keepDir(ds, n, fd), n.dirCacheFlags(rel), 0 // FS.Close closes it if RELEASEDIR never comes
	}
	list, errno := n.rootEntries()
	if errno != 0 {
		return nil, 0, errno
	}
	return newListDir(list), n.dirCacheFlags(rel), 0
}

// dirCacheFlags returns the opendir flags that let the kernel cache a
// directory's listing across opens (FOPEN_CACHE_DIR; go-fuse adds
// FOPEN_KEEP_CACHE, without which the kernel drops the cache at every
// open): under the same condition as the page cache of files (cacheFlags),
// a watcher vouching for rel. The cache is dropped by the kernel itself
// on its own namespace changes in the directory (create, mkdir, mknod,
// symlink, link, unlink, rmdir, rename: fs/fuse/dir.c fuse_dir_changed
// bumps the inode version that the cache is checked against at offset 0),
// and by the invalidator on external ones (its NotifyContent of the parent
// drops the cache's pages, which resets it: internal/invalidate apply).
func (n *Node) dirCacheFlags(rel string) uint32 {
	if n.cacheFlags(rel) != 0 {
		return fuse.FOPEN_CACHE_DIR
	}
	return 0
}

// rootEntries lists the workspace root without ctltree.DirName. The list is
// read whole at opendir, so READDIR and READDIRPLUS serve the same entries
// at the same offsets (index + 1) however the kernel pages them.
func (n *Node) rootEntries() ([]fuse.DirEntry, syscall.Errno) {
	ds, _, errno := n.openDirStreamAt("")
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
		if e.Name != ctltree.DirName {
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
	if f.bk.lstatRel(ctltree.DirName, &st) == 0 && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
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

// Unlink removes a name. Removing an existing regular file is a guarded
// mutation (op unlink; docs/DESIGN.md#mutation-path); other types are
// always allowed. When the last link is gone the guard is told
// (guard.Ticket.Done: NoteLastNameGone), and forgets the identity once no
// handle on it is open any more.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	dirRel := n.rel()
	return n.fs.mutate(ctx, mutation{
		subject: subject{names: []mutName{{rel: childPath(dirRel, name), change: unlinked, pin: true, dir: n}}},
		asks:    []ask{{0, guard.OpUnlink}},
		jop:     jUnlink,
		run:     func(at []dirFd) syscall.Errno { return n.removeIn(at[0], dirRel, name, 0) },
	})
}

// Rename renames a name. Renaming onto an existing regular file is a guarded
// mutation of that target (op rename-over), and RENAME_EXCHANGE guards both
// sides (op exchange), the target first; renaming a file away is always
// allowed (docs/DESIGN.md#mutation-path). The records follow the
// identities, so a read file keeps its record under its new name and an
// atomic save (write tmp, rename over a read file) passes.
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	dirRel, newDirRel := n.rel(), np.rel()
	srcRel, dstRel := childPath(dirRel, name), childPath(newDirRel, newName)
	m := mutation{
		subject: subject{names: []mutName{
			{rel: srcRel, change: unchanged, to: dstRel, dir: n},
			{rel: dstRel, change: replaced, pin: true, dir: np},
		}},
		jop: jRename,
		run: func(at []dirFd) syscall.Errno {
			errno := n.renameIn(at[0], dirRel, name, np, at[1], newDirRel, newName, flags)
			if errno == 0 && flags&unix.RENAME_WHITEOUT != 0 {
				n.ownWhiteout(ctx, at[0], dirRel, name) // posixattr.go
			}
			return errno
		},
	}
	exchange := flags&unix.RENAME_EXCHANGE != 0
	over := guard.OpRenameOver
	if exchange {
		over = guard.OpExchange
		m.jop = jExchange
		m.names[0].change = rewritten
		m.names[1].change, m.names[1].to = rewritten, srcRel
	}
	if flags&unix.RENAME_NOREPLACE == 0 {
		m.asks = append(m.asks, ask{1, over})
	}
	if exchange {
		m.asks = append(m.asks, ask{0, guard.OpExchange})
	}
	// Never an exempt name or a tool tree for guarded content
	// (exemptname.go, toolname.go), checked and changed with no other
	// rename between that moves a directory or into another one.
	dirs := n.kindOf(name, srcRel) == syscall.S_IFDIR || exchange && np.kindOf(newName, dstRel) == syscall.S_IFDIR
	defer n.fs.moveSerial(srcRel, dstRel, dirs)()
	moveOut, c, errno := n.exemptMove(ctx, name, np, newName, srcRel, dstRel, exchange)
	if errno != 0 {
		return errno
	}
	if moveOut {
		m.asks = append(m.asks, ask{0, guard.OpMoveExempt})
		m.by = &c // resolved once
	}
	return n.fs.mutate(ctx, m)
}

// Mkdir, Rmdir, Symlink, Link and Mknod are never guarded: they change no
// existing file's content (docs/DESIGN.md#guarded-ops). Each is one
// FS.mutate call without asks and without the lock step (kind fresh),
// so the journal records it in the one place (docs/DESIGN.md#journal-hook)
// and the backing call is bracketed as the daemon's own change for the
// watcher; the backing calls are descriptor-relative (loopback.go).

// makeNew runs run, a change of the names rels that no guarded file's
// identity lock need cover, as one fresh mutation journaled as jop. The
// new entry is the last of rels; run gets its parent's descriptor when
// the journal captured the name through one (journalhook.Pending.Dir),
// so the entry is made in that very directory, which is not resolved
// twice; else a descriptor whose FD is < 0 (Node.inDir opens it).
func (n *Node) makeNew(ctx context.Context, jop string, run func(at dirFd) syscall.Errno, rels ...string) syscall.Errno {
	names := freshNames(rels)
	names[len(names)-1].dir = n // the new entry is made in n
	return n.fs.mutate(ctx, mutation{kind: fresh, subject: subject{names: names}, jop: jop,
		run: func(at []dirFd) syscall.Errno { return run(at[len(at)-1]) }})
}

// freshNames is the unchanged mutNames of rels.
func freshNames(rels []string) []mutName {
	names := make([]mutName, len(rels))
	for i, rel := range rels {
		names[i] = mutName{rel: rel}
	}
	return names
}

// Mkdir creates a directory.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	dirRel := n.rel()
	errno = n.makeNew(ctx, jMkdir, func(at dirFd) (e syscall.Errno) {
		ch, e = n.mkdirAt(ctx, at, dirRel, name, mode, out)
		return e
	}, childPath(dirRel, name))
	return ch, errno
}

// Rmdir removes an empty directory.
func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	dirRel := n.rel()
	return n.fs.mutate(ctx, mutation{kind: fresh, subject: subject{names: []mutName{{rel: childPath(dirRel, name), dir: n}}}, jop: jRmdir,
		run: func(at []dirFd) syscall.Errno { return n.removeIn(at[0], dirRel, name, unix.AT_REMOVEDIR) }})
}

// Symlink creates a symbolic link.
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	dirRel := n.rel()
	errno = n.makeNew(ctx, jSymlink, func(at dirFd) (e syscall.Errno) {
		ch, e = n.symlinkAt(ctx, at, dirRel, target, name, out)
		return e
	}, childPath(dirRel, name))
	return ch, errno
}

// Link creates a hard link. The target is reached by its node's path,
// retried by its next name when another name of it is being unlinked or
// renamed (byNode, names.go). The journal records it as a link of the
// target's name (path) to the new name (path2), or, for a target with no
// name, as a create of the new name.
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	tn, ok := target.(*Node)
	if !ok || tn.fs != n.fs {
		return nil, syscall.EXDEV // no backing node of this mount, as the loopback answers
	}
	dirRel := n.rel()
	var ch *fs.Inode
	if _, parent := tn.EmbeddedInode().Parent(); parent == nil && !tn.isRoot() {
		// A file with no name (an O_TMPFILE file, linked through its
		// handle, linkfd.go): only the new name is the workspace's, and
		// the journal records it as created (a rewind removes it).
		defer n.fs.moveSerial("", childPath(dirRel, name), false)() // as below
		errno := n.makeNew(ctx, jCreate, func(at dirFd) (e syscall.Errno) {
			ch, e = n.linkByHandle(ctx, at, dirRel, tn, name, out)
			return e
		}, childPath(dirRel, name))
		return ch, errno
	}
	n.fs.oc.settleDeferredNode(tn) // ownattr.go: the link sets the target's ctime
	errno := tn.byNode(func(srcRel string) syscall.Errno {
		// Checked and linked with no rename between that moves a
		// directory or into another one (moveSerial); released before
		// byNode's retry waits for the renames in flight.
		defer n.fs.moveSerial(srcRel, childPath(dirRel, name), false)()
		if errno := n.exemptLink(ctx, tn, srcRel, childPath(dirRel, name)); errno != 0 {
			return errno // never an exempt name for a guarded file (exemptname.go)
		}
		// The target's link count and ctime change too: both names are
		// bracketed.
		return n.makeNew(ctx, jLink, func(at dirFd) (e syscall.Errno) {
			ch, e = n.linkAt(ctx, at, dirRel, tn, srcRel, name, out)
			return e
		}, srcRel, childPath(dirRel, name))
	})
	return ch, errno
}

// Mknod creates a device node, fifo, socket or empty regular file; a
// regular one is its session's own as a created one is (Guard.NoteCreate).
func (n *Node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	dirRel, st := n.rel(), syscall.Stat_t{}
	rel := childPath(dirRel, name)
	errno = n.makeNew(ctx, jMknod, func(at dirFd) (e syscall.Errno) {
		ch, e = n.mknodAt(ctx, at, dirRel, name, mode, rdev, out, &st)
		return e
	}, rel)
	if made := guard.StatOf(&st); errno == 0 && st.Mode&syscall.S_IFMT == syscall.S_IFREG && n.fs.policyOf(rel, false, n.fs.cross.Shared()).tracks {
		n.fs.cfg.Guard.NoteCreate(n.fs.callerOf(ctx).session, guard.Target{Path: rel, Stat: made})
		n.fs.cross.NoteOwn(made.ID, made) // as Create's
	}
	return ch, errno
}
