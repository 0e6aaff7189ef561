package tasks

import (
	"fmt"
	"strings"
)

// AnswerNotePrefix is stamped on the steer-queue copy of an answer that
// DeliverAnswer also delivered through the ask gate. FilterUndelivered drops
// notes carrying it from the undelivered report, so a delivered answer is
// never reported undelivered; a real steer note never carries it.
const AnswerNotePrefix = "[parent answer] "

// ChildAskPrefix starts the note pushed onto an owner task's steer queue
// when one of its children asks (the owner answers with `reply`):
// "[child ID asks] QUESTION".
const ChildAskPrefix = "[child "

// Steer pushes a note onto the task's steer queue, which the task drains
// (DrainSteer: its inbox) at its next turn. It returns false, pushing
// nothing, when the entry is gone or already terminal. The push happens
// under the registry mutex, gated on a non-terminal status, so it is
// serialised against Complete: a true return means the note is either
// drained by the task or reported by Complete as undelivered, never lost
// (docs/DESIGN.md#task-steering).
func (r *Registry) Steer(id, text string) bool {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	return r.steerLocked(id, text)
}

// steerLocked is Steer with r.mu held.
func (r *Registry) steerLocked(id, text string) bool {
	e := r.entries[id]
	if e == nil || e.Status.Terminal() {
		return false
	}
	e.steer = append(e.steer, text)
	return true
}

// DrainSteer empties the task's steer queue and returns the notes, oldest
// first: the task's turn boundary (reading its inbox). Nil for an unknown
// id or an empty queue.
func (r *Registry) DrainSteer(id string) []string {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return nil
	}
	out := e.steer
	e.steer = nil
	return out
}

// UndeliveredKeptMax bounds, in bytes, the undelivered steer notes a
// finished entry keeps for its activity file (the queue itself may hold
// MaxQueuedNotes notes of up to MaxCtl bytes: 4 MiB). Whole notes are kept,
// oldest first; the rest become one "[N more undelivered notes (B bytes)
// not kept]" line. Complete still returns every drained note.
const UndeliveredKeptMax = 64 << 10

// keepNotes applies UndeliveredKeptMax.
func keepNotes(notes []string) []string {
	size := 0
	for i, n := range notes {
		if size+len(n) > UndeliveredKeptMax {
			rest := 0
			for _, m := range notes[i:] {
				rest += len(m)
			}
			return append(notes[:i:i], fmt.Sprintf("[%d more undelivered notes (%d bytes) not kept]", len(notes)-i, rest))
		}
		size += len(n)
	}
	return notes
}

// FilterUndelivered drops notes carrying AnswerNotePrefix (answers already
// delivered through their ask gate) from an undelivered report.
func FilterUndelivered(notes []string) []string {
	var out []string
	for _, n := range notes {
		if !strings.HasPrefix(n, AnswerNotePrefix) {
			out = append(out, n)
		}
	}
	return out
}
