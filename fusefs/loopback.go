package fusefs

// The backing half of every node operation, descriptor-relative (see
// backing.go). Node embeds only go-fuse's fs.Inode, so every operation it
// offers is implemented by rubinofs (node_api_check.go lists them); one it
// does not implement gets go-fuse's default answer for a node without it,
// never a path-based access to a backing file.
//
// The helpers take the workspace-relative path the caller built once per
// operation (n.rel(): go-fuse's tree walk), follow go-fuse v2.12.1
// fs/loopback.go operation by operation (its LoopbackNode is where the
// semantics come from), and return errno as the backing syscall gave it
// unless a comment says otherwise.

import (
	"context"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// newChild makes the inode of a backing entry just looked up or created
// under n: a Node of the same FS, identified by stableAttr.
func (n *Node) newChild(ctx context.Context, st *syscall.Stat_t, gen uint64) *fs.Inode {
	return n.NewInode(ctx, &Node{fs: n.fs}, n.fs.bk.stableAttr(st, gen))
}

// lookupAt looks up name in the directory dirRel, n's path
// (ESTALE when dirRel is another directory by now: isDirAt).
func (n *Node) lookupAt(ctx context.Context, dirRel, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d, errno := n.openSelf(dirRel)
	if errno != 0 {
		return nil, errno
	}
	defer d.Close()
	return n.lookupIn(ctx, d, name, out)
}

// openSelf opens the directory n by dirRel, the path go-fuse's tree gave
// for it, and checks that it is n (isDirAt); the caller closes it.
// Errors: those of backing.openDir, ESTALE for another directory.
func (n *Node) openSelf(dirRel string) (dirFd, syscall.Errno) {
	d, errno := n.fs.bk.openDir(dirRel)
	if errno != 0 {
		return d, errno
	}
	if errno := n.isDirAt(d); errno != 0 {
		d.Close()
		return dirFd{FD: -1}, errno
	}
	return d, 0
}

// isDirAt checks that d, opened by the path the tree gives for the
// directory node n, is n's own backing directory: the inode number go-fuse
// knows n by (isFileAt; not the birth-time generation, which an overlay's
// copy-up of a directory changes to the upper layer's; the root is always
// itself): a path read from the tree can name another
// directory by the time it is opened, when n was renamed away and another
// directory renamed or made at its old name in between, through the mount
// (both renames finishing while this request ran) or outside it (before
// the watcher took n out of the tree). The request then fails with ESTALE
// and never reaches the other directory, with the daemon's rights and the
// permission checks the kernel made on n (docs/DESIGN.md#dir-identity);
// after a rename through the mount the stale-path retry runs it again by
// n's new path (names.go), and a path-based system call is retried by the
// kernel with a fresh lookup of every element (retry_estale), which
// reaches the directory now at the name as natively. One statx of the
// descriptor.
func (n *Node) isDirAt(d dirFd) syscall.Errno {
	if n.isRoot() {
		return 0
	}
	var st syscall.Stat_t
	if _, errno := statAt(d, "", &st); errno != 0 {
		return errno
	}
	return n.isFileAt(&st)
}

// lookupIn looks up name in the directory open at d.
func (n *Node) lookupIn(ctx context.Context, d dirFd, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	gen, errno := statAt(d, name, &st)
	if errno != 0 {
		return nil, errno
	}
	out.Attr.FromStat(&st)
	return n.newChild(ctx, &st, gen), 0
}

// getattrAt stats the node at rel, through the handle when there is one.
// The root is the directory itself (the loopback stat()s it; the root
// descriptor is that directory already).
func (n *Node) getattrAt(ctx context.Context, rel string, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if fga, ok := fh.(fs.FileGetattrer); ok && fga != nil {
		return fga.Getattr(ctx, out)
	}
	var st syscall.Stat_t
	if errno := n.fs.bk.lstatRel(rel, &st); errno != 0 {
		return errno
	}
	if errno := n.isFileAt(&st); errno != 0 {
		return errno // another file's attributes are not n's (docs/DESIGN.md#dir-identity)
	}
	out.FromStat(&st)
	return 0
}

// setattrAt is the loopback's Setattr: through the handle when there is
// one, else mode, owner, size and times (in that order: a truncate would
// clobber an explicit mtime) on the name, without following it.
//
// The name must still lead to n's own inode (Node.Setattr goes through an
// open handle when it does not, handles.go): when it is gone the lookup's
// errno is returned (ENOENT), and ESTALE when it leads to another file by
// now, so that never is another file changed in n's stead. For a path
// based call the kernel retries an ESTALE once with a fresh lookup
// (retry_estale), which then reaches the new file as natively.
func (n *Node) setattrAt(ctx context.Context, rel string, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if fsa, ok := fh.(fs.FileSetattrer); ok && fsa != nil {
		if errno := fsa.Setattr(ctx, in, out); errno != 0 {
			return errno
		}
		if fga, ok := fh.(fs.FileGetattrer); ok && fga != nil {
			fga.Getattr(ctx, out)
		}
		return 0
	}
	d, leaf, errno := n.fs.bk.prepareAt(rel)
	if errno == 0 {
		defer d.Close()
		var st syscall.Stat_t
		var gen uint64
		if gen, errno = statAt(d, leaf, &st); errno == 0 && !n.sameInode(&st, gen) {
			errno = syscall.ESTALE
		}
	}
	if errno != 0 {
		return errno
	}
	if m, ok := in.GetMode(); ok {
		if errno := chmodAt(d, leaf, m); errno != 0 {
			return errno
		}
	}
	if suid, sgid, ok := setattrOwner(in); ok {
		if err := unix.Fchownat(d.FD, leaf, suid, sgid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fs.ToErrno(err)
		}
	}
	if sz, ok := in.GetSize(); ok {
		if errno := truncateAt(d, leaf, sz); errno != 0 {
			return errno
		}
	}
	if ts, ok, errno := setattrTimes(in); errno != 0 {
		return errno
	} else if ok {
		if err := unix.UtimesNanoAt(d.FD, leaf, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fs.ToErrno(err)
		}
	}
	if onlyCtime(in) {
		if errno := touchCtimeAt(d, leaf); errno != 0 {
			return errno
		}
	}
	var st syscall.Stat_t
	if _, errno := statAt(d, leaf, &st); errno != 0 {
		return errno
	}
	out.FromStat(&st)
	return 0
}

// openFileAt opens leaf in d for a file handle. O_NOFOLLOW: a name that
// became a symlink since the kernel's lookup fails with ELOOP (the kernel
// itself never opens a symlink node; it follows it). O_APPEND is dropped
// like the loopback does (the kernel sends append writes at the end
// offset), and FMODE_EXEC is no open(2) flag.
func openFileAt(d dirFd, leaf string, flags uint32) (*fs.LoopbackFile, syscall.Errno) {
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	fd, err := syscallcompat.OpenRetryDirect(int(flags)|unix.O_NOFOLLOW|unix.O_CLOEXEC, func(fl int) (int, error) { return unix.Openat(d.FD, leaf, fl, 0) })
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fs.NewLoopbackFileFromOS(os.NewFile(uintptr(fd), leaf)), 0
}

// openAt opens the file at rel, n's path, when it is n's file
// (isFileAt): an O_TRUNC open is checked by a stat before it, which
// truncates, any other by its descriptor. Errors: those of prepareAt and
// open(2), ESTALE for another file.
func (n *Node) openAt(rel string, flags uint32) (*fs.LoopbackFile, syscall.Errno) {
	d, leaf, errno := n.fs.bk.prepareAt(rel)
	if errno != 0 {
		return nil, errno
	}
	defer d.Close()
	var st syscall.Stat_t
	trunc := flags&syscall.O_TRUNC != 0
	if trunc {
		if _, errno := statAt(d, leaf, &st); errno != 0 {
			return nil, errno
		}
		if errno := n.isFileAt(&st); errno != 0 {
			return nil, errno
		}
	}
	lf, errno := openFileAt(d, leaf, flags)
	if errno != 0 || trunc {
		return lf, errno
	}
	if err := syscall.Fstat(mustFd(lf), &st); err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	if errno := n.isFileAt(&st); errno != 0 {
		lf.Release(context.Background())
		return nil, errno
	}
	return lf, 0
}

// isFileAt checks that st, the stat of what n's path (a request by node)
// leads to, is n's backing inode (its number only: fstat(2) gives no birth
// time): ESTALE when it is another file, as after a swap of a directory
// above n, or a replacement of n's name, that the inode tree has not learnt
// yet (isDirAt, docs/DESIGN.md#dir-identity): the kernel looks the name up
// again for a path-based call and opens the file there now. The root is
// always itself.
func (n *Node) isFileAt(st *syscall.Stat_t) syscall.Errno {
	if n.isRoot() || n.StableAttr().Ino == n.fs.bk.stableAttr(st, 0).Ino {
		return 0
	}
	return syscall.ESTALE
}

// inDir is d, the descriptor of the directory n (at dirRel) that the
// mutation holds (the one the journal captured the name through, checked
// by mutation.apply), or, when d.FD is < 0, dirRel opened here and
// checked to be n (openSelf); the caller closes the result.
func (n *Node) inDir(d dirFd, dirRel string) (dirFd, syscall.Errno) {
	if d.FD >= 0 {
		return dirFd{FD: d.FD}, 0 // the mutation's: not closed by its user
	}
	return n.openSelf(dirRel)
}

// createAt creates and opens name in the directory dirRel, whose
// descriptor is at (inDir), as the loopback's Create does. The mode keeps
// its setuid, setgid and sticky bits (the loopback's os.OpenFile drops
// them; open(2) does not). st receives the new file's stat.
func (n *Node) createAt(ctx context.Context, at dirFd, dirRel, name string, flags, mode uint32, out *fuse.EntryOut, st *syscall.Stat_t) (*fs.Inode, *fs.LoopbackFile, syscall.Errno) {
	d, errno := n.inDir(at, dirRel)
	if errno != 0 {
		return nil, nil, errno
	}
	defer d.Close()
	flags &^= syscall.O_APPEND
	mode = createMode(ctx, d, mode)
	fd, err := syscallcompat.OpenRetryDirect(int(n.fs.cross.DirectFlags(flags))|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, func(fl int) (int, error) {
		return unix.Openat(d.FD, name, fl, mode&07777)
	})
	if err != nil {
		return nil, nil, fs.ToErrno(err)
	}
	preserveOwner(ctx, d, dirFd{FD: fd}, "")
	gen, errno := statAt(dirFd{FD: fd}, "", st)
	if errno != 0 {
		unix.Close(fd)
		return nil, nil, errno
	}
	ch := n.newChild(ctx, st, gen)
	out.FromStat(st)
	return ch, fs.NewLoopbackFileFromOS(os.NewFile(uintptr(fd), name)), 0
}

// makeAt runs mk (mkdirat, mknodat, symlinkat or linkat of name in the
// directory dirRel, whose descriptor is at: inDir), gives the entry to
// the caller, and looks it up; st receives its stat. When it cannot be
// stat'ed it is removed again (as the loopback does).
func (n *Node) makeAt(ctx context.Context, at dirFd, dirRel, name string, rmFlags int, owner bool, out *fuse.EntryOut, st *syscall.Stat_t, mk func(d dirFd) error) (*fs.Inode, syscall.Errno) {
	d, errno := n.inDir(at, dirRel)
	if errno != 0 {
		return nil, errno
	}
	defer d.Close()
	if err := mk(d); err != nil {
		return nil, fs.ToErrno(err)
	}
	if owner {
		preserveOwner(ctx, d, d, name)
	}
	gen, errno := statAt(d, name, st)
	if errno != 0 {
		unix.Unlinkat(d.FD, name, rmFlags)
		return nil, errno
	}
	out.Attr.FromStat(st)
	return n.newChild(ctx, st, gen), 0
}

// mkdirAt creates directory name in dirRel. The mode keeps its sticky and
// setgid bits (the loopback's os.Mkdir drops them; mkdir(2) does not).
func (n *Node) mkdirAt(ctx context.Context, at dirFd, dirRel, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.makeAt(ctx, at, dirRel, name, unix.AT_REMOVEDIR, true, out, new(syscall.Stat_t), func(d dirFd) error {
		return unix.Mkdirat(d.FD, name, createMode(ctx, d, mode)&07777)
	})
}

// mknodAt creates a device node, fifo, socket or empty regular file name
// in dirRel, and leaves its stat in st.
func (n *Node) mknodAt(ctx context.Context, at dirFd, dirRel, name string, mode, rdev uint32, out *fuse.EntryOut, st *syscall.Stat_t) (*fs.Inode, syscall.Errno) {
	return n.makeAt(ctx, at, dirRel, name, 0, true, out, st, func(d dirFd) error {
		return unix.Mknodat(d.FD, name, createMode(ctx, d, mode), int(rdev))
	})
}

// symlinkAt creates symlink name -> target in dirRel. The target is stored
// as given and never resolved by the daemon.
func (n *Node) symlinkAt(ctx context.Context, at dirFd, dirRel, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.makeAt(ctx, at, dirRel, name, 0, true, out, new(syscall.Stat_t), func(d dirFd) error {
		return unix.Symlinkat(target, d.FD, name)
	})
}

// linkAt creates hard link name in dirRel to the node tn, found at
// srcRel (a tn without a name is linked by Node.Link through one of its
// open handles, linkfd.go: LINK carries no descriptor). ESTALE when
// srcRel leads to another file than tn's (isFileAt).
func (n *Node) linkAt(ctx context.Context, at dirFd, dirRel string, tn *Node, srcRel, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	src, srcLeaf, errno := n.fs.bk.prepareAt(srcRel)
	if errno != 0 {
		return nil, errno
	}
	defer src.Close()
	if errno := tn.isLeafAt(src, srcLeaf); errno != 0 {
		return nil, errno // srcRel leads to another file by now (docs/DESIGN.md#dir-identity)
	}
	// flags 0: linkat(2) links a symlink itself, never its target.
	return n.makeAt(ctx, at, dirRel, name, 0, false, out, new(syscall.Stat_t), func(d dirFd) error {
		return unix.Linkat(src.FD, srcLeaf, d.FD, name, 0)
	})
}

// removeIn removes name (flags 0: not a directory; AT_REMOVEDIR: an
// empty directory) from dirRel, whose descriptor is at (inDir).
func (n *Node) removeIn(at dirFd, dirRel, name string, flags int) syscall.Errno {
	d, errno := n.inDir(at, dirRel)
	if errno != 0 {
		return errno
	}
	defer d.Close()
	return fs.ToErrno(unix.Unlinkat(d.FD, name, flags))
}

// renameIn renames name in n (at dirRel, whose descriptor is d1) to
// newName in np (at newDirRel, d2). A descriptor whose fd is < 0 is
// opened from its path here; FS.mutate passes those it resolved for the
// decision (locked.begin).
// With flags (RENAME_EXCHANGE, RENAME_NOREPLACE) it first checks, as the
// loopback's rename2 does, that both directories are still the inodes the
// kernel knows, and answers EBUSY when one was replaced.
func (n *Node) renameIn(d1 dirFd, dirRel, name string, np *Node, d2 dirFd, newDirRel, newName string, flags uint32) syscall.Errno {
	d1, errno := n.inDir(d1, dirRel)
	if errno != 0 {
		return errno
	}
	defer d1.Close()
	if d2.FD < 0 && newDirRel == dirRel {
		d2 = dirFd{FD: d1.FD}
	}
	if d2, errno = np.inDir(d2, newDirRel); errno != 0 {
		return errno
	}
	defer d2.Close()
	if flags == 0 {
		return fs.ToErrno(unix.Renameat(d1.FD, name, d2.FD, newName))
	}
	for _, c := range []struct {
		node *Node
		d    dirFd
	}{{n, d1}, {np, d2}} {
		if c.node.isRoot() {
			continue
		}
		var st syscall.Stat_t
		if _, errno := statAt(c.d, "", &st); errno != 0 {
			return errno
		}
		if c.node.StableAttr().Ino != n.fs.bk.stableAttr(&st, 0).Ino {
			return syscall.EBUSY
		}
	}
	return fs.ToErrno(unix.Renameat2(d1.FD, name, d2.FD, newName, uint(flags)))
}

// openDirStreamAt opens the directory at rel for listing: O_NOFOLLOW, so a
// directory replaced by a symlink is not listed (ELOOP; ENOTDIR from
// O_DIRECTORY on other kernels' order of checks), and go-fuse's
// descriptor-based stream reads it. fd is the stream's descriptor (closed
// with the stream).
func (n *Node) openDirStreamAt(rel string) (ds fs.DirStream, fd int, errno syscall.Errno) {
	d, leaf, errno := n.fs.bk.prepareAt(rel)
	if errno != 0 {
		return nil, -1, errno
	}
	defer d.Close()
	fd, err := unix.Openat(d.FD, leaf, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fs.ToErrno(err)
	}
	if errno := n.isDirAt(dirFd{FD: fd}); errno != 0 {
		unix.Close(fd)
		return nil, -1, errno
	}
	ds, errno = fs.NewLoopbackDirStreamFd(fd)
	return ds, fd, errno
}

// Readdir lists the directory (used by go-fuse only when no
// OpendirHandle is available; kept descriptor-relative all the same). The
// root leaves out .rubino, as OpendirHandle does.
func (n *Node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if n.isRoot() {
		list, errno := n.rootEntries()
		if errno != 0 {
			return nil, errno
		}
		return fs.NewListDirStream(list), 0
	}
	ds, _, errno := n.openDirStreamAt(n.rel())
	return ds, errno
}

// Readlink returns a symlink's target as stored; the daemon never
// resolves it (the kernel does, in the caller's view of the mount). The
// name must still lead to n's own inode (isLeafAt): ESTALE when it leads
// to another file, whose target the caller has no right to read through n
// (docs/DESIGN.md#dir-identity).
func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	d, leaf, errno := n.fs.bk.prepareAt(n.rel())
	if errno != 0 {
		return nil, errno
	}
	defer d.Close()
	if errno := n.isLeafAt(d, leaf); errno != 0 {
		return nil, errno // the name leads to another file now (docs/DESIGN.md#dir-identity)
	}
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		sz, err := unix.Readlinkat(d.FD, leaf, buf)
		if err != nil {
			return nil, fs.ToErrno(err)
		}
		if sz < len(buf) {
			return buf[:sz], 0
		}
	}
}

