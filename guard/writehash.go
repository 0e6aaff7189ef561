package guard

import (
	"github.com/zeebo/xxh3"

	"github.com/rubinofs/rubinofs/sessions"
)

// WriteHash hashes the bytes one handle writes while it writes the file in
// order from offset 0, so that its own write can be credited without
// reading the file back (docs/DESIGN.md#lazy-hash). It holds a hash only
// while everything the handle wrote is the whole file: each write starts
// where the previous one ended, the first at offset 0, and after each the
// file's size is exactly the bytes hashed. Anything else (a gap, a
// rewrite, a short file grown by someone else, any other change through
// the handle) breaks it for good, and the credit reads the file back as
// before. The zero value is ready to use.
//
// Concurrency: not safe for concurrent use; fusefs calls it under the
// handle's mutex and the identity lock, around the write it describes.
type WriteHash struct {
	h      *xxh3.Hasher
	off    int64   // bytes hashed so far
	key    hashKey // the file's stat key after the last write
	broken bool
}

// Before notes before, the file's stat taken right before a write of the
// handle: once the handle has written, a stat other than the one its last
// write left means the file changed in between, and the hash gives up.
func (w *WriteHash) Before(before Stat) {
	if w.h != nil && !w.broken && keyOf(before) != w.key {
		w.Break()
	}
}

// Started reports whether the handle has written and still holds its
// hash: only then does a write need Before.
func (w *WriteHash) Started() bool { return w.h != nil && !w.broken }

// Wrote notes that p was written at off and that after, the file's stat
// taken after the write, followed.
func (w *WriteHash) Wrote(off int64, p []byte, after Stat) {
	if w.broken {
		return
	}
	if w.h == nil {
		if off != 0 {
			w.Break()
			return
		}
		w.h = xxh3.New()
	}
	if off != w.off {
		w.Break()
		return
	}
	w.h.Write(p)
	w.off += int64(len(p))
	if after.Size != w.off {
		w.Break()
		return
	}
	w.key = keyOf(after)
}

// Active reports whether the hash still holds (nothing broke it).
func (w *WriteHash) Active() bool { return !w.broken }

// Interleaved notes that something else changed the file since the
// handle's last write: once the handle has written, it gives up.
func (w *WriteHash) Interleaved() {
	if w.h != nil {
		w.Break()
	}
}

// Break gives up: the next Sum reports false, whatever is written later.
func (w *WriteHash) Break() {
	w.broken, w.h = true, nil
}

// Sum returns the content hash of the file whose stat is now st, when the
// handle's writes are the whole file and st is exactly the stat the last
// write left (same identity, size, mtime and ctime: no one wrote after
// it); false otherwise. The hash equals what reading the file would give
// (xxh3-128 of the same bytes, in one stream).
func (w *WriteHash) Sum(st Stat) (Hash, bool) {
	if w.broken || w.h == nil || keyOf(st) != w.key {
		return Hash{}, false
	}
	u := w.h.Sum128()
	return Hash{Hi: u.Hi, Lo: u.Lo}, true
}

// NoteWriteHashed credits session with writing t's current content, whose
// hash h the caller took from the bytes as they were written (WriteHash):
// Tracker.NoteWrite without reading the file back. A zero h, or a file
// over the hash bound (whose stat stands for its bytes:
// docs/DESIGN.md#hash-bound), goes through NoteWrite. A no-op in ModeOff,
// for sessions.Unknown and past the uid's record budget (as NoteWrite).
func (g *Guard) NoteWriteHashed(session string, t Target, h Hash) error {
	if h.IsZero() || g.hashes.overBound(t.Stat) {
		return g.NoteWrite(session, t)
	}
	if g.mode == ModeOff || session == sessions.Unknown {
		return nil
	}
	g.writes.Add(1)
	g.hashes.streamed.Add(1)
	g.hashes.streamedBytes.Add(uint64(t.Stat.Size))
	// The bytes hashed are the content under t.Stat's key: cached, so
	// the session's next decision reads nothing back where that key is
	// trusted (docs/DESIGN.md#fine-ctime).
	g.hashes.storeWritten(t.Stat, h)
	tr := g.ForSession(session)
	if !g.recordAllowed(Caller{Session: session}, tr, t.Stat.ID) {
		return nil // past the uid's record budget: docs/DESIGN.md#record-budget
	}
	return tr.NoteWrite(t, h)
}
