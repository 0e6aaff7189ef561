package journal

// After-notes, the end record, and which appends are fdatasync'ed
// (docs/DESIGN.md#journal-rewind).

import (
	"time"
)

// NoteAfter appends an after-note for session: the states afters its change
// ref (a Record.Seq; 0 for a handle's close) left behind, under the
// session's mutex so Seq stays gapless. It is not fdatasync'ed: an
// after-note lost to a power failure makes the next rewind report the path
// as a conflict, never restores over someone's change (the conflict rule
// falls back to an older note or to the kind check, both stricter than the
// lost note). The next fdatasync'ed record of the session makes it durable
// too, or (SyncWrite) the flusher. Errors are the log's write errors, or a bad session name.
func (j *Journal) NoteAfter(sessionName string, ref uint64, afters []After) error {
	if len(afters) == 0 {
		return nil
	}
	return j.note(sessionName, Record{Op: OpAfter, Ref: ref, After: afters})
}

// NoteAfterFunc is NoteAfter with the states taken by afters under the
// session's mutex, so that no other record of the session is appended
// between the moment they are taken and the note: a handle's release
// note, taken by the file's name at that moment, then lands before a
// rename's record or between it and the rename's after-note, where the
// conflict rule reads it right (docs/DESIGN.md#journal-rewind), never
// after the rename's after-note with the name from before it. afters
// must be quick (it holds up every append of the session) and returns
// nothing to note nothing. Errors as NoteAfter's.
func (j *Journal) NoteAfterFunc(sessionName string, ref uint64, afters func() []After) error {
	return j.noteFunc(sessionName, func(uint64) (Record, bool) {
		as := afters()
		return Record{Op: OpAfter, Ref: ref, After: as}, len(as) > 0
	})
}

// NoteFailed appends a failure note for session: its change ref (a
// Record.Seq) was recorded before its backing operation, which then
// failed, so the change never happened. The record stays, with the
// pre-images it saved (the state its names kept), but the conflict rule
// and the rewind's replay take nothing else from it (Record.Failed). Like
// an after-note it is not fdatasync'ed: a lost note leaves the change
// looking made, which only reports more conflicts. Errors are the log's
// write errors, or a bad session name.
func (j *Journal) NoteFailed(sessionName string, ref uint64) error {
	return j.note(sessionName, Record{Op: OpFailed, Ref: ref})
}

// note appends rec, an after-note or a failure note, as session's next
// record (its Seq and Time set here, under the session's mutex so Seq
// stays gapless), not fdatasync'ed; nothing while the session's journal
// is stopped (docs/DESIGN.md#journal-budget).
func (j *Journal) note(sessionName string, rec Record) error {
	return j.noteFunc(sessionName, func(uint64) (Record, bool) { return rec, true })
}

// noteFunc is note of the record make returns under the session's mutex,
// given the Seq of the session's last line (nothing when it returns
// false).
func (j *Journal) noteFunc(sessionName string, make func(last uint64) (Record, bool)) error {
	s, err := j.session(sessionName)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.stopped != "" {
		return nil
	}
	rec, ok := make(s.seq)
	if !ok {
		return nil
	}
	rec.Seq, rec.Time = s.seq+1, j.now().UTC()
	if err := s.log.write(rec, false); err != nil {
		return err
	}
	j.wrote(s.log)
	s.seq = rec.Seq
	return nil
}

// NoteRemoved appends, for session, the after-note of the removal (an
// unlink or rmdir) whose record is ref, afters its name as absent, unless
// ref is still the session's last line: the record already says the name
// is absent, the state the removal left (the conflict rule reads it so,
// docs/DESIGN.md#own-bracket-journal). Only a line logged after the record
// can leave another last word: a handle's release note taken before the
// backing removal names the file as it still was, and the after-note must
// then follow it. Errors and durability as NoteAfter's.
func (j *Journal) NoteRemoved(sessionName string, ref uint64, afters []After) error {
	return j.noteFunc(sessionName, func(last uint64) (Record, bool) {
		return Record{Op: OpAfter, Ref: ref, After: afters}, last != ref && len(afters) > 0
	})
}

// End appends the end record of session (its registration ended at t),
// fdatasync'ed: GC counts the session's retention from t.
func (j *Journal) End(sessionName string, t time.Time) error {
	s, err := j.session(sessionName)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	rec := Record{Seq: s.seq + 1, Time: t.UTC(), Op: OpEnd}
	if err := s.log.write(rec, true); err != nil {
		return err
	}
	s.seq = rec.Seq
	return nil
}

// needsSync says whether a change record must be durable before Record
// returns: one that saves a pre-image, and every structural op, must. A
// write, truncate or chmod of a path whose pre-image an earlier record of
// the interval already made durable may be lost to a power failure without
// harming a rewind: the rewind restores that earlier pre-image anyway, and
// the lost record only makes the path's last-known state older, which the
// conflict rule reports as a conflict rather than overwriting.
func needsSync(rec Record) bool {
	if len(rec.Pre) > 0 {
		return true
	}
	switch rec.Op {
	case "write", "truncate", "chmod":
		return false
	}
	return true
}
