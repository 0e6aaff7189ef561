package guard

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/rubinofs/rubinofs/sessions"
)

// Declared reads: a harness tells the guard what its model was shown
// (.rubino/self/ctl, "read PATH [HASH]" and "edit-failed PATH"), because in
// harness mode the harness's own reads through the mount count for nothing
// (docs/DESIGN.md#scanner-reads).

// DeclareRead records that the model of session was shown t's content
// (a registered read, holding the bytes the model saw):
//
//   - With full set, h is the content hash of the bytes the model was shown
//     in full (Hash.String's format on the wire). The record holds h even
//     when the file has changed since: a later decision finds it stale and
//     refuses, which is exactly right, as the model's view is stale. A full
//     view is a fresh read: a pending edit-failure recovery is consumed and
//     the file's dedup windows are dropped.
//   - Without full, the harness cannot vouch for what the model saw in
//     full: a partial window (offset/limit), or a stub such as "file
//     unchanged since last read" that points at an earlier view. h is
//     ignored. When the session has no record of the file, the bytes on
//     disk now are recorded (a read of any window counts as having opened
//     the file, as a read through the mount does). An existing record is
//     never moved to other bytes: a fresh one is renewed, a stale one stays
//     stale, so a partial read or a stub never refreshes a record to bytes
//     the model never saw. The model must be shown the file in full (a
//     declaration with a hash, or a read through the mount by a process
//     other than the harness root) to refresh it.
//
// A declaration that would make a new record past the session's uid's
// record bound records nothing (docs/DESIGN.md#record-budget).
//
// Errors are those of hashing (nothing is then recorded). A no-op in
// ModeOff and for sessions.Unknown. Safe for concurrent use.
func (g *Guard) DeclareRead(session string, t Target, h Hash, full bool) error {
	if g.mode == ModeOff || session == sessions.Unknown {
		return nil
	}
	tr := g.ForSession(session)
	if !g.recordAllowed(Caller{Session: session}, tr, t.Stat.ID) {
		return nil
	}
	if full {
		g.reads.Add(1)
		if err := tr.Register(t, h); err != nil {
			return err
		}
		id := t.Stat.ID
		tr.mu.Lock()
		if r, ok := tr.state[id]; ok {
			r.declared = !h.IsZero()
		}
		tr.dropViews(id)
		tr.mu.Unlock()
		return nil
	}
	seen, fresh, err := tr.check(t)
	if err != nil {
		return err
	}
	if seen && !fresh {
		return nil
	}
	g.reads.Add(1)
	return tr.Register(t, Hash{})
}

// DeclareEditFailed flags that the model's last edit of id failed in the
// harness (Tracker.NoteEditFailure): the session's next DuplicateRead of
// it serves fresh content once. A no-op in ModeOff and for sessions.Unknown.
func (g *Guard) DeclareEditFailed(session string, id FileID) {
	if g.mode == ModeOff || session == sessions.Unknown {
		return
	}
	g.ForSession(session).NoteEditFailure(id)
}

// RecoveryPending reports whether session's next DuplicateRead of id
// bypasses dedup (an edit failure was noted and not consumed yet).
func (g *Guard) RecoveryPending(session string, id FileID) bool {
	t := g.tracker(session)
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recover[id]
}

// ParseHash parses the canonical form Hash.String prints: 32 hex digits
// (either case), Hi's big-endian bytes then Lo's. The all-zero value is
// refused: it is the zero Hash, which means "not known".
func ParseHash(s string) (Hash, error) {
	if len(s) != 32 {
		return Hash{}, fmt.Errorf("hash %q is not 32 hex digits (xxh3-128)", clipForError(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return Hash{}, fmt.Errorf("hash %q is not 32 hex digits (xxh3-128)", clipForError(s))
	}
	h := Hash{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
	if h.IsZero() {
		return Hash{}, errors.New("the all-zero hash names no content")
	}
	return h, nil
}

// clipForError clips s to 40 bytes for an error message.
func clipForError(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
