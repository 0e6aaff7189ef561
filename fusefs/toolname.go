package fusefs

// No rename or link through the mount gives what the guard covers a
// tool-owned tree's exemption (docs/DESIGN.md#tool-trees, "Renames and
// links"); ignore.Tools.Moved tells what a change would free.

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
)

// toolMove is exemptMove's decision when no exempt name is involved: a
// rename of srcRel (type ks, S_IFMT) to dstRel (and, for an exchange, of
// dstRel, type kd, to srcRel) against the tool trees, for a caller the
// guard decides for (ignore.Tools.Moved):
//
//   - a guarded file moved below a marker that would free it is decided
//     as an overwrite of it (ask is true: guard.OpMoveExempt);
//   - a covered directory given a directory marker's name, or moved
//     below a marker it is not below, while it holds a guarded file, and
//     either side of an exchange that would free something, are refused
//     with EXDEV (guard.Guard.RefuseToolTree): mv(1) then copies or moves
//     the files one by one, and a copy is born after the marker.
//
// A file given a file marker's name needs nothing here: the marker
// counts from the rename. The caller holds moveSerial's lock. A rename
// within a directory to an ordinary name reads nothing
// (ignore.Tools.MayFree).
func (n *Node) toolMove(ctx context.Context, srcRel string, ks uint32, dstRel string, kd uint32, exchange bool) (ask bool, by caller, errno syscall.Errno) {
	f := n.fs
	in := f.mayFreeTool(srcRel, ks, dstRel)
	out := exchange && f.mayFreeTool(dstRel, kd, srcRel)
	if !in && !out {
		return false, caller{}, 0
	}
	c := f.callerOf(ctx)
	if !f.guarded(c) {
		return false, caller{}, 0
	}
	rin, rout := ignore.FreesNothing, ignore.FreesNothing
	if in {
		rin = f.toolFrees(c, srcRel, ks, dstRel)
	}
	if out {
		rout = f.toolFrees(c, dstRel, kd, srcRel)
	}
	switch {
	case rin == ignore.FreesNothing && rout == ignore.FreesNothing:
		return false, caller{}, 0
	case !exchange && rin == ignore.FreesFile:
		return true, c, 0
	}
	path, to := srcRel, dstRel
	if rin == ignore.FreesNothing {
		path, to = dstRel, srcRel
	}
	return false, c, f.cfg.Guard.RefuseToolTree(c.asker(f), guard.OpMoveExempt, path, to)
}

// mayFreeTool reports whether moving what of type kind is at from to the
// name to could free guarded content through a tool tree: it is a
// regular file or a directory the guard covers, and the names alone do
// not rule it out (ignore.Tools.MayFree).
func (f *FS) mayFreeTool(from string, kind uint32, to string) bool {
	return (kind == syscall.S_IFREG || kind == syscall.S_IFDIR) &&
		f.cfg.Tools.MayFree(from, to, kind == syscall.S_IFDIR) && f.covers(from, kind)
}

// toolFrees is ignore.Tools.Moved for caller c, a directory that would
// free a tree counting only when it holds a regular file the guard covers
// (coveredBelow).
func (f *FS) toolFrees(c caller, from string, kind uint32, to string) ignore.MoveFreed {
	r := f.cfg.Tools.Moved(from, to, kind == syscall.S_IFDIR, c.uid)
	if r == ignore.FreesTree && !f.coveredBelow(from) {
		return ignore.FreesNothing
	}
	return r
}

// coveredBelow reports whether the directory rel holds, at any depth, a
// regular file the guard covers (one no rule exempts), or when that
// cannot be told (walkBelow's bounds); a directory that is gone holds
// none (the rename fails).
func (f *FS) coveredBelow(rel string) bool {
	return f.walkDir(rel, rel, func(_, _ string, isDir bool) bool { return !isDir })
}

// toolLink decides a hard link of the guarded file srcRel at newRel
// against the tool trees, for a caller the guard decides for: refused
// with EXDEV (guard.Guard.RefuseToolTree) when the new name would free
// the file (a marker above it would) or make it a marker born before the
// mount; writes through the new name would then change the guarded file
// unrefused. 0 for anything else.
func (n *Node) toolLink(ctx context.Context, srcRel, newRel string) syscall.Errno {
	f := n.fs
	if !f.cfg.Tools.MayFree(srcRel, newRel, false) {
		return 0
	}
	c := f.callerOf(ctx)
	if !f.guarded(c) || f.cfg.Tools.Moved(srcRel, newRel, false, c.uid) == ignore.FreesNothing {
		return 0
	}
	return f.cfg.Guard.RefuseToolTree(c.asker(f), guard.OpLinkExempt, srcRel, newRel)
}

// toolLinkByHandle is toolLink for the open file fd that still has a
// name, linked at newRel (its names are not known: ignore.Tools.LinkedFd).
func (n *Node) toolLinkByHandle(ctx context.Context, fd int, newRel string) syscall.Errno {
	f := n.fs
	if !f.cfg.Tools.Enabled() {
		return 0
	}
	c := f.callerOf(ctx)
	if !f.guarded(c) || f.cfg.Tools.LinkedFd(fd, newRel, c.uid) == ignore.FreesNothing {
		return 0
	}
	return f.cfg.Guard.RefuseToolTree(c.asker(f), guard.OpLinkExempt, newRel, newRel)
}

// walkDir opens the directory srcRel and walks it (walkBelow, at most
// maxExemptWalk entries) against dstRel; a directory that is gone finds
// nothing, one that cannot be opened finds something.
func (f *FS) walkDir(srcRel, dstRel string, found func(s, t string, isDir bool) bool) bool {
	d, errno := f.bk.openDir(srcRel)
	if errno != 0 {
		return errno != syscall.ENOENT
	}
	fd, err := unix.Openat(d.FD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	d.Close()
	if err != nil {
		return true
	}
	budget := maxExemptWalk
	return f.walkBelow(fd, srcRel, dstRel, &budget, 0, found)
}
