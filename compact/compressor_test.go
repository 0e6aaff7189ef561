package compact

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestCompactBelowThresholdIsNoOp(t *testing.T) {
	sum := &fixedSummarizer{text: "## Goal\n- g"}
	flushes := 0
	// Default config: 128,000-token window, threshold 64,000.
	c := newTestCompressor(t, Config{}, WithSummarizer(sum), WithFlush(func(context.Context, string) error { flushes++; return nil }))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rng, 60))
	before := counts(t, c.store)
	for _, force := range []bool{false, true} {
		res, err := c.Compact(ctx, id, force)
		if err != nil {
			t.Fatal(err)
		}
		if res.Compacted || res.Reason != ReasonBelowThreshold || res.SavedTokens != 0 || res.TargetSessionID != "" || res.ThresholdTokens != 64000 {
			t.Fatalf("force=%v: %+v, want a below_threshold no-op against 64000 tokens", force, res)
		}
		if res.OriginalTokens <= 0 || res.OriginalTokens >= 64000 || res.OriginalMessages < 60 {
			t.Fatalf("force=%v: counts %+v", force, res)
		}
	}
	if after := counts(t, c.store); after != before {
		t.Fatalf("a no-op changed the store (a fork?): %v -> %v", before, after)
	}
	if sum.calls.Load() != 0 || flushes != 0 {
		t.Fatalf("a no-op called the summarizer %d times, the flush hook %d times", sum.calls.Load(), flushes)
	}
	st, err := c.Status(ctx, id)
	if err != nil || st.NeedsCompaction || st.ThresholdTokens != 64000 || st.ContextWindow != DefaultContextWindow {
		t.Fatalf("status %+v, %v", st, err)
	}
}

func TestCompactTooFewMessages(t *testing.T) {
	c := newTestCompressor(t, smallConfig())
	big := strings.Repeat("word ", 2000)
	id := newSessionWith(t, c, SessionOptions{}, []Message{system(big), user(big), assistant(big)})
	res, err := c.Compact(context.Background(), id, true)
	if err != nil || res.Compacted || res.Reason != ReasonTooFewMessages {
		t.Fatalf("%+v, %v; want too_few_messages", res, err)
	}
}

