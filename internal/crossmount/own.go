package crossmount

// The stat each change through this mount left, by which another mount's
// unreported change is seen (docs/DESIGN.md#close-to-open).

import (
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// sameContent reports whether cur has the identity, size and mtime own
// recorded: no write or truncate reached the file since (each sets the
// mtime anew), while an attribute change may have.
func sameContent(own, cur guard.Stat) bool {
	return own.ID == cur.ID && own.Size == cur.Size && own.MtimeNs == cur.MtimeNs
}

// NoteOwn records st, the stat of id right after a change of it through
// this mount, on a mount that is or may become shared (OwnTracked;
// nothing else changes files behind an unshared one's back but what its
// watcher reports). Called under id's identity lock.
func (x *Mode) NoteOwn(id guard.FileID, st guard.Stat) {
	if x.OwnTracked() {
		x.own.Store(id, st)
	}
}

// Forget drops id's recorded stat: its last name is gone (its inode
// number may be reused), or its stat after an own change could not be
// taken. Called under id's identity lock.
func (x *Mode) Forget(id guard.FileID) { x.own.Delete(id) }

// NoteUnseen tells the guard of a change of id that did not come through
// this mount and that no watcher has reported yet: cur, id's stat taken
// under the identity lock and the cross-mount lock, has another size or
// mtime than this mount's own last change of the content left. Such a
// change is another mount's (or any writer's on the backing filesystem).
// It is noted as an external mutation (sessions.External), which ends
// every session's own-write exemption for id
// (docs/DESIGN.md#own-write-refresh): without it a session whose last
// change of the file was its own would be judged fresh without a hash,
// and would overwrite the other mount's change (a lost update). The hash
// then decides. cur is recorded as seen.
func (x *Mode) NoteUnseen(id guard.FileID, cur guard.Stat) {
	v, ok := x.own.Load(id)
	if !ok {
		return // this mount never changed it: no own-write exemption to end
	}
	if sameContent(v.(guard.Stat), cur) {
		return // the same content; an attribute change leaves it to the hash
	}
	x.own.Store(id, cur)
	x.unseen.Add(1)
	x.cfg.Guard.NoteMutation(id, sessions.External)
}

// OwnStat reports whether st, a backing file's stat, is the one this
// mount's own last change of its content left (same identity, size and
// mtime): the poller does not report it as another mount's change
// (docs/DESIGN.md#watch-poll). Safe for concurrent use.
func (x *Mode) OwnStat(st *unix.Stat_t) bool {
	v, ok := x.own.Load(guard.FileID{Dev: uint64(st.Dev), Ino: st.Ino})
	if !ok {
		return false
	}
	o := v.(guard.Stat)
	return o.Size == st.Size && o.MtimeNs == st.Mtim.Nano()
}
