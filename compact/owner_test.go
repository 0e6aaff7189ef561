package compact

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/rubinofs/rubinofs/ctltree"
)

// TestTranscriptBytesMatchMigration: the running byte total an append
// keeps equals the figure the migration computes in SQL from the stored
// messages (so a store migrated from an older version enforces the same
// limit).
func TestTranscriptBytesMatchMigration(t *testing.T) {
	c := newTestCompressor(t, smallConfig())
	ctx := context.Background()
	msgs := []Message{
		{Role: RoleSystem, Content: "système"},
		{Role: RoleUser, Name: "ann", Content: "read a.go"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "read", Arguments: `{"path":"a.go"}`}}}},
		{Role: RoleTool, ToolCallID: "c1", Content: "package a"},
	}
	id := newSessionWith(t, c, SessionOptions{}, msgs)
	sess, err := c.store.Session(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := range msgs {
		n, _ := messageBytes(&msgs[i])
		want += n
	}
	if sess.Bytes != want || want == 0 {
		t.Fatalf("bytes %d, want %d", sess.Bytes, want)
	}
	stmts := migrations[2].stmts
	if _, err := c.store.db.ExecContext(ctx, `UPDATE sessions SET bytes = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.store.db.ExecContext(ctx, stmts[len(stmts)-1]); err != nil {
		t.Fatal(err)
	}
	if sess, _ = c.store.Session(ctx, id); sess.Bytes != want {
		t.Fatalf("bytes recomputed by the migration %d, want %d", sess.Bytes, want)
	}
}

// TestTranscriptSizeLimit: an append past MaxTranscriptBytes fails with
// ErrTooLarge (EFBIG, the reason naming the option) and stores nothing.
func TestTranscriptSizeLimit(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxTranscriptBytes = MinTranscriptBytes
	c := newTestCompressor(t, cfg)
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, nil)
	big := strings.Repeat("x", 600<<10)
	if _, err := c.AppendLines(ctx, id, jsonl(t, []Message{{Role: RoleUser, Content: big}})); err != nil {
		t.Fatal(err)
	}
	_, err := c.AppendLines(ctx, id, jsonl(t, []Message{{Role: RoleUser, Content: "ok"}, {Role: RoleAssistant, Content: big}}))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("append past the limit: %v", err)
	}
	ce := ctlErrnos.Map(err).(*ctltree.Error)
	if ce.Errno != syscall.EFBIG || !strings.Contains(ce.Msg, "compact.max_transcript_bytes") {
		t.Fatalf("mapped: %v %q", ce.Errno, ce.Msg)
	}
	if st, _ := c.store.Stats(ctx, id); st.Messages != 1 {
		t.Fatalf("messages after the refused append: %d", st.Messages)
	}
}

// TestOwnerBytesLimit: the transcripts of one uid together hold at most
// MaxBytesPerUID: an append to a second transcript that would pass it
// fails with ErrTooLarge (EFBIG, the reason naming the option) and stores
// nothing, while another uid's append goes through; a compaction whose
// child would pass it fails the same way and leaves no child; deleting a
// transcript frees its bytes.
func TestOwnerBytesLimit(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxBytesPerUID = MinTranscriptBytes
	c := newTestCompressor(t, cfg)
	ctx := context.Background()
	s := c.store
	mk := func(owner uint32) string {
		t.Helper()
		sess, err := s.CreateSessionCapped(ctx, SessionOptions{Owner: owner}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return sess.ID
	}
	a, b, other := mk(1000), mk(1000), mk(65534)
	big := strings.Repeat("x", 600<<10)
	if _, err := c.AppendLines(ctx, a, jsonl(t, []Message{{Role: RoleUser, Content: big}})); err != nil {
		t.Fatal(err)
	}
	_, err := c.AppendLines(ctx, b, jsonl(t, []Message{{Role: RoleUser, Content: big}}))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("uid 1000's second 600 KiB past its 1 MiB: %v", err)
	}
	if ce := ctlErrnos.Map(err).(*ctltree.Error); ce.Errno != syscall.EFBIG || !strings.Contains(ce.Msg, "compact.max_bytes_per_uid") {
		t.Fatalf("mapped: %v %q", ce.Errno, ce.Msg)
	}
	if st, _ := s.Stats(ctx, b); st.Messages != 0 {
		t.Fatalf("messages after the refused append: %d", st.Messages)
	}
	if _, err := c.AppendLines(ctx, other, jsonl(t, []Message{{Role: RoleUser, Content: big}})); err != nil {
		t.Fatalf("another uid's append: %v", err)
	}
	// A compaction copies the head and the tail into a child: with a's
	// 600 KiB and b's conversation, the child passes the bound.
	conv := genConversation(rand.New(rand.NewPCG(3, 4)), 80)
	if _, err := c.AppendLines(ctx, b, jsonl(t, conv)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendLines(ctx, a, jsonl(t, []Message{{Role: RoleUser, Content: strings.Repeat("y", 1<<20-600<<10-int(mustSession(t, s, b).Bytes)-200)}})); err != nil {
		t.Fatal(err)
	}
	before := counts(t, s)
	if _, err := c.Compact(ctx, b, true); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a compaction whose child passes the bound: %v", err)
	}
	if got := counts(t, s); got != before {
		t.Fatalf("the refused compaction left rows: %v, before %v", got, before)
	}
	if _, err := s.DeleteTree(ctx, a); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Compact(ctx, b, true); err != nil || !res.Compacted {
		t.Fatalf("compaction after a delete freed the bytes: %+v %v", res, err)
	}
}

func mustSession(t *testing.T, s *Store, id string) Session {
	t.Helper()
	sess, err := s.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// TestTranscriptOwnership: scopes see their uid's transcripts; a prefix
// resolves among them only; the per-uid cap counts compacted children; a
// delete takes the children with it.
func TestTranscriptOwnership(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxTranscriptsPerUID = 2
	c := newTestCompressor(t, cfg)
	ctx := context.Background()
	s := c.store
	a, err := s.CreateSessionCapped(ctx, SessionOptions{Owner: 1000}, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateSessionCapped(ctx, SessionOptions{Owner: 65534}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.SessionIDsIn(ctx, UIDScope(65534)); len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("uid 65534 sees %v", ids)
	}
	if ids, _ := s.SessionIDsIn(ctx, AllScope); len(ids) != 2 {
		t.Fatalf("all: %v", ids)
	}
	if _, err := s.ResolveIn(ctx, UIDScope(65534), a.ID[:6]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("uid 65534 resolves uid 1000's prefix: %v", err)
	}
	if got, err := s.ResolveIn(ctx, UIDScope(1000), a.ID[:6]); err != nil || got != a.ID {
		t.Fatalf("owner resolves its prefix: %q %v", got, err)
	}
	if !UIDScope(1000).Sees(a) || UIDScope(65534).Sees(a) || !AllScope.Sees(a) {
		t.Fatal("Sees")
	}

	// Compact uid 1000's transcript: the child is its, and the second.
	if _, err := c.AppendLines(ctx, a.ID, jsonl(t, genConversation(rand.New(rand.NewPCG(1, 2)), 80))); err != nil {
		t.Fatal(err)
	}
	res, err := c.Compact(ctx, a.ID, true)
	if err != nil || !res.Compacted {
		t.Fatalf("compact: %+v %v", res, err)
	}
	child, _ := s.Session(ctx, res.TargetSessionID)
	if child.Owner == nil || *child.Owner != 1000 {
		t.Fatalf("child owner %v", child.Owner)
	}
	_, err = s.CreateSessionCapped(ctx, SessionOptions{Owner: 1000}, 2)
	if !errors.Is(err, ErrTooMany) || ctlErrnos.Errno(err) != syscall.EAGAIN || !strings.Contains(err.Error(), "compact.max_transcripts_per_uid") {
		t.Fatalf("third transcript of uid 1000: %v", err)
	}
	// Deleting the source deletes its child; uid 65534's stays.
	ids, err := s.DeleteTree(ctx, a.ID)
	if err != nil || len(ids) != 2 {
		t.Fatalf("delete: %v %v", ids, err)
	}
	if got := counts(t, s); got[0] != 1 || got[2] != 0 {
		t.Fatalf("counts after delete: %v", got)
	}
	if v, err := s.IntegrityCheck(ctx); err != nil || v != "ok" {
		t.Fatalf("integrity: %q %v", v, err)
	}
	if _, err := s.CreateSessionCapped(ctx, SessionOptions{Owner: 1000}, 2); err != nil {
		t.Fatalf("after delete: %v", err)
	}
}

// TestAdmin: only the mount owner or root in its own default session
// administers every transcript.
func TestAdmin(t *testing.T) {
	for _, tc := range []struct {
		c    ctltree.Caller
		want bool
	}{
		{ctltree.Caller{Uid: 0, Session: "default", Privileged: true}, true},
		{ctltree.Caller{Uid: 0, Session: "default-0", Privileged: true}, true},
		{ctltree.Caller{Uid: 1000, Session: "default", Privileged: true}, true},
		{ctltree.Caller{Uid: 0, Session: "task-3", Privileged: true}, false},
		{ctltree.Caller{Uid: 0, Session: "default-1000", Privileged: true}, false},
		{ctltree.Caller{Uid: 65534, Session: "default", Privileged: false}, false},
		{ctltree.Caller{Uid: 65534, Session: "default-65534"}, false},
	} {
		if got := Admin(tc.c); got != tc.want {
			t.Errorf("Admin(%+v) = %v", tc.c, got)
		}
	}
}

// TestBoundedCompaction: a compaction reads the transcript's metadata
// without contents, gives the summarizer only the newest middle messages
// that fit its window (each cut), and still commits the head and the tail
// in full.
func TestBoundedCompaction(t *testing.T) {
	sum := &fixedSummarizer{text: "## Goal\n- keep going\n"}
	c := newTestCompressor(t, smallConfig(), WithSummarizer(sum))
	c.win = window{input: 20_000, message: 1000, argument: 100}
	ctx := context.Background()
	msgs := []Message{system("You are a coding agent.")}
	for i := 0; i < 60; i++ {
		msgs = append(msgs, user(fmt.Sprintf("request %d: %s", i, strings.Repeat("word ", 600))), assistant(fmt.Sprintf("answer %d", i)))
	}
	id := newSessionWith(t, c, SessionOptions{}, msgs)
	ms, err := c.store.messageMetas(ctx, id)
	if err != nil || len(ms.m) != len(msgs) {
		t.Fatalf("metas: %v, %v", ms, err)
	}
	if unsafe.Sizeof(meta{}) > 32 {
		t.Fatalf("a message's metadata takes %d bytes", unsafe.Sizeof(meta{}))
	}
	res, err := c.Compact(ctx, id, true)
	if err != nil || !res.Compacted {
		t.Fatalf("compact: %+v %v", res, err)
	}
	req := sum.last.Load()
	size := 0
	for _, m := range req.Messages {
		if len(m.Content) > 1000+40 {
			t.Fatalf("a middle message of %d bytes reached the summarizer", len(m.Content))
		}
		size += len(m.Content)
	}
	if size > 20_000 || len(req.Messages) == 0 || len(req.Messages) >= res.OriginalMessages-res.CompactedMessages {
		t.Fatalf("summarizer input: %d messages, %d bytes", len(req.Messages), size)
	}
	// The newest middle message is in the window.
	child, err := c.store.Messages(ctx, res.TargetSessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := c.store.Messages(ctx, id, 0)
	var summaryAt int
	for i, m := range child {
		if m.Kind == KindSummary {
			summaryAt = i
		}
	}
	tailStart := len(src) - (len(child) - summaryAt - 1)
	if last := req.Messages[len(req.Messages)-1]; last.Seq != src[tailStart-1].Seq {
		t.Fatalf("window ends at seq %d, the middle at %d", last.Seq, src[tailStart-1].Seq)
	}
	// Head and tail are copied in full.
	for i := 0; i < summaryAt; i++ {
		if child[i].Content != src[i].Content {
			t.Fatalf("head message %d differs", i)
		}
	}
	for i := summaryAt + 1; i < len(child); i++ {
		if child[i].Content != src[tailStart+i-summaryAt-1].Content {
			t.Fatalf("tail message %d differs", i)
		}
	}
}

// TestMetaSplitMatchesSplitMessages: the cuts made from the metadata are
// the cuts SplitMessages makes of the full messages, on random transcripts
// with tool calls, orphan and late results.
func TestMetaSplitMatchesSplitMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for iter := 0; iter < 300; iter++ {
		msgs := genTranscript(rng, 1+rng.IntN(80))
		var ms metas
		for i := range msgs {
			msgs[i].Seq = int64(i + 1)
			ms.add(&msgs[i])
		}
		headN, budget := rng.IntN(6), rng.IntN(400)
		want := SplitMessages(msgs, headN, budget)
		h, tt := ms.split(headN, budget)
		if h != want.HeadEnd || tt != want.TailStart {
			t.Fatalf("iteration %d: metadata cuts %d/%d, SplitMessages %d/%d", iter, h, tt, want.HeadEnd, want.TailStart)
		}
	}
}
