package compact

// Summaries: the rows that link a compacted session to the child it
// produced, and their queries.

import (
	"context"
	"time"
)

// Summary is one row of the summaries table: a compaction of SessionID
// into TargetID.
type Summary struct {
	ID             string `json:"summary_id"`
	SessionID      string `json:"source_session_id"`
	TargetID       string `json:"target_session_id"`
	Content        string `json:"content,omitempty"`
	PreviousID     string `json:"previous_summary_id,omitempty"`
	OriginalTokens int    `json:"original_tokens"`
	// SavedTokens is net: OriginalTokens minus the tokens of the child as
	// committed (head + summary + tail), counted like the threshold.
	SavedTokens int `json:"saved_tokens"`
	// RemovedTokens is gross: the middle that left the transcript, before
	// the summary was added back (SavedTokens = RemovedTokens - the
	// summary message's tokens).
	RemovedTokens     int       `json:"removed_tokens"`
	OriginalMessages  int       `json:"original_messages"`
	CompactedMessages int       `json:"compacted_messages"`
	SourceLastSeq     int64     `json:"source_last_seq"`
	Summarizer        string    `json:"summarizer"`
	Forced            bool      `json:"forced"`
	CreatedAt         time.Time `json:"created_at"`
}

// Ineffective reports whether the compaction saved, net of its summary,
// less than IneffectiveSavingsPct of its original tokens (the
// anti-thrashing test).
func (s Summary) Ineffective() bool {
	return ineffective(s.SavedTokens, s.OriginalTokens)
}

const summaryCols = `id, session_id, target_session_id, content, COALESCE(previous_summary_id, ''), original_tokens, saved_tokens,
	removed_tokens, original_messages, compacted_messages, source_last_seq, summarizer, forced, created_at`

// querySummaries runs a query selecting summaryCols and returns its rows.
func (s *Store) querySummaries(ctx context.Context, query string, args ...any) ([]Summary, error) {
	return queryRows(ctx, s.db, scanSummary, query, args...)
}

func scanSummary(r rowScanner) (Summary, error) {
	var sm Summary
	var created string
	if err := r.Scan(&sm.ID, &sm.SessionID, &sm.TargetID, &sm.Content, &sm.PreviousID, &sm.OriginalTokens, &sm.SavedTokens,
		&sm.RemovedTokens, &sm.OriginalMessages, &sm.CompactedMessages, &sm.SourceLastSeq, &sm.Summarizer, &sm.Forced, &created); err != nil {
		return Summary{}, err
	}
	sm.CreatedAt = parseTime(created)
	return sm, nil
}

// PreviousSummary returns the summary already folded into session id's
// transcript: the newest summary whose target is id or one of its
// ancestors; nil when there is none. A new summary is built on it and
// links to it (previous_summary_id).
func (s *Store) PreviousSummary(ctx context.Context, id string) (*Summary, error) {
	return firstOf(s.querySummaries(ctx, ancestorsCTE+`SELECT `+summaryCols+` FROM summaries WHERE target_session_id IN (SELECT id FROM anc) ORDER BY rowid DESC LIMIT 1`, id))
}

// LatestSummary returns the newest summary that session id produced or was
// produced by (what .rubino/compact/sessions/ID/summary shows); nil when
// there is none.
func (s *Store) LatestSummary(ctx context.Context, id string) (*Summary, error) {
	return firstOf(s.querySummaries(ctx, `SELECT `+summaryCols+` FROM summaries WHERE session_id = ? OR target_session_id = ? ORDER BY rowid DESC LIMIT 1`, id, id))
}

// SummariesFrom returns the compactions whose source is id, oldest first.
func (s *Store) SummariesFrom(ctx context.Context, id string) ([]Summary, error) {
	return s.querySummaries(ctx, `SELECT `+summaryCols+` FROM summaries WHERE session_id = ? ORDER BY rowid`, id)
}

// SummaryInto returns the compaction that created session id, or nil.
func (s *Store) SummaryInto(ctx context.Context, id string) (*Summary, error) {
	return firstOf(s.querySummaries(ctx, `SELECT `+summaryCols+` FROM summaries WHERE target_session_id = ?`, id))
}
