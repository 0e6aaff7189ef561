package compact

// The compaction_runs log: every compaction that built a summary, whether
// it committed a child session or was a no-op because it would not have
// shrunk the session. The anti-thrashing back-off reads it, so a session
// whose compactions keep failing to pay trips the back-off even though the
// failures left no summary row behind.

import (
	"context"
	"errors"
	"time"
)

// runsTable is the compaction_runs schema (created by migration 2). seq
// orders the runs of the whole store; summary_id is NULL for a no-op.
const runsTable = `CREATE TABLE compaction_runs (
	seq              INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id       TEXT NOT NULL REFERENCES sessions(id),
	summary_id       TEXT REFERENCES summaries(id),
	original_tokens  INTEGER NOT NULL,
	compacted_tokens INTEGER NOT NULL,
	removed_tokens   INTEGER NOT NULL,
	saved_tokens     INTEGER NOT NULL,
	source_last_seq  INTEGER NOT NULL,
	forced           INTEGER NOT NULL DEFAULT 0,
	created_at       TEXT NOT NULL
)`

// Run is one compaction that built a summary: committed (SummaryID set) or
// a no-op because the result would not have shrunk the session
// (ReasonWouldNotShrink; SummaryID ""). All counts are tokens, counted
// with the session's tokenizer, as the threshold is.
type Run struct {
	Seq       int64  `json:"seq"`
	SessionID string `json:"session_id"`
	SummaryID string `json:"summary_id,omitempty"`
	// OriginalTokens is the transcript before (up to SourceLastSeq).
	OriginalTokens int `json:"original_tokens"`
	// CompactedTokens is the transcript after: head + summary + tail, as
	// committed or as it would have been stored.
	CompactedTokens int `json:"compacted_tokens"`
	// RemovedTokens is the middle (gross).
	RemovedTokens int `json:"removed_tokens"`
	// SavedTokens is net: OriginalTokens - CompactedTokens (negative when
	// the summary outweighs the middle it replaces).
	SavedTokens   int       `json:"saved_tokens"`
	SourceLastSeq int64     `json:"source_last_seq"`
	Forced        bool      `json:"forced"`
	CreatedAt     time.Time `json:"created_at"`
}

// Ineffective reports whether the run saved, net, less than
// IneffectiveSavingsPct of its original tokens. A no-op run always does.
func (r Run) Ineffective() bool { return ineffective(r.SavedTokens, r.OriginalTokens) }

// ineffective is the anti-thrashing test on net savings.
func ineffective(saved, original int) bool {
	return float64(saved) < IneffectiveSavingsPct*float64(original)
}

// insertRun appends r to the log (r.Seq is assigned by the store).
func insertRun(ctx context.Context, db execer, r Run) error {
	var sid any
	if r.SummaryID != "" {
		sid = r.SummaryID
	}
	_, err := db.ExecContext(ctx, `INSERT INTO compaction_runs(session_id, summary_id, original_tokens, compacted_tokens, removed_tokens,
		saved_tokens, source_last_seq, forced, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.SessionID, sid, r.OriginalTokens, r.CompactedTokens, r.RemovedTokens, r.SavedTokens, r.SourceLastSeq, r.Forced,
		r.CreatedAt.UTC().Format(time.RFC3339Nano))
	return err
}

// recordNoopRun logs a compaction of r.SessionID that built a summary but
// did not commit it (r.SummaryID must be "").
func (s *Store) recordNoopRun(ctx context.Context, r Run) error {
	if r.SummaryID != "" {
		return errors.New("recordNoopRun: a no-op run has no summary")
	}
	return insertRun(ctx, s.db, r)
}

const runCols = `seq, session_id, COALESCE(summary_id, ''), original_tokens, compacted_tokens, removed_tokens, saved_tokens,
	source_last_seq, forced, created_at`

func scanRun(r rowScanner) (Run, error) {
	var run Run
	var created string
	if err := r.Scan(&run.Seq, &run.SessionID, &run.SummaryID, &run.OriginalTokens, &run.CompactedTokens, &run.RemovedTokens,
		&run.SavedTokens, &run.SourceLastSeq, &run.Forced, &created); err != nil {
		return Run{}, err
	}
	run.CreatedAt = parseTime(created)
	return run, nil
}

// RecentLineageRuns returns the n most recent runs whose source is session
// id (exact id) or one of its ancestors, newest first: the input of the
// thrashing test, which therefore also sees the no-op runs that built a
// summary and threw it away.
func (s *Store) RecentLineageRuns(ctx context.Context, id string, n int) ([]Run, error) {
	return queryRows(ctx, s.db, scanRun, ancestorsCTE+`SELECT `+runCols+` FROM compaction_runs
		WHERE session_id IN (SELECT id FROM anc) ORDER BY seq DESC LIMIT ?`, id, n)
}

// LastRun returns the newest run whose source is session id (exact id), or
// nil when there is none.
func (s *Store) LastRun(ctx context.Context, id string) (*Run, error) {
	return firstOf(queryRows(ctx, s.db, scanRun, `SELECT `+runCols+` FROM compaction_runs WHERE session_id = ? ORDER BY seq DESC LIMIT 1`, id))
}