// xattrAt runs fn on the directory and leaf of the node at rel (see
// prepareAt) once the leaf is found to be n's own inode (isLeafAt: ESTALE
// when it leads to another file, docs/DESIGN.md#dir-identity); fn must not
// follow the leaf (syscallcompat xattr.go).
func (n *Node) xattrAt(rel string, fn func(d dirFd, leaf string) error) syscall.Errno {
	d, leaf, errno := n.fs.bk.prepareAt(rel)
	if errno != 0 {
		return errno
	}
	defer d.Close()
	if errno := n.isLeafAt(d, leaf); errno != 0 {
		return errno
	}
	return fs.ToErrno(fn(d, leaf))
}

// Getxattr and Listxattr read through an open handle when there is one
// (xattr_fd.go).

// setxattrAt and removexattrAt change an extended attribute of the node at
// rel, after a stat of the name finds n's own file there (ESTALE for
// another: isFileAt, docs/DESIGN.md#dir-identity).
func (n *Node) setxattrAt(rel, attr string, data []byte, flags uint32) syscall.Errno {
	return n.xattrAt(rel, func(d dirFd, leaf string) error {
		return setxattrLeaf(d, leaf, attr, data, int(flags))
	})
}

func (n *Node) removexattrAt(rel, attr string) syscall.Errno {
	return n.xattrAt(rel, func(d dirFd, leaf string) error {
		return removexattrLeaf(d, leaf, attr)
	})
}