func TestCompactHappyPath(t *testing.T) {
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	sum := &orderedSummarizer{note: note}
	c := newTestCompressor(t, smallConfig(), WithSummarizer(sum), WithFlush(func(_ context.Context, id string) error {
		note("flush " + id)
		return nil
	}))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2, 2))
	src := genConversation(rng, 80)
	id := newSessionWith(t, c, SessionOptions{Model: "gpt-4o", Title: "t"}, src)
	st, err := c.Status(ctx, id)
	if err != nil || !st.NeedsCompaction || st.Tokenizer != TokenizerO200K || st.ThresholdTokens != 1000 {
		t.Fatalf("status before: %+v, %v", st, err)
	}
	res, err := c.Compact(ctx, id, false)
	if err != nil || !res.Compacted {
		t.Fatalf("%+v, %v", res, err)
	}
	if strings.Join(order, ",") != "flush "+id+",summarize" {
		t.Fatalf("order %v: want the flush hook before the summary", order)
	}
	stored, _ := c.store.Messages(ctx, id, 0)
	sess, _ := c.store.Session(ctx, id)
	split := SplitMessages(stored, 3, c.BudgetOf(sess).TailTokens)
	if want := sumTokens(split.Middle); res.RemovedTokens != want || want == 0 {
		t.Fatalf("removed %d tokens, want the stored middle's %d", res.RemovedTokens, want)
	}
	if res.SourceSessionID != id || res.OriginalMessages != len(src) || res.OriginalTokens != sumTokens(stored) || res.Summarizer != "ordered" {
		t.Fatalf("result %+v", res)
	}
	child, err := c.store.Session(ctx, res.TargetSessionID)
	if err != nil || child.ParentID != id || child.Model != "gpt-4o" {
		t.Fatalf("child %+v, %v", child, err)
	}
	msgs, _ := c.store.Messages(ctx, child.ID, 0)
	if len(msgs) != res.CompactedMessages || res.CompactedMessages != len(split.Head)+1+len(split.Tail) {
		t.Fatalf("child has %d messages, result says %d, head %d tail %d", len(msgs), res.CompactedMessages, len(split.Head), len(split.Tail))
	}
	if res.CompactedTokens != sumTokens(msgs) || res.CompactedTokens >= res.OriginalTokens {
		t.Fatalf("compacted tokens %d (child %d, original %d)", res.CompactedTokens, sumTokens(msgs), res.OriginalTokens)
	}
	// Savings are net of the summary: before minus the child as stored,
	// which is the middle removed minus the summary message added back.
	if res.SavedTokens != res.OriginalTokens-sumTokens(msgs) || res.SavedTokens != res.RemovedTokens-msgs[len(split.Head)].Tokens {
		t.Fatalf("saved %d tokens; want before %d - after %d = removed %d - summary %d", res.SavedTokens, res.OriginalTokens, sumTokens(msgs),
			res.RemovedTokens, msgs[len(split.Head)].Tokens)
	}
	for i := range split.Head {
		if msgs[i].Content != split.Head[i].Content || msgs[i].Role != split.Head[i].Role {
			t.Fatalf("head message %d changed", i)
		}
	}
	sm := msgs[len(split.Head)]
	if sm.Kind != KindSummary || !strings.HasPrefix(sm.Content, ReferenceNotice) || !strings.Contains(sm.Content, "## Goal") {
		t.Fatalf("summary message: %+v", sm)
	}
	for i, m := range split.Tail {
		got := msgs[len(split.Head)+1+i]
		if got.Content != m.Content || got.ToolCallID != m.ToolCallID || len(got.ToolCalls) != len(m.ToolCalls) {
			t.Fatalf("tail message %d changed", i)
		}
	}
	row, err := c.store.SummaryInto(ctx, child.ID)
	if err != nil || row == nil || row.ID != res.SummaryID || row.SessionID != id || row.PreviousID != "" || row.SavedTokens != res.SavedTokens ||
		row.RemovedTokens != res.RemovedTokens {
		t.Fatalf("summary row %+v, %v", row, err)
	}
	// The source is now superseded: compacting it again is a no-op that
	// points at the child, and its status says where it went.
	again, err := c.Compact(ctx, id[:8], true)
	if err != nil || again.Compacted || again.Reason != ReasonAlreadyCompacted || again.TargetSessionID != child.ID {
		t.Fatalf("second compaction: %+v, %v", again, err)
	}
	st, _ = c.Status(ctx, id)
	if len(st.CompactedInto) != 1 || st.CompactedInto[0] != child.ID || st.NeedsCompaction {
		t.Fatalf("status after: %+v", st)
	}
}

type orderedSummarizer struct{ note func(string) }

func (o *orderedSummarizer) Name() string { return "ordered" }
func (o *orderedSummarizer) Summarize(ctx context.Context, req SummaryRequest) (string, error) {
	o.note("summarize")
	return BuiltinSummarizer{}.Summarize(ctx, req)
}

// TestCompactResolvesPrefix: a short id must reach the
// session's messages, never a zero-message no-op reported as "saved 0".
func TestCompactResolvesPrefix(t *testing.T) {
	c := newTestCompressor(t, smallConfig())
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(3, 3)), 60))
	res, err := c.Compact(ctx, id[:8], false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Compacted || res.SourceSessionID != id || res.SavedTokens <= 0 || res.OriginalMessages < 60 {
		t.Fatalf("compaction by prefix: %+v", res)
	}
	for _, tc := range []struct {
		in   string
		want error
	}{
		{strings.Repeat("f", 8), ErrNotFound},
		{"xyz!", ErrBadID},
		{"ab", ErrBadID},
	} {
		if tc.in == id[:8] {
			continue
		}
		res, err := c.Compact(ctx, tc.in, false)
		if !errors.Is(err, tc.want) || res.Compacted || res.SavedTokens != 0 || res.Reason != "" {
			t.Errorf("Compact(%q) = %+v, %v; want the error %v and no result", tc.in, res, err, tc.want)
		}
	}
	// Two sessions sharing a prefix: ambiguous, not the first match.
	other := newSessionWith(t, c, SessionOptions{}, nil)
	if _, err := c.store.db.ExecContext(ctx, `UPDATE sessions SET id = ? WHERE id = ?`, id[:8]+strings.Repeat("0", 24), other); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, id[:8], false); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if _, err := c.Status(ctx, id[:8]); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ambiguous prefix status: %v", err)
	}
}

