package ctlfs

// What the open control-file handles of one uid keep in the daemon,
// bounded per uid: the content snapshots they hold and the renderers they
// keep running (docs/DESIGN.md#fd-budget).

import (
	"sync"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
)

// maxSnapshotBytesPerUID bounds the bytes of content snapshots the open
// control-file handles of one uid hold (Tree.snaps).
//
// A read-only control file serves the content it produced at its first
// read until the handle is released (or read again at offset 0), so a
// uid holding many handles held a copy each: 2,000 handles of a
// 2,000-record guard/tracked took the daemon from 26 MB to 263 MB, and
// the records of a session that read every file of a large tree run to
// megabytes a copy. Past it the read fails with EMFILE and the reason;
// releasing handles frees their bytes.
const maxSnapshotBytesPerUID = 64 << 20

// maxRendersPerUID bounds the control files one uid reads at once whose
// content is rendered as it is read (Tree.renders). A renderer keeps what
// it has built while it waits for its reader; a slot is held by the
// renderer goroutine from its start (the first read, or a read again at
// offset 0) until its render returns (pager.go).
const maxRendersPerUID = 16

// uidQuota counts an amount per uid (bytes, renderers); the zero value
// is ready. Concurrency: mu guards byUID.
type uidQuota struct {
	mu    sync.Mutex
	byUID map[uint32]int64
}

// change replaces old units held by uid with new (0: released) and
// returns what uid held before; ok false, holding nothing new, when that
// would take uid past max. A shrink or a release always passes.
func (q *uidQuota) change(uid uint32, old, new, max int64) (held int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	held = q.byUID[uid]
	next := held - old + new
	if new > old && next > max {
		return held, false
	}
	if next <= 0 {
		delete(q.byUID, uid)
		return held, true
	}
	if q.byUID == nil {
		q.byUID = map[uint32]int64{}
	}
	q.byUID[uid] = next
	return held, true
}

// holdSnapshot replaces a snapshot of old bytes held by uid in q (a
// Tree's snaps) with one of new bytes, or returns the EMFILE error.
func holdSnapshot(q *uidQuota, uid uint32, old, new int) error {
	if held, ok := q.change(uid, int64(old), int64(new), maxSnapshotBytesPerUID); !ok {
		return ctltree.Errorf(syscall.EMFILE, "the open control-file handles of uid %d hold %d bytes of content, and this one would add %d, past %d: read files to the end and close them",
			uid, held, new-old, maxSnapshotBytesPerUID)
	}
	return nil
}

// takeRender reserves a renderer slot for uid in q (a Tree's renders), or
// returns the EMFILE error; giveRender returns one.
func takeRender(q *uidQuota, uid uint32) error {
	if _, ok := q.change(uid, 0, 1, maxRendersPerUID); !ok {
		return ctltree.Errorf(syscall.EMFILE, "uid %d is reading %d rendered control files at once, the most: read one to its end or close it", uid, maxRendersPerUID)
	}
	return nil
}

func giveRender(q *uidQuota, uid uint32) { q.change(uid, 1, 0, maxRendersPerUID) }
