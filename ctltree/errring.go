package ctltree

import (
	"sync"
	"time"
)

// MaxErrors bounds an ErrorRing (/.rubino/errors), in entries: the oldest
// entry is dropped first. With reasons clipped to MaxReason bytes, at most
// MaxErrors * MaxReason bytes of reasons are ever held.
const MaxErrors = 256

// ErrorRecord is one entry of /.rubino/errors, one JSON line:
// {time, session, pid, path, errno, message}.
type ErrorRecord struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"` // the failing caller's session
	Pid     uint32    `json:"pid"`     // the caller's pid; 0 when none (a journal failure)
	Path    string    `json:"path"`    // the control file (".rubino/...") or workspace path
	Errno   string    `json:"errno"`   // symbolic ("EINVAL")
	Message string    `json:"message"` // the readable reason, Clip'ped
}

// ErrorRing is the bounded log of failures behind /.rubino/errors: the
// last MaxErrors records, oldest first (docs/DESIGN.md#ctl-room). The zero
// value is an empty ring. Safe for concurrent use; no method blocks on
// anything but the ring's own mutex.
type ErrorRing struct {
	mu   sync.Mutex
	recs []ErrorRecord
}

// Add appends rec with its Message clipped (Clip), dropping the oldest
// record beyond MaxErrors.
func (r *ErrorRing) Add(rec ErrorRecord) {
	rec.Message = Clip(rec.Message)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) >= MaxErrors {
		r.recs = append(r.recs[:0], r.recs[len(r.recs)-MaxErrors+1:]...)
	}
	r.recs = append(r.recs, rec)
}

// Records returns a copy of the records whose session keep accepts (nil
// keep: all), oldest first.
func (r *ErrorRing) Records(keep func(session string) bool) []ErrorRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ErrorRecord, 0, len(r.recs))
	for _, rec := range r.recs {
		if keep == nil || keep(rec.Session) {
			out = append(out, rec)
		}
	}
	return out
}

// Drop removes the records of session from before: a session of that
// name registered at before starts with none
// (docs/DESIGN.md#session-names).
func (r *ErrorRing) Drop(session string, before time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.recs[:0]
	for _, rec := range r.recs {
		if rec.Session != session || !rec.Time.Before(before) {
			kept = append(kept, rec)
		}
	}
	clear(r.recs[len(kept):])
	r.recs = kept
}