func TestIterativeSummaryAndLineage(t *testing.T) {
	sum := &fixedSummarizer{text: "## Goal\n- first"}
	c := newTestCompressor(t, smallConfig(), WithSummarizer(sum))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(4, 4))
	root := newSessionWith(t, c, SessionOptions{}, genConversation(rng, 60))
	r1, err := c.Compact(ctx, root, false)
	if err != nil || !r1.Compacted {
		t.Fatalf("%+v, %v", r1, err)
	}
	if sum.last.Load().Previous != "" || len(sum.last.Load().Head) < 3 {
		t.Fatalf("first summary request: previous %q head %d", sum.last.Load().Previous, len(sum.last.Load().Head))
	}
	for _, m := range sum.last.Load().Messages {
		if m.Kind == KindSummary {
			t.Fatal("a summary message reached the summarizer as a turn")
		}
	}
	if _, err := c.AppendLines(ctx, r1.TargetSessionID, jsonl(t, genConversation(rng, 60))); err != nil {
		t.Fatal(err)
	}
	sum.text = "## Goal\n- second"
	r2, err := c.Compact(ctx, r1.TargetSessionID[:6], false)
	if err != nil || !r2.Compacted {
		t.Fatalf("%+v, %v", r2, err)
	}
	if got := sum.last.Load().Previous; got != "## Goal\n- first" {
		t.Fatalf("second summary built on %q, want the first summary", got)
	}
	if r2.PreviousSummaryID != r1.SummaryID {
		t.Fatalf("previous summary id %q, want %q", r2.PreviousSummaryID, r1.SummaryID)
	}
	row, _ := c.store.SummaryInto(ctx, r2.TargetSessionID)
	if row.PreviousID != r1.SummaryID {
		t.Fatalf("stored previous_summary_id %q, want %q", row.PreviousID, r1.SummaryID)
	}
	lin, err := c.Lineage(ctx, r1.TargetSessionID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range lin {
		got = append(got, fmt.Sprintf("%s:%s:%d", e.SessionID[:4], e.Relation, e.Depth))
	}
	want := []string{root[:4] + ":ancestor:0", r1.TargetSessionID[:4] + ":self:1", r2.TargetSessionID[:4] + ":child:2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("lineage %v, want %v", got, want)
	}
	if lin[1].SummaryID != r1.SummaryID || lin[1].SavedRatio <= 0 {
		t.Fatalf("lineage entry %+v", lin[1])
	}
	if sm, _ := c.store.LatestSummary(ctx, r1.TargetSessionID); sm.ID != r2.SummaryID {
		t.Fatalf("latest summary of the middle session: %s, want %s", sm.ID, r2.SummaryID)
	}
}

