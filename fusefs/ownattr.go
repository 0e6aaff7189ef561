package fusefs

// A change of a file's attributes through the mount keeps the reads whose
// hash is still deferred (docs/DESIGN.md#own-attr-change).

import (
	"syscall"

	"github.com/rubinofs/rubinofs/guard"
)

// settleDeferred takes, before a change through the mount that sets the
// ctime of the files at rels (chmod, chown, utimens, an extended
// attribute, a link, a rename, an unlink), the deferred hash of every
// read of them still pending (Guard.SettleDeferred): taken after the
// change, the hash would not be under the read's stat, and the read would
// be lost, a false `stale` refusal of the reader's next edit. Names that
// are not tracked, absent or not regular files are skipped; with no hash
// pending it costs one atomic load. Errors are none: a name that cannot
// be stat'ed has nothing to settle.
func (f *FS) settleDeferred(rels ...string) {
	if !f.cfg.Guard.HasDeferred() {
		return
	}
	for _, rel := range rels {
		if !f.tracks(rel) {
			continue
		}
		var st syscall.Stat_t
		if f.lstatRel(rel, &st) == 0 && regular(&st) {
			f.cfg.Guard.SettleDeferred(guard.StatOf(&st).ID)
		}
	}
}

// settleDeferredOf is settleDeferred for a mutation's names: the locked
// identities of the guarded ones (gs), and for a fresh mutation (nothing
// locked: chmod, chown, utimens, link) every name.
func (f *FS) settleDeferredOf(m *mutation, gs []guardedChild) {
	if !f.cfg.Guard.HasDeferred() {
		return
	}
	if m.fresh {
		for _, nm := range m.names {
			f.settleDeferred(nm.rel)
		}
		return
	}
	for _, g := range gs {
		if g.ok {
			f.cfg.Guard.SettleDeferred(g.id)
		}
	}
}

// settleDeferredNode is settleDeferred for n's own inode, found by its
// identity rather than by a name: a hard-linked file's node may name it by
// a path that leads to another file by now (an exchange of the name it
// was first known by), and its attributes are changed through n. Used by
// Setattr, Setxattr, Removexattr, Link and ioctls.
func (f *FS) settleDeferredNode(n *Node) {
	if !f.cfg.Guard.HasDeferred() || n.isRoot() {
		return
	}
	want := n.StableAttr().Ino
	f.cfg.Guard.SettleDeferredWhere(func(id guard.FileID) bool {
		st := syscall.Stat_t{Dev: id.Dev, Ino: id.Ino}
		return f.stableAttr(&st, 0).Ino == want
	})
}
