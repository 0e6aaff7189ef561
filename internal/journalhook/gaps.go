package journalhook

// Changes let through unrecorded (docs/DESIGN.md#journal-hook, "A full
// state directory"; docs/DESIGN.md#journal-budget), and the hook's errors.

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
)

// gaps counts the changes made unrecorded because the state directory
// was full or a session's journal stopped, with the last such error, for
// .rubino/status.
type gaps struct {
	mu   sync.Mutex
	n    uint64
	last string
	// stopped marks the sessions whose stop was logged (once each).
	stopped map[string]bool
}

// gap lets a change through unrecorded when the state directory is full:
// a full state disk must not stop the workspace (the guard keeps deciding
// from memory too), and the change is counted in .rubino/status
// ("journal": "unrecorded", "last_error"), logged at error the first time
// after a success and listed in .rubino/errors, so the user knows the
// journal has a gap.
func (h *Hook) gap(session, op, rel string, err error) {
	g := &h.gaps
	g.mu.Lock()
	first := g.last == ""
	g.n++
	g.last = err.Error()
	g.mu.Unlock()
	if first {
		h.journalError(session, rel, fmt.Sprintf("%s made unrecorded: the journal's state directory is full: %v", op, err))
	}
}

// stoppedGap counts a change let through unrecorded because its session's
// journal is stopped (the budget is spent), and logs and lists the stop
// the first time per session (docs/DESIGN.md#journal-budget).
func (h *Hook) stoppedGap(session, op, rel string, err error) {
	g := &h.gaps
	g.mu.Lock()
	g.n++
	g.last = err.Error()
	if g.stopped == nil {
		g.stopped = map[string]bool{}
	}
	first := !g.stopped[session]
	g.stopped[session] = true
	g.mu.Unlock()
	if first {
		h.journalError(session, rel, fmt.Sprintf("%s made unrecorded: %v", op, err))
	}
}

// Status is the "journal" key of .rubino/status (a fusefs.StatusFunc):
// the changes made unrecorded and the last reason, the budget and what
// counts against it (bytes), the bound of one uid's share and the uid
// with the most in its share (docs/DESIGN.md#journal-share), and "stopped": each session whose journal is
// stopped, with why (docs/DESIGN.md#journal-budget). Call it only on a
// non-nil Hook.
func (h *Hook) Status() (string, any) {
	g := &h.gaps
	g.mu.Lock()
	st := map[string]any{"unrecorded": g.n}
	if g.last != "" {
		st["last_error"] = g.last
	}
	g.mu.Unlock()
	j := h.cfg.Journal
	blobs, logs := j.Used()
	st["budget_bytes"] = j.Budget()
	st["blob_bytes"] = blobs
	st["log_bytes"] = logs
	if per := j.OwnerBudget(); per > 0 { // docs/DESIGN.md#journal-share
		st["budget_per_uid_bytes"] = per
		if uid, used := j.MostByOneUID(); used > 0 {
			st["most_by_one_uid"] = map[string]any{"uid": uid, "bytes": used}
		}
	}
	if o := j.Others(); o != nil {
		st["budget_other_uids_bytes"] = o.Limit()
		st["other_uids_bytes"] = o.Used()
	}
	stopped := j.StoppedSessions()
	if len(stopped) > 0 {
		st["stopped"] = stopped
	}
	g.mu.Lock()
	for s := range g.stopped { // restarted by a checkpoint under the budget
		if stopped[s] == "" {
			delete(g.stopped, s)
		}
	}
	g.mu.Unlock()
	return "journal", st
}

// failed logs a change refused because its record could not be made
// durable, and lists it in .rubino/errors.
func (h *Hook) failed(session, op, rel string, err error) {
	h.journalError(session, rel, fmt.Sprintf("%s refused: its journal record (pre-image) could not be made durable: %v", op, err))
}

// journalError logs msg at error and lists it in .rubino/errors.
func (h *Hook) journalError(session, rel, msg string) {
	h.cfg.Logger.Error("journal: "+msg, "path", rel, "session", session)
	if h.cfg.Report != nil {
		h.cfg.Report(ctltree.ErrorRecord{Time: time.Now(), Session: session, Path: rel,
			Errno: unix.ErrnoName(syscall.EIO), Message: msg})
	}
}