// TestThrashingSkipVsForce builds a lineage whose compactions each save
// under 10% (a huge system prompt in the head dominates), then checks that
// automatic compaction is skipped and a forced one runs.
func TestThrashingSkipVsForce(t *testing.T) {
	sum := &fixedSummarizer{text: "## Goal\n- g"}
	c := newTestCompressor(t, Config{ContextWindow: 2000, MinimumMessages: 6, HeadMessages: 3, TailRatio: 0.1}, WithSummarizer(sum))
	ctx := context.Background()
	turns := func(n int) []Message {
		var out []Message
		for i := 0; i < n; i++ {
			out = append(out, user(fmt.Sprintf("step %d: edit the parser, then rerun the whole test suite", i)),
				assistant(fmt.Sprintf("done %d: the parser is edited and the whole suite passes", i)))
		}
		return out
	}
	head := []Message{system(strings.Repeat("rule ", 3000)), user("build it"), assistant("ok")}
	id := newSessionWith(t, c, SessionOptions{}, append(head, turns(10)...))
	for i := 0; i < IneffectiveStreak; i++ {
		thrash, err := c.Thrashing(ctx, id)
		if err != nil || thrash {
			t.Fatalf("compaction %d: thrashing=%v, %v before the streak", i, thrash, err)
		}
		res, err := c.Compact(ctx, id, false)
		if err != nil || !res.Compacted {
			t.Fatalf("compaction %d: %+v, %v", i, res, err)
		}
		if ratio := float64(res.SavedTokens) / float64(res.OriginalTokens); ratio >= IneffectiveSavingsPct || ratio <= 0 {
			t.Fatalf("compaction %d saved %.3f of its tokens; the test needs an ineffective one", i, ratio)
		}
		id = res.TargetSessionID
		if _, err := c.AppendLines(ctx, id, jsonl(t, turns(10))); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.Status(ctx, id)
	if err != nil || !st.Thrashing || !st.NeedsCompaction {
		t.Fatalf("status %+v, %v; want needs_compaction and thrashing", st, err)
	}
	before := counts(t, c.store)
	calls := sum.calls.Load()
	res, err := c.Compact(ctx, id, false)
	if err != nil || res.Compacted || res.Reason != ReasonThrashing {
		t.Fatalf("automatic compaction while thrashing: %+v, %v", res, err)
	}
	if counts(t, c.store) != before || sum.calls.Load() != calls {
		t.Fatal("a skipped compaction touched the store or the summarizer")
	}
	res, err = c.Compact(ctx, id, true)
	if err != nil || !res.Compacted || !res.Forced {
		t.Fatalf("forced compaction: %+v, %v", res, err)
	}
	row, _ := c.store.SummaryInto(ctx, res.TargetSessionID)
	if !row.Forced {
		t.Fatal("the summary row does not record the force")
	}
	// An effective compaction in the lineage ends the streak.
	c2 := newTestCompressor(t, smallConfig(), WithSummarizer(sum))
	id2 := newSessionWith(t, c2, SessionOptions{}, genConversation(rand.New(rand.NewPCG(5, 5)), 80))
	r, err := c2.Compact(ctx, id2, false)
	if err != nil || !r.Compacted || float64(r.SavedTokens) < IneffectiveSavingsPct*float64(r.OriginalTokens) {
		t.Fatalf("effective compaction: %+v, %v", r, err)
	}
	if thrash, _ := c2.Thrashing(ctx, r.TargetSessionID); thrash {
		t.Fatal("thrashing after one effective compaction")
	}
}

func TestSummarizerFailureLeavesStoreUnchanged(t *testing.T) {
	c := newTestCompressor(t, smallConfig(), WithSummarizer(failingSummarizer{}))
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(6, 6)), 60))
	before := counts(t, c.store)
	res, err := c.Compact(ctx, id, true)
	if err == nil || !strings.Contains(err.Error(), "model unavailable") || res.Compacted {
		t.Fatalf("%+v, %v", res, err)
	}
	if counts(t, c.store) != before {
		t.Fatal("a failed summary changed the store")
	}
	c.flush = func(context.Context, string) error { return errors.New("memory store down") }
	c.sum = &fixedSummarizer{text: "x"}
	if _, err := c.Compact(ctx, id, true); err == nil || !strings.Contains(err.Error(), "memory store down") {
		t.Fatalf("flush failure: %v", err)
	}
	if counts(t, c.store) != before {
		t.Fatal("a failed flush changed the store")
	}
}

