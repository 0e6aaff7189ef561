package compact

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Anti-thrashing (docs/DESIGN.md#compact-backoff): when the
// IneffectiveStreak most recent compaction runs in a session's lineage each
// saved, net of their summary, less than IneffectiveSavingsPct of their
// original tokens, automatic compaction is skipped; a forced one still
// runs. The runs counted are those that built a summary, committed or not
// (Run): a no-op that would not have shrunk the session is ineffective.
const (
	IneffectiveSavingsPct = 0.10
	IneffectiveStreak     = 2
)

// MinSavedTokens is the least a compaction must save, net of its summary
// (tokens before minus tokens after, head + summary + tail), to commit.
// Below it the compaction is a ReasonWouldNotShrink no-op, forced or not:
// a child session that is no smaller, or a few tokens smaller, than its
// parent only costs a fork and a summary call, and compacting it again
// would do the same forever (docs/DESIGN.md#compact-net-savings). 50
// tokens is about one short turn; a useful compaction saves thousands.
const MinSavedTokens = 50

// No-op reasons of a Result (Result.Reason when Compacted is false).
const (
	// ReasonTooFewMessages: fewer messages than minimum_messages.
	ReasonTooFewMessages = "too_few_messages"
	// ReasonBelowThreshold: fewer tokens than the threshold; a summary
	// would cost more than it saves. Forced compaction passes the same gate.
	ReasonBelowThreshold = "below_threshold"
	// ReasonThrashing: the lineage's recent compactions were ineffective
	// (automatic compaction only).
	ReasonThrashing = "thrashing"
	// ReasonAlreadyCompacted: this session was already compacted and got no
	// message since; Result.TargetSessionID names the child to continue.
	ReasonAlreadyCompacted = "already_compacted"
	// ReasonNothingToSummarize: head and tail cover the whole transcript.
	ReasonNothingToSummarize = "nothing_to_summarize"
	// ReasonWouldNotShrink: the summary built is about as large as the
	// middle it would replace, so the compacted transcript would save less
	// than MinSavedTokens (or grow). Nothing is committed and no child is
	// forked; the run is logged (Run) and counts towards thrashing.
	// Until a new message arrives, an automatic request repeats this no-op
	// without building another summary; a forced one tries again, and
	// cannot commit a non-shrinking result either.
	ReasonWouldNotShrink = "would_not_shrink"
)

// Result is the outcome of one compaction request, as the result file
// shows it. Compacted is false for a no-op, with Reason and Detail set; a
// no-op never reports saved tokens (a fake "saved 0 tok" success would
// tell the harness a compaction happened).
type Result struct {
	Compacted bool   `json:"compacted"`
	Reason    string `json:"reason,omitempty"`
	// Detail says in words why a request was a no-op, with its figures
	// ("no-op: compaction would not shrink the session (before N, after M
	// tokens)").
	Detail string `json:"detail,omitempty"`
	Forced bool   `json:"forced"`
	// SourceSessionID is the full id of the session compacted (the
	// resolved id, whatever prefix was asked for).
	SourceSessionID string `json:"source_session_id"`
	// TargetSessionID is the child session (head + summary + tail).
	TargetSessionID   string `json:"target_session_id,omitempty"`
	OriginalMessages  int    `json:"original_messages"`
	CompactedMessages int    `json:"compacted_messages,omitempty"`
	OriginalTokens    int    `json:"original_tokens"`
	// CompactedTokens is the child session's total. For a
	// ReasonWouldNotShrink no-op it is what the compacted transcript would
	// have held.
	CompactedTokens int `json:"compacted_tokens,omitempty"`
	// SavedTokens is net of the summary: OriginalTokens minus the tokens of
	// head + summary + tail as stored in the child, counted with the
	// tokenizer the threshold uses. Messages that arrived while the summary
	// was built are copied into the child and counted on neither side, so
	// SavedTokens = OriginalTokens - CompactedTokens unless some did.
	SavedTokens int `json:"saved_tokens"`
	// RemovedTokens is gross: the middle that left the transcript, before
	// the summary was added back. Also set for a ReasonWouldNotShrink no-op.
	RemovedTokens     int       `json:"removed_tokens,omitempty"`
	ThresholdTokens   int       `json:"threshold_tokens"`
	SummaryID         string    `json:"summary_id,omitempty"`
	PreviousSummaryID string    `json:"previous_summary_id,omitempty"`
	Summarizer        string    `json:"summarizer,omitempty"`
	DurationMS        float64   `json:"duration_ms"`
	Time              time.Time `json:"time"`
	// Error is set (by the control files) when the request failed; the
	// store is then unchanged.
	Error string `json:"error,omitempty"`
}

// FlushFunc is the hook run before a compaction splits the transcript, the
// last moment the whole transcript exists: a harness may persist memory
// derived from the session. It runs only once the request has passed the no-op gates that
// need no summary, with the resolved id (a ReasonNothingToSummarize or
// ReasonWouldNotShrink no-op is found after it). An error aborts the compaction, store
// unchanged.
type FlushFunc func(ctx context.Context, sessionID string) error

// Option configures a Compressor.
type Option func(*Compressor)

// WithSummarizer replaces the backend built from Config.Summarizer.
func WithSummarizer(s Summarizer) Option { return func(c *Compressor) { c.sum = s } }

// WithFlush sets the flush hook (default: none, which flushes nothing).
func WithFlush(f FlushFunc) Option { return func(c *Compressor) { c.flush = f } }

// Compressor compacts sessions of a Store (docs/DESIGN.md#compactor). Safe
// for concurrent use: compactions of one
// session are serialised; different sessions compact in parallel.
type Compressor struct {
	store *Store
	cfg   Config
	sum   Summarizer
	flush FlushFunc
	hook  commitHook // tests only: called inside the commit transaction
	win   window     // the summarizer's view of the middle (defaultWindow)
	locks sync.Map   // session id -> *sync.Mutex

	// runs, compacted, noops and failures count Compact's outcomes
	// (RunStats), for .rubino/metrics.
	runs, compacted, noops, failures atomic.Uint64
}

// RunStats count Compact calls since the compressor was built: every call
// (Runs) ends compacted, as a no-op (a Reason), or failed (an error). Each
// is monotonic. Safe for concurrent use.
type RunStats struct {
	Runs, Compacted, Noops, Failures uint64
}

// RunStats returns the counters.
func (c *Compressor) RunStats() RunStats {
	return RunStats{Runs: c.runs.Load(), Compacted: c.compacted.Load(), Noops: c.noops.Load(), Failures: c.failures.Load()}
}

// NewCompressor returns a compressor over store with cfg (defaults filled
// and validated; the summarizer built from cfg.Summarizer unless an option
// replaces it).
func NewCompressor(store *Store, cfg Config, opts ...Option) (*Compressor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Compressor{store: store, cfg: cfg, win: defaultWindow}
	for _, o := range opts {
		o(c)
	}
	if c.sum == nil {
		s, err := NewSummarizer(cfg.Summarizer)
		if err != nil {
			return nil, err
		}
		c.sum = s
	}
	if c.flush == nil {
		c.flush = func(context.Context, string) error { return nil }
	}
	return c, nil
}

// Config returns the effective config.
func (c *Compressor) Config() Config { return c.cfg }

// Store returns the store.
func (c *Compressor) Store() *Store { return c.store }

// Summarizer returns the backend in use.
func (c *Compressor) Summarizer() Summarizer { return c.sum }

func (c *Compressor) lock(id string) *sync.Mutex {
	mu, _ := c.locks.LoadOrStore(id, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// Budget is a session's token budget: its window, the threshold at which
// it needs compaction, and the tail's share. All counts are tokens.
type Budget struct {
	Model           string  `json:"model"`
	Tokenizer       string  `json:"tokenizer"`
	ContextWindow   int     `json:"context_window"`
	Threshold       float64 `json:"threshold"`
	ThresholdTokens int     `json:"threshold_tokens"`
	TailTokens      int     `json:"tail_tokens"`
}

// model returns the session's model, else the config's.
func (c *Compressor) model(sess Session) string {
	if sess.Model != "" {
		return sess.Model
	}
	return c.cfg.Model
}

// Tokenizer returns the tokenizer of sess: its own choice, else the
// config's, else by model (the session's, else the config's). When a BPE
// cannot be loaded it returns the chars/4 fallback, whose Name says so.
func (c *Compressor) Tokenizer(sess Session) Tokenizer {
	name := sess.Tokenizer
	if name == "" {
		name = c.cfg.Tokenizer
	}
	tk, _ := NewTokenizer(name, c.model(sess))
	if tk == nil { // unknown name in an old row: the explicit fallback
		tk = chars4Tokenizer{reason: fmt.Sprintf("unknown tokenizer %q", name)}
	}
	return tk
}

// BudgetOf returns the budget of sess: its context window (or the
// config's) times the threshold.
func (c *Compressor) BudgetOf(sess Session) Budget {
	w := sess.ContextWindow
	if w == 0 {
		w = c.cfg.ContextWindow
	}
	th := int(float64(w) * c.cfg.Threshold)
	return Budget{Model: c.model(sess), Tokenizer: c.Tokenizer(sess).Name(), ContextWindow: w, Threshold: c.cfg.Threshold,
		ThresholdTokens: th, TailTokens: int(float64(th) * c.cfg.TailRatio)}
}

// Status is what a session's status file shows.
type Status struct {
	SessionID       string `json:"session_id"`
	ShortID         string `json:"short_id"`
	ParentSessionID string `json:"parent_session_id,omitempty"`
	Budget
	Messages        int  `json:"messages"`
	Tokens          int  `json:"tokens"`
	MinimumMessages int  `json:"minimum_messages"`
	NeedsCompaction bool `json:"needs_compaction"`
	// Reason and Detail say why NeedsCompaction is false although Tokens
	// reach the threshold: ReasonAlreadyCompacted, or ReasonWouldNotShrink
	// (the last run found that compaction would not shrink the session and
	// no message arrived since).
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Thrashing is true when automatic compaction would be skipped.
	Thrashing bool `json:"thrashing"`
	// CompactedInto lists the children compacted from this session, oldest
	// first.
	CompactedInto []string  `json:"compacted_into,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// Status reports a session (id or unique prefix). NeedsCompaction is true
// when Compact would not stop at a gate: at least minimum_messages messages,
// at least the threshold in tokens, not already compacted without new
// messages since, and not found by its last run to be a session compaction
// would not shrink, without new messages since (thrashing is reported
// separately).
func (c *Compressor) Status(ctx context.Context, idOrPrefix string) (Status, error) {
	id, err := c.store.Resolve(ctx, idOrPrefix)
	if err != nil {
		return Status{}, err
	}
	sess, err := c.store.Session(ctx, id)
	if err != nil {
		return Status{}, err
	}
	st, err := c.store.Stats(ctx, id)
	if err != nil {
		return Status{}, err
	}
	thrash, err := c.Thrashing(ctx, id)
	if err != nil {
		return Status{}, err
	}
	kids, err := c.store.SummariesFrom(ctx, id)
	if err != nil {
		return Status{}, err
	}
	b := c.BudgetOf(sess)
	s := Status{SessionID: id, ShortID: id[:ShortIDLen], ParentSessionID: sess.ParentID, Budget: b,
		Messages: st.Messages, Tokens: st.Tokens, MinimumMessages: c.cfg.MinimumMessages,
		NeedsCompaction: st.Messages >= c.cfg.MinimumMessages && st.Tokens >= b.ThresholdTokens,
		Thrashing:       thrash, CreatedAt: sess.CreatedAt}
	for _, k := range kids {
		s.CompactedInto = append(s.CompactedInto, k.TargetID)
	}
	if !s.NeedsCompaction {
		return s, nil
	}
	if n := len(kids); n > 0 && kids[n-1].SourceLastSeq >= st.LastSeq {
		// Already compacted: continue in the child.
		s.NeedsCompaction, s.Reason, s.Detail = false, ReasonAlreadyCompacted, alreadyCompactedDetail(kids[n-1].TargetID)
		return s, nil
	}
	last, err := c.store.LastRun(ctx, id)
	if err != nil {
		return Status{}, err
	}
	if staleNoop(last, st.LastSeq) {
		s.NeedsCompaction, s.Reason, s.Detail = false, ReasonWouldNotShrink, wouldNotShrinkDetail(*last)
	}
	return s, nil
}

// staleNoop reports whether run is a no-op (it would not shrink the
// session) taken with the session's last message at lastSeq or later:
// building the same summary again would end the same way.
func staleNoop(run *Run, lastSeq int64) bool {
	return run != nil && run.SummaryID == "" && run.SourceLastSeq >= lastSeq
}

func wouldNotShrinkDetail(r Run) string {
	return fmt.Sprintf("no-op: compaction would not shrink the session (before %d, after %d tokens): the summary is about as large as the %d-token middle it would replace, and a compaction must save at least %d",
		r.OriginalTokens, r.CompactedTokens, r.RemovedTokens, MinSavedTokens)
}

func alreadyCompactedDetail(child string) string {
	return fmt.Sprintf("no-op: already compacted into %s with no message since; continue there", child)
}

// Thrashing reports whether automatic compaction of session id (full id)
// should be skipped: its lineage's IneffectiveStreak most recent
// compaction runs (committed or not, Run) each saved, net of their
// summary, less than IneffectiveSavingsPct of their original tokens: the
// anti-thrashing back-off (IneffectiveStreak).
func (c *Compressor) Thrashing(ctx context.Context, id string) (bool, error) {
	rows, err := c.store.RecentLineageRuns(ctx, id, IneffectiveStreak)
	if err != nil {
		return false, err
	}
	if len(rows) < IneffectiveStreak {
		return false, nil
	}
	for _, r := range rows {
		if !r.Ineffective() {
			return false, nil
		}
	}
	return true, nil
}

// Compact compacts session idOrPrefix (docs/DESIGN.md#compactor). The id is
// resolved to the full id before anything else. Steps: the no-op gates
// (too_few_messages, below_threshold, already_compacted, and unless force
// thrashing, then would_not_shrink when the last run found so and no
// message arrived since), the flush hook, the head/middle/tail split, the
// tool-pair sanitiser on the middle, the LLM-free pre-pass, the summary
// built on the previous one, the savings measured net (tokens before minus
// head + summary + tail), and one transaction creating the summary row,
// its run and the child session. A compaction saving less than
// MinSavedTokens net is a would_not_shrink no-op instead: its run is
// logged, nothing else is written. force skips only the two gates above
// that it names: a manual compaction below the threshold is the same no-op
// as an automatic one, and a forced compaction never commits a transcript
// that does not shrink.
//
// A no-op returns a Result with Compacted false and Reason set, and a nil
// error. Errors (the store untouched): ErrNotFound, ErrAmbiguous, ErrBadID
// from the resolution; the flush hook's or the summarizer's error
// (ErrSummarizerTimeout for a timeout); a database error.
func (c *Compressor) Compact(ctx context.Context, idOrPrefix string, force bool) (Result, error) {
	start := time.Now()
	res := Result{Forced: force, Time: start.UTC()}
	done := func(r Result, err error) (Result, error) {
		r.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		switch c.runs.Add(1); {
		case err != nil:
			c.failures.Add(1)
		case r.Compacted:
			c.compacted.Add(1)
		default:
			c.noops.Add(1)
		}
		return r, err
	}
	// Resolve a short id to the full id before any message lookup, and pin
	// every lookup below to it (docs/DESIGN.md#compact-short-ids).
	id, err := c.store.Resolve(ctx, idOrPrefix)
	if err != nil {
		return done(res, err)
	}
	res.SourceSessionID = id
	mu := c.lock(id)
	mu.Lock()
	defer mu.Unlock()
	sess, err := c.store.Session(ctx, id)
	if err != nil {
		return done(res, err)
	}
	// Bounded memory (docs/DESIGN.md#compact-bounds): the gates and the
	// split read the transcript without its contents; the head and the
	// tail are read in full below, the middle as a bounded window.
	ms, err := c.store.messageMetas(ctx, id)
	if err != nil {
		return done(res, err)
	}
	b := c.BudgetOf(sess)
	nmsgs := len(ms.m)
	res.OriginalMessages, res.OriginalTokens, res.ThresholdTokens = nmsgs, ms.tokens(0, nmsgs), b.ThresholdTokens
	if nmsgs < c.cfg.MinimumMessages {
		res.Reason = ReasonTooFewMessages
		res.Detail = fmt.Sprintf("no-op: %d messages, fewer than minimum_messages (%d)", nmsgs, c.cfg.MinimumMessages)
		return done(res, nil)
	}
	// Below the threshold a summary costs more than it saves; the manual
	// path clears the same gate (no inflation, no fork).
	if res.OriginalTokens < b.ThresholdTokens {
		res.Reason = ReasonBelowThreshold
		res.Detail = fmt.Sprintf("no-op: %d tokens, below the threshold of %d tokens", res.OriginalTokens, b.ThresholdTokens)
		return done(res, nil)
	}
	lastSeq := ms.m[nmsgs-1].seq
	prior, err := c.store.SummariesFrom(ctx, id)
	if err != nil {
		return done(res, err)
	}
	if n := len(prior); n > 0 && prior[n-1].SourceLastSeq >= lastSeq {
		res.Reason, res.TargetSessionID = ReasonAlreadyCompacted, prior[n-1].TargetID
		res.Detail = alreadyCompactedDetail(prior[n-1].TargetID)
		return done(res, nil)
	}
	if !force {
		thrash, err := c.Thrashing(ctx, id)
		if err != nil {
			return done(res, err)
		}
		if thrash {
			res.Reason = ReasonThrashing
			res.Detail = fmt.Sprintf("no-op: the last %d compactions in this lineage each saved under %.0f%% of their tokens net of the summary; force runs anyway",
				IneffectiveStreak, 100*IneffectiveSavingsPct)
			return done(res, nil)
		}
		last, err := c.store.LastRun(ctx, id)
		if err != nil {
			return done(res, err)
		}
		if staleNoop(last, lastSeq) {
			res.Reason, res.Detail = ReasonWouldNotShrink, wouldNotShrinkDetail(*last)
			res.CompactedTokens, res.RemovedTokens = last.CompactedTokens, last.RemovedTokens
			return done(res, nil)
		}
	}

	// 1. Flush memory before compaction.
	if err := c.flush(ctx, id); err != nil {
		return done(res, fmt.Errorf("flush hook: %w", err))
	}

	// 2. Split into head / middle / tail.
	// The cuts SplitMessages would make, from the metadata.
	h, t := ms.split(c.cfg.HeadMessages, b.TailTokens)
	if h == t {
		res.Reason = ReasonNothingToSummarize
		res.Detail = "no-op: the head and the tail cover the whole transcript"
		return done(res, nil)
	}
	tk := c.Tokenizer(sess)
	// removed_tokens (gross) is what leaves the stored transcript: the
	// middle as stored (the sanitised, pruned window feeds only the
	// summarizer).
	removed := ms.tokens(h, t)
	first, middleFirst, middleLast := ms.m[0].seq, ms.m[h].seq, ms.m[t-1].seq
	tailFirst := lastSeq + 1
	if t < nmsgs {
		tailFirst = ms.m[t].seq
	}
	ms = nil // the metadata is not needed past here: let the GC have it
	head, err := c.store.messagesBetween(ctx, id, first, middleFirst-1)
	if err != nil {
		return done(res, err)
	}
	tail, err := c.store.messagesBetween(ctx, id, tailFirst, lastSeq)
	if err != nil {
		return done(res, err)
	}
	if len(head) != h || len(tail) != nmsgs-t {
		return done(res, fmt.Errorf("session %s changed under its compaction lock", id))
	}
	split := Split{Head: head, Tail: tail, HeadEnd: h, TailStart: t}
	middle, _, err := c.store.middleWindow(ctx, id, middleFirst, middleLast, c.win)
	if err != nil {
		return done(res, err)
	}

	// 3. Sanitise tool pairs in the middle.
	if *c.cfg.PreserveToolPairs {
		middle = SanitizeToolPairs(middle, tk)
	}

	// 3b. The LLM-free pre-pass: dedupe and stub old tool outputs.
	middle = PruneToolResults(middle, tk, c.cfg.PruneMinTokens, c.cfg.PruneKeepRecent)
	input := middle[:0:0]
	for _, m := range middle {
		if m.Kind != KindSummary {
			input = append(input, m)
		}
	}

	// 4. The previous summary (its id captured before the insert below).
	prev, err := c.store.PreviousSummary(ctx, id)
	if err != nil {
		return done(res, err)
	}
	req := SummaryRequest{SessionID: id, Model: c.model(sess), Head: split.Head, Messages: input, MaxTokens: c.cfg.MaxSummaryTokens, Tokenizer: tk}
	if prev != nil {
		req.Previous = prev.Content
		res.PreviousSummaryID = prev.ID
	}

	// 5. The new summary.
	res.Summarizer = c.sum.Name()
	text, err := c.sum.Summarize(ctx, req)
	if err == nil && text == "" {
		err = errors.New("summarizer returned an empty summary")
	}
	if err != nil {
		return done(res, err)
	}

	// 6-8. The irreversible part, in one transaction.
	role := RoleUser
	if len(split.Head) > 0 && split.Head[len(split.Head)-1].Role == RoleUser {
		role = RoleAssistant
	}
	sm := Message{Role: role, Content: SummaryMessageContent(text), Kind: KindSummary}
	sm.Tokens = MessageTokens(tk, &sm)

	// Savings are net: the transcript as it would be stored (head + summary
	// + tail), counted as the threshold counts, against the one read. A
	// result that does not shrink the session is never committed, forced
	// or not: the child would need compacting again at once, forever.
	after := sumTokens(split.Head) + sm.Tokens + sumTokens(split.Tail)
	saved := res.OriginalTokens - after
	if saved < MinSavedTokens {
		run := Run{SessionID: id, OriginalTokens: res.OriginalTokens, CompactedTokens: after, RemovedTokens: removed,
			SavedTokens: saved, SourceLastSeq: lastSeq, Forced: force, CreatedAt: time.Now()}
		if err := c.store.recordNoopRun(ctx, run); err != nil {
			return done(res, err)
		}
		res.Reason, res.Detail = ReasonWouldNotShrink, wouldNotShrinkDetail(run)
		res.CompactedTokens, res.RemovedTokens = after, removed
		return done(res, nil)
	}
	row, child, err := c.store.commit(ctx, commitSpec{
		Source: sess, Head: split.Head, Summary: sm, Tail: split.Tail, SourceLastSeq: lastSeq,
		Row: Summary{Content: text, PreviousID: res.PreviousSummaryID, OriginalTokens: res.OriginalTokens, SavedTokens: saved,
			RemovedTokens: removed, OriginalMessages: res.OriginalMessages, Summarizer: c.sum.Name(), Forced: force},
		MaxPerOwner: c.cfg.MaxTranscriptsPerUID, MaxOwnerBytes: c.cfg.MaxBytesPerUID,
	}, c.hook)
	if err != nil {
		return done(res, fmt.Errorf("commit: %w", err))
	}
	st, err := c.store.Stats(ctx, child.ID)
	if err != nil {
		return done(res, err)
	}
	res.Compacted = true
	res.TargetSessionID = child.ID
	res.CompactedMessages = row.CompactedMessages
	res.CompactedTokens = st.Tokens
	res.SavedTokens, res.RemovedTokens = saved, removed
	res.SummaryID = row.ID
	return done(res, nil)
}