// isLeafAt is isFileAt of leaf in d, stat'ed without following it. Errors:
// statx(2)'s, ESTALE.
func (n *Node) isLeafAt(d dirFd, leaf string) syscall.Errno {
	var st syscall.Stat_t
	if _, errno := statAt(d, leaf, &st); errno != 0 {
		return errno
	}
	return n.isFileAt(&st)
}

// Tmpfile creates an unnamed file in the directory (O_TMPFILE), as the
// loopback does, relative to the directory's descriptor. With the journal
// on its handle is a plainFile kept out of passthrough, so its writes
// reach the daemon: while the file has no name they are not journaled,
// and once linkat names it they are, like any named file's
// (docs/DESIGN.md#journal-hook).
func (n *Node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d, errno := n.openSelf(n.rel())
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer d.Close()
	flags &^= syscall.O_APPEND
	mode = createMode(ctx, d, mode)
	fd, err := unix.Openat(d.FD, ".", int(flags)|unix.O_TMPFILE|unix.O_CLOEXEC, mode&07777)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	preserveOwner(ctx, d, dirFd{FD: fd}, "") // the caller's file, as natively
	var st syscall.Stat_t
	gen, errno := statAt(dirFd{FD: fd}, "", &st)
	if errno != 0 {
		unix.Close(fd)
		return nil, nil, 0, errno
	}
	ch := n.newChild(ctx, &st, gen)
	out.FromStat(&st)
	lf := fs.NewLoopbackFileFromOS(os.NewFile(uintptr(fd), ""))
	child := ch.Operations().(*Node)
	if n.fs.jh != nil {
		_, drop := child.openHandle(lf, flags, false)
		hj := n.fs.jh.NewHandle(n.fs.callerOf(ctx).session)
		return ch, &plainFile{loopbackOps: lf, node: child, drop: drop, hj: hj}, 0, 0
	}
	return ch, child.keep(lf, flags), 0, 0
}

