package compact

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// bigSummary is a summary large enough that a child session holding it
// stays above smallConfig's 1,000-token threshold.
func bigSummary() string {
	return "## Goal\n" + strings.Repeat("- decision: keep the parser strict and the whole test suite green\n", 150)
}

// shortTurns returns n user/assistant turns of about 15 tokens a message.
func shortTurns(from, n int) []Message {
	var out []Message
	for i := from; i < from+n; i++ {
		out = append(out, user(fmt.Sprintf("step %d: edit the parser, then rerun the whole test suite", i)),
			assistant(fmt.Sprintf("done %d: the parser is edited and the whole suite passes", i)))
	}
	return out
}

// compactedSession compacts a long session of short turns with bigSummary
// and returns the compressor, its summarizer, and the child session, which
// still needs compaction by the token count.
func compactedSession(t *testing.T) (*Compressor, *fixedSummarizer, string) {
	t.Helper()
	sum := &fixedSummarizer{text: bigSummary()}
	c := newTestCompressor(t, smallConfig(), WithSummarizer(sum))
	ctx := context.Background()
	root := newSessionWith(t, c, SessionOptions{}, append([]Message{system("You are a coding agent.")}, shortTurns(0, 150)...))
	r1, err := c.Compact(ctx, root, false)
	if err != nil || !r1.Compacted {
		t.Fatalf("first compaction: %+v, %v", r1, err)
	}
	if r1.SavedTokens != r1.OriginalTokens-r1.CompactedTokens || r1.SavedTokens < MinSavedTokens {
		t.Fatalf("first compaction saved %d net of %d -> %d tokens", r1.SavedTokens, r1.OriginalTokens, r1.CompactedTokens)
	}
	st, err := c.Status(ctx, r1.TargetSessionID)
	if err != nil || !st.NeedsCompaction || st.Thrashing || st.Messages < c.cfg.MinimumMessages {
		t.Fatalf("the child must still need compaction for this test: %+v, %v", st, err)
	}
	return c, sum, r1.TargetSessionID
}

