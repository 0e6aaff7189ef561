package fusefs

// A change of a file's attributes through the mount keeps the reads whose
// hash is still deferred (docs/DESIGN.md#own-attr-change), hashed through
// the change's own file (docs/DESIGN.md#fsstress-findings).

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// settleDeferred takes, before a change through the mount that sets the
// ctime of the files at rels (chmod, chown, utimens, an extended
// attribute, a link, a rename, an unlink), the deferred hash of every
// read of them still pending (Guard.SettleDeferred), opening each by the
// name the change uses: taken after the change, the hash would not be
// under the read's stat, and the read would be lost, a false `stale`
// refusal of the reader's next edit. Names that are not tracked, absent
// or not regular files are skipped; with no hash pending it costs one
// atomic load. Errors are none: a name that cannot be stat'ed has nothing
// to settle.
func (o ownChanges) settleDeferred(rels ...string) {
	f := o.f
	if !f.cfg.Guard.HasDeferred() {
		return
	}
	for _, rel := range rels {
		if !f.tracks(rel) {
			continue
		}
		var st syscall.Stat_t
		if f.bk.lstatRel(rel, &st) == 0 && regular(&st) {
			f.cfg.Guard.SettleDeferred(guard.StatOf(&st).ID, func() (*os.File, error) { return f.bk.openForHashAt(rel) })
		}
	}
}

// settleDeferredNode is settleDeferred for n's own inode, found by its
// identity rather than by a name, and hashed through the change's own
// file: a duplicate of the descriptor of one of n's open handles when it
// has one (n's inode whatever its names lead to now), else n's path. A
// hard-linked file's node may name it by a path that leads to another
// file by now (an exchange of the name it was first known by), and so may
// the read's own name; the guard uses an opener only when it opens the
// read's file (same device and inode). Used by Setattr, Setxattr,
// Removexattr, Link and ioctls, before they change the file.
func (o ownChanges) settleDeferredNode(n *Node) {
	f := o.f
	if !f.cfg.Guard.HasDeferred() || n.isRoot() {
		return
	}
	want := n.StableAttr().Ino
	f.cfg.Guard.SettleDeferredWhere(func(id guard.FileID) bool {
		st := syscall.Stat_t{Dev: id.Dev, Ino: id.Ino}
		return f.bk.stableAttr(&st, 0).Ino == want
	}, n.ownOpener())
}

// ownOpener returns an opener of n's own file for hashing: through a
// duplicate of one of n's open handles' descriptors when n has one then
// (reopened read-only through its /proc/self/fd link, with its own
// offset), else by n's path, which the guard verifies. Nothing is opened
// until it is called.
func (n *Node) ownOpener() func() (*os.File, error) {
	return func() (*os.File, error) {
		if fd, _, ok := n.handleFd(false); ok {
			defer unix.Close(fd)
			return fdOpener(fd)()
		}
		return n.fs.bk.openForHashAt(n.rel())
	}
}

// fdOpener opens the file behind fd, a backing descriptor that stays open
// while the opener is called, read-only for hashing and with its own
// offset (through its /proc/self/fd link, never fd itself).
func fdOpener(fd int) func() (*os.File, error) {
	return func() (*os.File, error) {
		return openForHash(fmt.Sprintf("/proc/self/fd/%d", fd), syscallcompat.FdDirect(fd))
	}
}
