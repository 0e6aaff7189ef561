package fusefs

// No rename or link through the mount gives what the guard covers a name
// the guard does not cover (docs/DESIGN.md#exempt-widening).

import (
	"context"
	"io"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

// maxExemptWalk bounds the entries exemptBelow reads of a directory being
// renamed; past it the rename is refused with EXDEV, as one that would
// exempt something is (mv(1) then moves or copies the files one by one).
const maxExemptWalk = 10000

// moveSerial takes FS.moveMu for a rename of srcRel to dstRel (dirs: a
// directory is renamed, on either side of an exchange) or a link (the
// same, dirs false; srcRel "" for a file with no name). The checks of
// exemptMove and toolMove (and the links') read the tree below a moved
// directory and the names above the destination before the change, so no
// rename that changes those may come between one's check and its change:
// a rename of a directory, or of a name into another directory, takes
// the lock for writing (`mv p/e p/node_modules` while `mv src/f p/e/` is
// being checked would land f in a tree neither check saw); a rename or
// link within one directory takes it for reading, as it changes no name
// above another but its check reads the names above it (`mv p logs7`
// between the check and the change of `mv p/x.c p/x.log` would land x.log
// at an exempt name). Nothing is taken with the guard off or neither
// rules nor tool trees configured. It returns the unlock, to call once
// the change is done. The lock is taken before any other of the change's
// (identity, cross-mount), never while one is held, and released before a
// retry waits on the renames in flight (Node.byNode).
func (f *FS) moveSerial(srcRel, dstRel string, dirs bool) (unlock func()) {
	if f.guardMode == guard.ModeOff || f.cfg.Exempt == nil && !f.cfg.Tools.Enabled() {
		return func() {}
	}
	if !dirs && srcRel != "" && path.Dir(srcRel) == path.Dir(dstRel) {
		f.moveMu.RLock()
		return f.moveMu.RUnlock
	}
	f.moveMu.Lock()
	return f.moveMu.Unlock
}

// kindOf returns the file type bits (S_IFMT) of the entry name of the
// directory n, whose path is rel: from go-fuse's inode when the kernel
// looked the name up (it has, before a rename or a link), else by lstat;
// 0 when there is no such entry.
func (n *Node) kindOf(name, rel string) uint32 {
	if ch := n.GetChild(name); ch != nil {
		return ch.StableAttr().Mode & syscall.S_IFMT
	}
	var st syscall.Stat_t
	if n.fs.bk.lstatRel(rel, &st) != 0 {
		return 0
	}
	return st.Mode & syscall.S_IFMT
}

// covers reports whether the guard covers what of type kind (S_IFMT) is at
// rel: a regular file or a directory at a path that is not exempt (a
// directory for what may lie below it).
func (f *FS) covers(rel string, kind uint32) bool {
	switch kind {
	case syscall.S_IFREG, syscall.S_IFDIR:
		return f.guardMode != guard.ModeOff && !f.exempt(rel, kind == syscall.S_IFDIR)
	}
	return false
}

// exemptMove decides a rename of name in n (srcRel) to newName in np
// (dstRel), and for an exchange the other way too, against the
// exemption, for a caller the guard decides for (FS.guarded):
//
//   - a guarded file moved to an exempt name is decided as an overwrite of
//     it (ask is true: the mutation asks guard.OpMoveExempt of names[0]):
//     from there anyone may change it unguarded, so the session must be
//     entitled to change it now, having read it;
//   - a directory the guard covers moved to an exempt name, or to a name
//     below which a rule would exempt what it holds (exemptBelow: "logs/*"
//     exempts logs/main.c, not logs), and either side of an exchange that
//     would give guarded content an exempt name, is refused with EXDEV
//     (guard.Guard.RefuseExemptName): mv(1) then moves or copies the files
//     one by one (a copy reads each; the removal of each original is
//     decided and journaled).
//
// When no exempt name is involved the tool trees decide (toolMove,
// docs/DESIGN.md#tool-trees). Anything else (both names exempt, a
// symlink, the guard off) passes: ask false, errno 0.
func (n *Node) exemptMove(ctx context.Context, name string, np *Node, newName, srcRel, dstRel string, exchange bool) (ask bool, by caller, errno syscall.Errno) {
	f := n.fs
	if f.cfg.Exempt == nil && f.cfg.Tools == nil || f.guardMode == guard.ModeOff {
		return false, caller{}, 0
	}
	ks := n.kindOf(name, srcRel)
	if !exchange && ks == syscall.S_IFREG && !f.covers(srcRel, ks) && f.covers(dstRel, ks) {
		return false, caller{}, n.exemptAliasIn(ctx, srcRel, dstRel)
	}
	in, out, kd := f.givesExempt(srcRel, ks, dstRel), false, uint32(0)
	if exchange {
		kd = np.kindOf(newName, dstRel)
		out = f.givesExempt(dstRel, kd, srcRel)
	}
	if !in && !out {
		return n.toolMove(ctx, srcRel, ks, dstRel, kd, exchange) // toolname.go
	}
	c := f.callerOf(ctx)
	if !f.guarded(c) {
		return false, caller{}, 0
	}
	if !exchange && ks == syscall.S_IFREG {
		return true, c, 0
	}
	path, to := srcRel, dstRel
	if !in {
		path, to = dstRel, srcRel
	}
	return false, c, f.cfg.Guard.RefuseExemptName(c.asker(f), guard.OpMoveExempt, path, to)
}

// givesExempt reports whether moving what of type kind is at from to the
// name to gives guarded content an exempt name: a file or directory the
// guard covers at an exempt name, or a directory to a name below which a
// rule would exempt what it holds (exemptBelow, unless sameBelow tells
// from the rules alone that it would not).
func (f *FS) givesExempt(from string, kind uint32, to string) bool {
	if !f.covers(from, kind) {
		return false
	}
	isDir := kind == syscall.S_IFDIR
	return f.exempt(to, isDir) || isDir && !f.sameBelow(from, to) && f.exemptBelow(from, to)
}

// exemptAliasIn refuses moving the exempt file srcRel to the guarded name
// dstRel when it has other names, which would stay exempt aliases of the
// guarded file (EXDEV, guard.Guard.RefuseExemptName; a guarded file with
// other links moved out is movedOutWhole's). 0 for anything else.
func (n *Node) exemptAliasIn(ctx context.Context, srcRel, dstRel string) syscall.Errno {
	f := n.fs
	var st syscall.Stat_t
	if f.bk.lstatRel(srcRel, &st) != 0 || st.Nlink <= 1 {
		return 0
	}
	c := f.callerOf(ctx)
	if !f.guarded(c) {
		return 0
	}
	return f.cfg.Guard.RefuseExemptName(c.asker(f), guard.OpLinkExempt, dstRel, srcRel)
}

// exemptLink refuses a hard link of the guarded file srcRel at the exempt
// name newRel, or of the exempt file srcRel at the guarded name newRel,
// for a caller the guard decides for (EXDEV,
// guard.Guard.RefuseExemptName): a write through the exempt name would
// change the guarded one's content unguarded and unjournaled (as for an
// exempt file with other links renamed to a guarded name,
// exemptAliasIn). Between guarded names the tool trees decide
// (toolLink). 0 for anything else.
func (n *Node) exemptLink(ctx context.Context, target *Node, srcRel, newRel string) syscall.Errno {
	f := n.fs
	if target.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	srcGuarded, newGuarded := f.covers(srcRel, syscall.S_IFREG), f.covers(newRel, syscall.S_IFREG)
	switch {
	case srcGuarded && newGuarded:
		return n.toolLink(ctx, srcRel, newRel) // toolname.go
	case srcGuarded == newGuarded:
		return 0 // both exempt (or the guard off)
	}
	c := f.callerOf(ctx)
	if !f.guarded(c) {
		return 0
	}
	if !srcGuarded {
		return f.cfg.Guard.RefuseExemptName(c.asker(f), guard.OpLinkExempt, newRel, srcRel)
	}
	return f.cfg.Guard.RefuseExemptName(c.asker(f), guard.OpLinkExempt, srcRel, newRel)
}

// sameBelower is an Exempter that can tell, from its rules alone, that
// everything below a directory renamed from src to dst keeps its
// exemption (ignore.Matcher.SameBelow).
type sameBelower interface {
	SameBelow(src, dst string) bool
}

// sameBelow reports whether Config.Exempt tells, without reading the
// tree, that what lies below srcRel keeps its exemption below dstRel
// (false when it cannot: exemptBelow reads the tree).
func (f *FS) sameBelow(srcRel, dstRel string) bool {
	sb, ok := f.cfg.Exempt.(sameBelower)
	return ok && sb.SameBelow(srcRel, dstRel)
}

// exemptBelow reports whether renaming the directory srcRel to dstRel
// would give something below it that the guard covers an exempt name (a
// rule may exempt dstRel's children though not dstRel: "logs/*"); also
// when that cannot be told: the directory could not be read, or it holds
// more than maxExemptWalk entries or maxExemptDepth levels. What lies
// below an exempt directory is
// exempt already and not read. It reads the backing tree (getdents) and
// asks the matcher, which keeps its answers; a directory that is gone is
// false (the rename fails).
func (f *FS) exemptBelow(srcRel, dstRel string) bool {
	return f.walkDir(srcRel, dstRel, func(_, t string, isDir bool) bool { return f.exempt(t, isDir) })
}

// maxExemptDepth bounds the directory levels exemptBelow descends, each
// holding a descriptor: deeper, the rename is refused (a chain of
// thousands of directories would take the daemon's descriptors).
const maxExemptDepth = 128

// walkBelow is the walk of the directory open at fd (which it closes),
// depth levels below the renamed one, src's entries against the same
// names below dst: it reports whether found is true of an entry (its
// path below src and below dst) that is a regular file or a directory
// the guard covers, or when that cannot be told (budget spent, too deep,
// unreadable). What lies below an exempt directory is not read.
func (f *FS) walkBelow(fd int, src, dst string, budget *int, depth int, found func(s, t string, isDir bool) bool) bool {
	dir := os.NewFile(uintptr(fd), src)
	defer dir.Close()
	if depth >= maxExemptDepth {
		return true
	}
	for {
		ents, err := dir.ReadDir(256)
		for _, e := range ents {
			if *budget--; *budget < 0 {
				return true
			}
			isDir, name := e.IsDir(), e.Name()
			if !isDir && !e.Type().IsRegular() {
				continue // no content the guard covers
			}
			s, t := src+"/"+name, dst+"/"+name
			if f.exempt(s, isDir) {
				continue // exempt already, and all below it
			}
			if found(s, t, isDir) {
				return true
			}
			if isDir {
				cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil || f.walkBelow(cfd, s, t, budget, depth+1, found) {
					return true
				}
			}
		}
		if err == io.EOF {
			return false
		}
		if err != nil {
			return true
		}
	}
}

// exemptLinkByHandle refuses linking the open file of tn at the exempt name
// newRel when the file still has a name (st_nlink > 0): that name may be a
// guarded one, which the new name would alias (EXDEV,
// guard.Guard.RefuseExemptName); at a name that is not exempt the tool
// trees decide (toolLinkByHandle). An O_TMPFILE file, or one whose names
// are all gone, has none. 0 for anything else.
func (n *Node) exemptLinkByHandle(ctx context.Context, fd int, newRel string) syscall.Errno {
	f := n.fs
	if f.guardMode == guard.ModeOff {
		return 0
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Nlink == 0 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	if !f.exempt(newRel, false) {
		return n.toolLinkByHandle(ctx, fd, newRel) // toolname.go
	}
	c := f.callerOf(ctx)
	if !f.guarded(c) {
		return 0
	}
	return f.cfg.Guard.RefuseExemptName(c.asker(f), guard.OpLinkExempt, newRel, newRel)
}
