package compact

// A session's transcript as the control files feed and show it: appending
// a batch of JSON lines, and the lineage from the root session down to the
// sessions compacted from this one.

import (
	"context"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// AppendLines parses data as JSON lines and appends them to session id
// (exact id), all or nothing (see ParseMessageLines,
// Store.AppendMessagesCapped): ErrTooLarge when the transcript would exceed
// Config.MaxTranscriptBytes, or its owner's transcripts together
// Config.MaxBytesPerUID.
// It returns the number of messages stored.
func (c *Compressor) AppendLines(ctx context.Context, id string, data []byte) (int, error) {
	sess, err := c.store.Session(ctx, id)
	if err != nil {
		return 0, err
	}
	msgs, err := ParseMessageLines(data, c.Tokenizer(sess))
	if err != nil {
		return 0, ctltree.Errorf(syscall.EINVAL, "%v", err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	_, err = c.store.AppendMessagesCapped(ctx, id, msgs, c.cfg.MaxTranscriptBytes, c.cfg.MaxBytesPerUID)
	return len(msgs), err
}

// LineageEntry is one line of a session's lineage file.
type LineageEntry struct {
	SessionID       string `json:"session_id"`
	ParentSessionID string `json:"parent_session_id,omitempty"`
	// Relation is "ancestor", "self" or "child" (compacted from self).
	Relation string `json:"relation"`
	Depth    int    `json:"depth"` // 0 for the root
	// The compaction that created this session (absent for a root).
	// SavedTokens and SavedRatio are net of the summary (Summary.SavedTokens
	// over OriginalTokens); RemovedTokens is the middle removed (gross).
	SummaryID      string    `json:"summary_id,omitempty"`
	OriginalTokens int       `json:"original_tokens,omitempty"`
	SavedTokens    int       `json:"saved_tokens,omitempty"`
	RemovedTokens  int       `json:"removed_tokens,omitempty"`
	SavedRatio     float64   `json:"saved_ratio,omitempty"`
	Forced         bool      `json:"forced,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// Lineage returns session id's lineage: the root first, down to id, then
// the sessions compacted from id.
func (c *Compressor) Lineage(ctx context.Context, id string) ([]LineageEntry, error) {
	anc, err := c.store.Ancestors(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []LineageEntry
	entry := func(sess Session, rel string, depth int) (LineageEntry, error) {
		e := LineageEntry{SessionID: sess.ID, ParentSessionID: sess.ParentID, Relation: rel, Depth: depth, CreatedAt: sess.CreatedAt}
		sm, err := c.store.SummaryInto(ctx, sess.ID)
		if err != nil {
			return e, err
		}
		if sm != nil {
			e.SummaryID, e.OriginalTokens, e.SavedTokens, e.RemovedTokens, e.Forced = sm.ID, sm.OriginalTokens, sm.SavedTokens, sm.RemovedTokens, sm.Forced
			if sm.OriginalTokens > 0 {
				e.SavedRatio = float64(sm.SavedTokens) / float64(sm.OriginalTokens)
			}
		}
		return e, nil
	}
	for i := len(anc) - 1; i >= 0; i-- {
		rel := "ancestor"
		if i == 0 {
			rel = "self"
		}
		e, err := entry(anc[i], rel, len(anc)-1-i)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	kids, err := c.store.SummariesFrom(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, k := range kids {
		sess, err := c.store.Session(ctx, k.TargetID)
		if err != nil {
			return nil, err
		}
		e, err := entry(sess, "child", len(anc))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
