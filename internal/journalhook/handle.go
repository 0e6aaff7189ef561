package journalhook

// A writable handle's journal state (docs/DESIGN.md#journal-hook): its
// first change is recorded by the handle's name before the change, and a
// handle that changed its file notes the file's state at release.

import (
	"sync"
	"syscall"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/journal"
)

// Handle is the journal state of one writable handle. A nil *Handle is a
// handle not journaled (not writable, or the journal off): its methods do
// nothing. Safe for concurrent use.
type Handle struct {
	h        *Hook
	mu       sync.Mutex
	session  string // the session seen at open
	recorded bool   // the handle's first change is journaled
	wrote    bool   // it changed the file: an after-note at release
	skip     bool   // its file is not journaled (Journals, at its first change)
	// gen is Hook.gen when the handle's change was recorded: after a
	// checkpoint (of any session) its next change is recorded again, so
	// the new interval has the file's pre-image.
	gen uint64
}

// NewHandle is the journal state of a writable handle opened by session,
// nothing recorded yet; nil with the journal off.
func (h *Hook) NewHandle(session string) *Handle {
	if h == nil {
		return nil
	}
	return &Handle{h: h, session: session}
}

// Created is the journal state of the handle that created rel for
// session: its creation is its first change, journaled by the create's
// mutation in generation gen (Gen before the record); nil when rel is
// not journaled.
func (h *Hook) Created(rel, session string, gen uint64) *Handle {
	if !h.Journals(rel, false) {
		return nil
	}
	return &Handle{h: h, session: session, recorded: true, wrote: true, gen: gen}
}

// OpOf is the journal op of a change through a handle.
func OpOf(gop guard.Op) string {
	if gop == guard.OpTruncate {
		return OpTruncate
	}
	return OpWrite
}

// Change records, at the handle's first change of rel (in the current
// generation), op for the handle's session with rel's pre-image taken by
// its name before the change. Its errno refuses the change (Hook.Record).
func (hj *Handle) Change(op, rel string) syscall.Errno {
	if hj == nil {
		return 0
	}
	h := hj.h
	gen := h.gen.Load()
	hj.mu.Lock()
	defer hj.mu.Unlock()
	if hj.recorded && hj.gen == gen {
		hj.wrote = true
		return 0
	}
	if hj.skip || OrphanRel(rel) {
		// A nameless file's change is not journaled, and not decided
		// either: linkat may name it, and its handle's next change is
		// then journaled like any named file's.
		return 0
	}
	if !h.Journals(rel, false) {
		hj.skip = true // decided once per handle, like the guard's right
		return 0
	}
	p, errno := h.Record(hj.session, op, []Name{{Rel: rel, Dir: -1}})
	p.release() // no after-note here: Release notes the state
	if errno != 0 {
		return errno
	}
	hj.recorded, hj.gen = true, gen
	hj.wrote = hj.wrote || p.Recorded() // unrecorded (a full state directory): no after-note
	return 0
}

// Release notes, at the release of a handle that changed its file (ref 0:
// a handle's close), the state of the file under the name it has now:
// fd is the handle's backing descriptor, named by Mount.NameOf and
// stat'ed through itself. The mount's own name for the handle's node
// (rel) lags behind a rename until the rename's request has returned,
// after its after-note, so a note by rel could name where the file was
// (docs/DESIGN.md#journal-rewind). rel is used only when fd < 0; a file
// with no name (unlinked) gets no note. A note taken between an unlink's
// record and its backing unlink names the file as it still was; the
// unlink's after-note then follows it (journal.Journal.NoteRemoved).
func (hj *Handle) Release(rel string, fd int) {
	if hj == nil {
		return
	}
	hj.mu.Lock()
	wrote := hj.wrote
	hj.wrote = false
	hj.mu.Unlock()
	if !wrote {
		return
	}
	// No rename or exchange is in flight while the note is taken: a
	// note by the file's name now, logged between a move's record and
	// its after-note, could not be told from one by its name before
	// the move (Hook.moves).
	hj.h.moves.Lock()
	defer hj.h.moves.Unlock()
	var err error
	if fd >= 0 {
		// Named and stat'ed under the session log's mutex: a rename of the
		// file cannot slip between the name and the note
		// (journal.NoteAfterFunc).
		err = hj.h.cfg.Journal.NoteAfterFunc(hj.session, 0, func() []journal.After {
			name, ok := hj.h.cfg.Mount.NameOf(fd)
			if !ok {
				return nil
			}
			rel = name
			return []journal.After{afterAt(fd, "", name)}
		})
	} else {
		dfd, leaf, done, errno := hj.h.cfg.Mount.OpenParent(rel)
		if errno != 0 {
			return
		}
		defer done()
		err = hj.h.cfg.Journal.NoteAfter(hj.session, 0, []journal.After{afterAt(dfd, leaf, rel)})
	}
	if err != nil {
		hj.h.cfg.Logger.Warn("journal: an after-note was lost: a rewind will report the path as a conflict", "path", rel, "session", hj.session, "err", err)
	}
}

// Truncated marks the handle's first change as journaled by the O_TRUNC
// open that made it (the mutation's record), in generation gen (Gen
// before the record).
func (hj *Handle) Truncated(gen uint64) {
	if hj == nil {
		return
	}
	hj.mu.Lock()
	hj.recorded, hj.wrote, hj.gen = true, true, gen
	hj.mu.Unlock()
}
