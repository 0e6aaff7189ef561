package compact

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// newTestStore opens a fresh store in a temporary directory.
func newTestStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "compact.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// smallConfig compacts at 1,000 tokens (window 2,000) with a 200-token tail.
func smallConfig() Config {
	return Config{ContextWindow: 2000, MinimumMessages: 6, HeadMessages: 3}
}

func newTestCompressor(t testing.TB, cfg Config, opts ...Option) *Compressor {
	t.Helper()
	c, err := NewCompressor(newTestStore(t), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// jsonl renders messages as JSON lines.
func jsonl(t testing.TB, msgs []Message) []byte {
	t.Helper()
	var b strings.Builder
	for _, m := range msgs {
		line, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// newSessionWith creates a session with opts holding msgs (appended through
// the same path as the messages file) and returns its id.
func newSessionWith(t testing.TB, c *Compressor, opts SessionOptions, msgs []Message) string {
	t.Helper()
	ctx := context.Background()
	sess, err := c.store.CreateSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) > 0 {
		if _, err := c.AppendLines(ctx, sess.ID, jsonl(t, msgs)); err != nil {
			t.Fatal(err)
		}
	}
	return sess.ID
}

// counts returns the store's row counts.
func counts(t testing.TB, s *Store) [3]int {
	t.Helper()
	a, b, c, err := s.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return [3]int{a, b, c}
}

func user(s string) Message      { return Message{Role: RoleUser, Content: s} }
func assistant(s string) Message { return Message{Role: RoleAssistant, Content: s} }
func system(s string) Message    { return Message{Role: RoleSystem, Content: s} }
func toolResult(id, s string) Message {
	return Message{Role: RoleTool, ToolCallID: id, Content: s}
}
func call(text string, ids ...string) Message {
	m := Message{Role: RoleAssistant, Content: text}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: "read_file", Arguments: fmt.Sprintf(`{"path":"src/%s.go"}`, id)}})
	}
	return m
}

var callSeq atomic.Int64

// genConversation returns a well-formed agent conversation of about n
// messages: a system prompt, then turns of a user request, assistant tool
// calls each followed by their results, and an answer. Sizes vary with rng.
func genConversation(rng *rand.Rand, n int) []Message {
	msgs := []Message{system("You are a coding agent. Never push to main.")}
	for len(msgs) < n {
		msgs = append(msgs, user(fmt.Sprintf("Please fix bug %d in pkg/mod%d.go, and you must keep the tests green.", rng.IntN(1000), rng.IntN(20))))
		for k := rng.IntN(4); k > 0; k-- {
			var ids []string
			for j := 1 + rng.IntN(3); j > 0; j-- {
				ids = append(ids, fmt.Sprintf("call_%d", callSeq.Add(1)))
			}
			msgs = append(msgs, call("Reading files.", ids...))
			for _, id := range ids {
				msgs = append(msgs, toolResult(id, strings.Repeat(fmt.Sprintf("line %d of output for %s\n", rng.IntN(100), id), 1+rng.IntN(30))))
			}
		}
		msgs = append(msgs, assistant(fmt.Sprintf("Done with step %d. I decided to use approach %d.", len(msgs), rng.IntN(5))))
	}
	return msgs
}

// fixedSummarizer returns a fixed summary and records its requests.
type fixedSummarizer struct {
	text  string
	calls atomic.Int64
	last  atomic.Pointer[SummaryRequest]
}

func (f *fixedSummarizer) Name() string { return "fixed" }
func (f *fixedSummarizer) Summarize(_ context.Context, req SummaryRequest) (string, error) {
	f.calls.Add(1)
	f.last.Store(&req)
	return f.text, nil
}

// failingSummarizer always fails.
type failingSummarizer struct{}

func (failingSummarizer) Name() string { return "failing" }
func (failingSummarizer) Summarize(context.Context, SummaryRequest) (string, error) {
	return "", fmt.Errorf("model unavailable")
}