// TestSecondCompactionOfCompactedSessionIsNoOp compacts a session whose
// summary keeps the child above the threshold, then compacts the child:
// its middle is little more than the old summary, so the new transcript
// would be as large as the old one. That is a no-op that says why: no
// child, no summary row, lineage unchanged; force cannot commit it either.
func TestSecondCompactionOfCompactedSessionIsNoOp(t *testing.T) {
	c, sum, child := compactedSession(t)
	ctx := context.Background()
	msgs, _ := c.store.Messages(ctx, child, 0)
	linBefore, err := c.Lineage(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	before, calls := counts(t, c.store), sum.calls.Load()

	res, err := c.Compact(ctx, child, false)
	if err != nil || res.Compacted || res.Reason != ReasonWouldNotShrink || res.TargetSessionID != "" || res.SavedTokens != 0 || res.SummaryID != "" {
		t.Fatalf("second compaction: %+v, %v; want a would_not_shrink no-op", res, err)
	}
	if sum.calls.Load() != calls+1 {
		t.Fatalf("summarizer calls %d -> %d; the second compaction must build its summary to measure it", calls, sum.calls.Load())
	}
	// Before and after, summary included: the same summary replaces the
	// old one, so the session would not change size at all.
	var summaryTokens int
	for _, m := range msgs {
		if m.Kind == KindSummary {
			summaryTokens = m.Tokens
		}
	}
	if res.OriginalTokens != sumTokens(msgs) || res.CompactedTokens != res.OriginalTokens || res.RemovedTokens != summaryTokens {
		t.Fatalf("before %d (stored %d), after %d, removed %d (the old summary has %d tokens)",
			res.OriginalTokens, sumTokens(msgs), res.CompactedTokens, res.RemovedTokens, summaryTokens)
	}
	if want := fmt.Sprintf("no-op: compaction would not shrink the session (before %d, after %d tokens)", res.OriginalTokens, res.CompactedTokens); !strings.HasPrefix(res.Detail, want) {
		t.Fatalf("detail %q, want it to start with %q", res.Detail, want)
	}
	if after := counts(t, c.store); after != before {
		t.Fatalf("a no-op changed the store (a fork?): %v -> %v", before, after)
	}
	linAfter, err := c.Lineage(ctx, child)
	if err != nil || len(linAfter) != len(linBefore) || linAfter[len(linAfter)-1].Relation != "self" {
		t.Fatalf("lineage %+v -> %+v, %v: want no new child", linBefore, linAfter, err)
	}
	st, err := c.Status(ctx, child)
	if err != nil || st.NeedsCompaction || st.Reason != ReasonWouldNotShrink || st.Detail != res.Detail || st.Thrashing {
		t.Fatalf("status after the no-op: %+v, %v", st, err)
	}

	// Asked again with no new message: the same no-op, without paying for
	// another summary.
	again, err := c.Compact(ctx, child[:8], false)
	if err != nil || again.Reason != ReasonWouldNotShrink || again.Detail != res.Detail || sum.calls.Load() != calls+1 {
		t.Fatalf("third compaction: %+v, %v (summarizer calls %d)", again, err, sum.calls.Load())
	}
	// Forced: the summary is built again, and still not committed.
	forced, err := c.Compact(ctx, child, true)
	if err != nil || forced.Compacted || forced.Reason != ReasonWouldNotShrink || !forced.Forced || sum.calls.Load() != calls+2 {
		t.Fatalf("forced compaction: %+v, %v", forced, err)
	}
	if after := counts(t, c.store); after != before {
		t.Fatalf("a forced no-op changed the store: %v -> %v", before, after)
	}
	if rs := c.RunStats(); rs.Compacted != 1 || rs.Noops != 3 {
		t.Fatalf("run stats %+v: want 1 compacted, 3 no-ops", rs)
	}
}

// TestThrashingTripsOnNoopRuns: compactions that would not shrink the
// session are ineffective runs; two in a row trip the back-off, and the
// next automatic request skips with "thrashing" without a summary call.
func TestThrashingTripsOnNoopRuns(t *testing.T) {
	c, sum, child := compactedSession(t)
	ctx := context.Background()
	for i := 0; i < IneffectiveStreak; i++ {
		if thrash, err := c.Thrashing(ctx, child); err != nil || thrash {
			t.Fatalf("run %d: thrashing=%v, %v before the streak", i, thrash, err)
		}
		res, err := c.Compact(ctx, child, false)
		if err != nil || res.Compacted || res.Reason != ReasonWouldNotShrink {
			t.Fatalf("run %d: %+v, %v; want a would_not_shrink no-op", i, res, err)
		}
		// A new turn: the next request is a genuine new attempt.
		if _, err := c.AppendLines(ctx, child, jsonl(t, []Message{user("ok"), assistant("ok")})); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := c.store.RecentLineageRuns(ctx, child, IneffectiveStreak)
	if err != nil || len(runs) != IneffectiveStreak {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	for _, r := range runs {
		if r.SummaryID != "" || r.SessionID != child || !r.Ineffective() || r.SavedTokens != r.OriginalTokens-r.CompactedTokens {
			t.Fatalf("run %+v: want an ineffective no-op of the child, saved = before - after", r)
		}
	}
	st, err := c.Status(ctx, child)
	if err != nil || !st.Thrashing || !st.NeedsCompaction {
		t.Fatalf("status %+v, %v; want thrashing (and new messages to compact)", st, err)
	}
	before, calls := counts(t, c.store), sum.calls.Load()
	res, err := c.Compact(ctx, child, false)
	if err != nil || res.Compacted || res.Reason != ReasonThrashing || !strings.Contains(res.Detail, "force") {
		t.Fatalf("automatic compaction while thrashing: %+v, %v", res, err)
	}
	if counts(t, c.store) != before || sum.calls.Load() != calls {
		t.Fatal("a skipped compaction touched the store or the summarizer")
	}
	// Force still runs, and still cannot grow the session.
	res, err = c.Compact(ctx, child, true)
	if err != nil || sum.calls.Load() != calls+1 || (res.Compacted && res.SavedTokens < MinSavedTokens) || (!res.Compacted && res.Reason != ReasonWouldNotShrink) {
		t.Fatalf("forced compaction while thrashing: %+v, %v", res, err)
	}
}

// TestMigrationNetSavings opens a store written before net accounting:
// the gross figure moves to removed_tokens, saved_tokens becomes net of
// the summary (from the child's stored messages), and the compaction is in
// the run log the back-off reads.
func TestMigrationNetSavings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "compact.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := append([]string{`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`},
		migrations[0].stmts...)
	root, child := strings.Repeat("a", IDLen), strings.Repeat("b", IDLen)
	stmts = append(stmts,
		`INSERT INTO schema_migrations VALUES (1, 'initial', '2025-01-01T00:00:00Z')`,
		`INSERT INTO sessions(id, created_at) VALUES ('`+root+`', '2025-01-01T00:00:00Z')`,
		`INSERT INTO sessions(id, parent_session_id, created_at) VALUES ('`+child+`', '`+root+`', '2025-01-01T00:00:01Z')`,
		// The root: 400 tokens; head 50, middle 350. The child: head 50 +
		// summary 30 (compacted_messages 2), then a later message of 999.
		`INSERT INTO messages(session_id, seq, role, token_count) VALUES ('`+root+`', 1, 'user', 50), ('`+root+`', 2, 'assistant', 350)`,
		`INSERT INTO messages(session_id, seq, role, token_count) VALUES ('`+child+`', 1, 'user', 50), ('`+child+`', 2, 'assistant', 30), ('`+child+`', 3, 'user', 999)`,
		`INSERT INTO summaries(id, session_id, target_session_id, content, original_tokens, saved_tokens, original_messages, compacted_messages,
			source_last_seq, created_at) VALUES ('`+strings.Repeat("c", IDLen)+`', '`+root+`', '`+child+`', 's', 400, 350, 2, 2, 2, '2025-01-01T00:00:01Z')`,
	)
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	db.Close()
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	sm, err := s.SummaryInto(ctx, child)
	if err != nil || sm == nil || sm.RemovedTokens != 350 || sm.SavedTokens != 320 {
		t.Fatalf("migrated summary %+v, %v; want removed 350, saved 400 - 80 = 320", sm, err)
	}
	runs, err := s.RecentLineageRuns(ctx, child, 5)
	if err != nil || len(runs) != 1 || runs[0].SummaryID != sm.ID || runs[0].SavedTokens != 320 || runs[0].CompactedTokens != 80 || runs[0].SessionID != root {
		t.Fatalf("migrated runs %+v, %v", runs, err)
	}
}
