package journal

// The journal budget: blobs and session logs together; a session whose
// change would grow the journal past it is stopped
// (docs/DESIGN.md#journal-budget).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// OpStop is the Op of the record that stops a session's journal; its
// Label says why. The session's later changes are not recorded until a
// checkpoint taken under the budget restarts it.
const OpStop = "stop"

// ErrStopped is wrapped by Record's error when the session's journal is
// stopped (the budget is spent): the caller lets the change go ahead
// unrecorded and says so (docs/DESIGN.md#journal-budget).
var ErrStopped = errors.New("journal stopped")

// countLogs sets the running total of the session logs' bytes (one walk of
// sessions/ at Open).
func (j *Journal) countLogs() error {
	ents, err := os.ReadDir(filepath.Join(j.dir, "sessions"))
	if err != nil {
		return err
	}
	var n int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	j.logBytes.Store(n)
	return nil
}

// logGrew adds n bytes (negative: removed) to the logs' running total.
func (j *Journal) logGrew(n int64) { j.logBytes.Add(n) }

// Used is the journal's size against its budget, in bytes: the blobs'
// (Blobs.Used) plus the session logs'.
func (j *Journal) Used() (blobs, logs int64) { return j.blobs.Used(), j.logBytes.Load() }

// Budget is the bound of Options.Budget, in bytes (0: none).
func (j *Journal) Budget() int64 { return j.budget }

// spent reports whether blobs and logs together have reached the budget.
func (j *Journal) spent() bool {
	if j.budget <= 0 {
		return false
	}
	b, l := j.Used()
	return b+l >= j.budget
}

// stopIfSpent, under s's mutex, returns the ErrStopped error of a stopped
// session, or stops it (an OpStop record, fdatasync'ed) when the budget, or
// its uid's share of it (docs/DESIGN.md#journal-share), is spent now.
func (j *Journal) stopIfSpent(s *session) error {
	if s.stopped == "" {
		var why string
		switch {
		case j.spent():
			b, l := j.Used()
			why = fmt.Sprintf("the journal budget of %d bytes is spent (blobs %d + logs %d bytes): later changes are not recorded until a checkpoint under the budget (raise --journal-budget, or end sessions for GC to collect)", j.budget, b, l)
		case s.share.spent():
			why = s.share.stopReason() // docs/DESIGN.md#journal-share
		default:
			return nil
		}
		rec := Record{Seq: s.seq + 1, Time: j.now().UTC(), Op: OpStop, Label: why}
		if err := s.log.append(rec); err != nil {
			return err
		}
		s.seq = rec.Seq
		s.stopped = why
	}
	return fmt.Errorf("%w: %s", ErrStopped, s.stopped)
}

// Stopped returns why session's journal is stopped, or "" when it runs
// (or the session has no open log). Safe for concurrent use.
func (j *Journal) Stopped(sessionName string) string {
	j.mu.Lock()
	s := j.sessions[sessionName]
	j.mu.Unlock()
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// StoppedSessions maps each open session whose journal is stopped to why.
func (j *Journal) StoppedSessions() map[string]string {
	j.mu.Lock()
	ss := make(map[string]*session, len(j.sessions))
	for n, s := range j.sessions {
		ss[n] = s
	}
	j.mu.Unlock()
	out := map[string]string{}
	for n, s := range ss {
		s.mu.Lock()
		if s.stopped != "" {
			out[n] = s.stopped
		}
		s.mu.Unlock()
	}
	return out
}
