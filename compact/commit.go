package compact

// The compaction commit: everything one compaction writes, in a single
// transaction, so a failure, a panic or a killed process leaves the store
// as it was.

import (
	"context"
	"time"
)

// commitSpec is everything one compaction writes.
type commitSpec struct {
	Source  Session
	Head    []Message
	Summary Message // the summary message placed between head and tail
	Tail    []Message
	// SourceLastSeq is the last source seq the compaction read; source
	// messages appended after it (while the summarizer ran) are copied into
	// the child after the tail, so none is lost.
	SourceLastSeq int64
	Row           Summary // content, previous id, token and message counts, summarizer, forced
	// MaxPerOwner is the per-uid transcript cap the child counts against
	// (0: none; docs/DESIGN.md#compact-bounds).
	MaxPerOwner int
	// MaxOwnerBytes bounds the bytes of the transcripts the child's owner
	// owns, the child included (0: none).
	MaxOwnerBytes int64
}

// commitHook is called between the steps of a commit, inside the
// transaction (tests make it fail or panic, or kill the process, to prove
// the commit is atomic). A non-nil error aborts the commit.
type commitHook func(stage string) error

// commit writes one compaction in a single transaction: the child session
// (parent_session_id = source), the summary row linked to the previous
// summary, its compaction_runs entry, and the child's messages (head, summary, tail, then any source
// messages that arrived after SourceLastSeq). Either all of it is committed
// or nothing (a failure, a panic in the hook or a killed process rolls
// back). Returns the summary row as stored and the child session.
func (s *Store) commit(ctx context.Context, spec commitSpec, hook commitHook) (Summary, Session, error) {
	if hook == nil {
		hook = func(string) error { return nil }
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Summary{}, Session{}, err
	}
	defer tx.Rollback() // a no-op after Commit; runs on panic too
	src := spec.Source
	// The child belongs to the source's owner, whoever asked for the
	// compaction, and counts against that uid's cap.
	child := Session{ID: newID(), ParentID: src.ID, Model: src.Model, ContextWindow: src.ContextWindow, Tokenizer: src.Tokenizer,
		Title: src.Title, CreatedAt: time.Now().UTC(), Owner: src.Owner}
	var owner any
	if src.Owner != nil {
		owner = int64(*src.Owner)
		if err := checkOwnerCap(ctx, tx, *src.Owner, spec.MaxPerOwner); err != nil {
			return Summary{}, Session{}, err
		}
	}
	created := child.CreatedAt.Format(time.RFC3339Nano)
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions(id, parent_session_id, model, context_window, tokenizer, title, created_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		child.ID, child.ParentID, child.Model, child.ContextWindow, child.Tokenizer, child.Title, created, owner); err != nil {
		return Summary{}, Session{}, err
	}
	if err := hook("session"); err != nil {
		return Summary{}, Session{}, err
	}
	late, err := queryMessages(ctx, tx, src.ID, spec.SourceLastSeq)
	if err != nil {
		return Summary{}, Session{}, err
	}
	row := spec.Row
	row.ID, row.SessionID, row.TargetID, row.SourceLastSeq, row.CreatedAt = newID(), src.ID, child.ID, spec.SourceLastSeq, child.CreatedAt
	row.CompactedMessages = len(spec.Head) + 1 + len(spec.Tail) + len(late)
	var prev any
	if row.PreviousID != "" {
		prev = row.PreviousID
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO summaries(id, session_id, target_session_id, content, previous_summary_id, original_tokens, saved_tokens,
		removed_tokens, original_messages, compacted_messages, source_last_seq, summarizer, forced, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		row.ID, row.SessionID, row.TargetID, row.Content, prev, row.OriginalTokens, row.SavedTokens,
		row.RemovedTokens, row.OriginalMessages, row.CompactedMessages, row.SourceLastSeq, row.Summarizer, row.Forced, created); err != nil {
		return Summary{}, Session{}, err
	}
	if err := insertRun(ctx, tx, Run{SessionID: src.ID, SummaryID: row.ID, OriginalTokens: row.OriginalTokens,
		CompactedTokens: row.OriginalTokens - row.SavedTokens, RemovedTokens: row.RemovedTokens, SavedTokens: row.SavedTokens,
		SourceLastSeq: row.SourceLastSeq, Forced: row.Forced, CreatedAt: child.CreatedAt}); err != nil {
		return Summary{}, Session{}, err
	}
	if err := hook("summary"); err != nil {
		return Summary{}, Session{}, err
	}
	msgs := make([]Message, 0, row.CompactedMessages)
	msgs = append(msgs, spec.Head...)
	msgs = append(msgs, spec.Summary)
	msgs = append(msgs, spec.Tail...)
	msgs = append(msgs, late...)
	if add, err := messagesBytes(msgs); err != nil {
		return Summary{}, Session{}, err
	} else if err := checkOwnerBytes(ctx, tx, child.ID, add, spec.MaxOwnerBytes); err != nil {
		return Summary{}, Session{}, err
	}
	if err := insertMessages(ctx, tx, child.ID, 1, msgs); err != nil {
		return Summary{}, Session{}, err
	}
	if err := hook("messages"); err != nil {
		return Summary{}, Session{}, err
	}
	if err := tx.Commit(); err != nil {
		return Summary{}, Session{}, err
	}
	return row, child, nil
}