// TestCommitAtomic makes the commit fail, then panic, after each of its
// steps, and finds nothing of it in the store.
func TestCommitAtomic(t *testing.T) {
	c := newTestCompressor(t, smallConfig(), WithSummarizer(&fixedSummarizer{text: "## Goal\n- g"}))
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(8, 8)), 60))
	before := counts(t, c.store)
	for _, stage := range []string{"session", "summary", "messages"} {
		for _, mode := range []string{"error", "panic"} {
			c.hook = func(s string) error {
				if s != stage {
					return nil
				}
				if mode == "panic" {
					panic("crash inside the commit at " + s)
				}
				return errors.New("disk full at " + s)
			}
			func() {
				defer func() {
					r := recover()
					if (mode == "panic") != (r != nil) {
						t.Fatalf("%s at %s: recovered %v", mode, stage, r)
					}
				}()
				res, err := c.Compact(ctx, id, false)
				if mode == "error" && (err == nil || res.Compacted) {
					t.Fatalf("%s at %s: %+v, %v", mode, stage, res, err)
				}
			}()
			if after := counts(t, c.store); after != before {
				t.Fatalf("%s at %s left %v, want %v", mode, stage, after, before)
			}
		}
	}
	c.hook = nil
	res, err := c.Compact(ctx, id, false)
	if err != nil || !res.Compacted {
		t.Fatalf("after the failures: %+v, %v", res, err)
	}
	if after := counts(t, c.store); after[0] != before[0]+1 || after[2] != before[2]+1 {
		t.Fatalf("counts %v after one compaction from %v", after, before)
	}
}

// TestCommitKilled kills a process (SIGKILL) inside the commit transaction,
// after each of its steps, and finds the store intact and unchanged.
func TestCommitKilled(t *testing.T) {
	if db := os.Getenv("COMPACT_KILL_DB"); db != "" {
		killHelper(db, os.Getenv("COMPACT_KILL_STAGE"), os.Getenv("COMPACT_KILL_ID"))
		return
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "compact.db")
	s, err := OpenStore(db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCompressor(s, smallConfig(), WithSummarizer(&fixedSummarizer{text: "## Goal\n- g"}))
	if err != nil {
		t.Fatal(err)
	}
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(9, 9)), 60))
	before := counts(t, s)
	s.Close()
	for _, stage := range []string{"session", "summary", "messages"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCommitKilled$", "-test.count=1")
		cmd.Env = append(os.Environ(), "COMPACT_KILL_DB="+db, "COMPACT_KILL_STAGE="+stage, "COMPACT_KILL_ID="+id)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "inside "+stage {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q, %v", line, err)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		s, err := OpenStore(db)
		if err != nil {
			t.Fatalf("reopening after a kill at %s: %v", stage, err)
		}
		if v, err := s.IntegrityCheck(context.Background()); err != nil || v != "ok" {
			t.Fatalf("integrity after a kill at %s: %q, %v", stage, v, err)
		}
		if after := counts(t, s); after != before {
			t.Fatalf("a kill at %s left %v, want %v", stage, after, before)
		}
		s.Close()
	}
	// The store still compacts.
	s, err = OpenStore(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ = NewCompressor(s, smallConfig(), WithSummarizer(&fixedSummarizer{text: "## Goal\n- g"}))
	if res, err := c.Compact(context.Background(), id, false); err != nil || !res.Compacted {
		t.Fatalf("after the kills: %+v, %v", res, err)
	}
}

// killHelper runs in the child process: it compacts and, inside the commit
// at stage, says so on stdout and waits to be killed.
func killHelper(db, stage, id string) {
	s, err := OpenStore(db)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	c, err := NewCompressor(s, smallConfig(), WithSummarizer(&fixedSummarizer{text: "## Goal\n- g"}))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	c.hook = func(st string) error {
		if st == stage {
			fmt.Println("inside " + st)
			select {} // wait for SIGKILL
		}
		return nil
	}
	_, err = c.Compact(context.Background(), id, false)
	fmt.Println("the commit finished:", err)
	os.Exit(1)
}

// TestLateMessagesAreKept appends to the source while its summary is being
// written; the child gets those messages after the tail.
func TestLateMessagesAreKept(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	sum := &blockingSummarizer{entered: entered, release: release}
	c := newTestCompressor(t, smallConfig(), WithSummarizer(sum))
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(10, 10)), 60))
	type out struct {
		res Result
		err error
	}
	done := make(chan out)
	go func() {
		r, err := c.Compact(ctx, id, false)
		done <- out{r, err}
	}()
	<-entered
	if _, err := c.AppendLines(ctx, id, jsonl(t, []Message{user("late question"), assistant("late answer")})); err != nil {
		t.Fatal(err)
	}
	close(release)
	o := <-done
	if o.err != nil || !o.res.Compacted {
		t.Fatalf("%+v, %v", o.res, o.err)
	}
	msgs, _ := c.store.Messages(ctx, o.res.TargetSessionID, 0)
	n := len(msgs)
	if n != o.res.CompactedMessages || msgs[n-2].Content != "late question" || msgs[n-1].Content != "late answer" {
		t.Fatalf("child ends with %q, %q (%d messages, result %d)", msgs[n-2].Content, msgs[n-1].Content, n, o.res.CompactedMessages)
	}
}