// Statx is getattr with statx(2)'s mask: through the handle when there is
// one, else on the name without following it (the loopback's Statx
// follows a final symlink; the root is the directory itself).
func (n *Node) Statx(ctx context.Context, fh fs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	var rel string
	errno := n.byNode(func(r string) (errno syscall.Errno) { // names.go
		rel = r
		if fsx, ok := unwrapHandle(fh).(fs.FileStatxer); ok && fsx != nil {
			return fsx.Statx(ctx, flags, mask, out)
		}
		d, leaf, errno := n.fs.bk.prepareAt(rel)
		if errno != 0 {
			return errno
		}
		defer d.Close()
		var x unix.Statx_t
		// Only the sync-type flags of the request apply to a name.
		sf := int(flags)&atStatxSyncType | unix.AT_SYMLINK_NOFOLLOW
		if err := unix.Statx(d.FD, leaf, sf, int(mask), &x); err != nil {
			return fs.ToErrno(err)
		}
		if x.Mask&unix.STATX_INO != 0 {
			st := syscall.Stat_t{Dev: unix.Mkdev(x.Dev_major, x.Dev_minor), Ino: x.Ino}
			if errno := n.isFileAt(&st); errno != 0 {
				return errno // as getattrAt
			}
		}
		out.FromStatx(&x)
		return 0
	})
	if errno == 0 && n.fs.inv.Short(rel) {
		out.SetTimeout(n.fs.shortTimeout)
	}
	return errno
}

// atStatxSyncType is AT_STATX_SYNC_TYPE (linux/fcntl.h), which x/sys/unix
// does not name: the FORCE_SYNC and DONT_SYNC bits.
const atStatxSyncType = unix.AT_STATX_FORCE_SYNC | unix.AT_STATX_DONT_SYNC