type blockingSummarizer struct{ entered, release chan struct{} }

func (b *blockingSummarizer) Name() string { return "blocking" }
func (b *blockingSummarizer) Summarize(ctx context.Context, _ SummaryRequest) (string, error) {
	close(b.entered)
	select {
	case <-b.release:
		return "## Goal\n- g", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// TestConcurrentCompactions: two requests on one session make one child.
func TestConcurrentCompactions(t *testing.T) {
	c := newTestCompressor(t, smallConfig())
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(12, 12)), 60))
	var wg sync.WaitGroup
	results := make([]Result, 4)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := c.Compact(ctx, id, i%2 == 0)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		}(i)
	}
	wg.Wait()
	compacted := 0
	for _, r := range results {
		if r.Compacted {
			compacted++
		} else if r.Reason != ReasonAlreadyCompacted {
			t.Errorf("result %+v", r)
		}
	}
	if compacted != 1 {
		t.Fatalf("%d compactions of one session, want 1", compacted)
	}
}

// TestBudgets: the window, threshold and tokenizer come from the session,
// else from the config, else from the defaults.
func TestBudgets(t *testing.T) {
	ctx := context.Background()
	c := newTestCompressor(t, Config{})
	id := newSessionWith(t, c, SessionOptions{}, nil)
	st, _ := c.Status(ctx, id)
	if st.ContextWindow != 128000 || st.ThresholdTokens != 64000 || st.TailTokens != 12800 || st.Tokenizer != TokenizerCL100K {
		t.Fatalf("defaults: %+v", st.Budget)
	}
	c = newTestCompressor(t, Config{ContextWindow: 10000, Threshold: 0.8, Model: "gpt-4o"})
	id = newSessionWith(t, c, SessionOptions{}, nil)
	st, _ = c.Status(ctx, id)
	if st.ContextWindow != 10000 || st.ThresholdTokens != 8000 || st.Tokenizer != TokenizerO200K || st.Model != "gpt-4o" {
		t.Fatalf("config: %+v", st.Budget)
	}
	id = newSessionWith(t, c, SessionOptions{Model: "gpt-4", ContextWindow: 4000}, nil)
	st, _ = c.Status(ctx, id)
	if st.ContextWindow != 4000 || st.ThresholdTokens != 3200 || st.Tokenizer != TokenizerCL100K {
		t.Fatalf("session: %+v", st.Budget)
	}
	id = newSessionWith(t, c, SessionOptions{Tokenizer: TokenizerChars4}, nil)
	st, _ = c.Status(ctx, id)
	if st.Tokenizer != TokenizerChars4 {
		t.Fatalf("explicit chars/4: %+v", st.Budget)
	}
}
