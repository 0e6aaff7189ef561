package compact

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// agentMiddle is a small realistic middle for the summarizer tests.
func agentMiddle() (head, middle []Message) {
	head = []Message{
		system("You are a coding agent."),
		user("Add a --json flag to the status command in cmd/tool/status.go. You must not change the default output."),
		assistant("Sure."),
	}
	middle = []Message{
		call("Let me look.", "c1"),
		toolResult("c1", "package main\nfunc status() {}\n"),
		{Role: RoleAssistant, Content: "Running the tests.", ToolCalls: []ToolCall{{ID: "c2", Type: "function", Function: FunctionCall{Name: "bash", Arguments: `{"command":"go test ./cmd/tool/ && go vet internal/fmt/render.go"}`}}}},
		toolResult("c2", "--- FAIL: TestStatus (0.00s)\n    status_test.go:12: got \"x\" want \"y\"\nFAIL\nexit status 1"),
		assistant("I decided to use encoding/json instead of a template. The test fails because of the trailing newline.\nNext: fix the newline in status.go"),
		user("Also never print colors when --json is given."),
	}
	return head, middle
}

func TestBuiltinSummarizer(t *testing.T) {
	head, middle := agentMiddle()
	req := SummaryRequest{Head: head, Messages: middle, MaxTokens: 2000}
	s1, err := BuiltinSummarizer{}.Summarize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := BuiltinSummarizer{}.Summarize(context.Background(), req)
	if s1 != s2 {
		t.Fatal("the builtin summary is not deterministic")
	}
	secs := parseSections(s1)
	for _, sec := range Sections {
		if !strings.Contains(s1, "## "+sec+"\n") {
			t.Errorf("section %q missing:\n%s", sec, s1)
		}
	}
	has := func(sec, want string) {
		t.Helper()
		if !strings.Contains(strings.Join(secs[sec], "\n"), want) {
			t.Errorf("%s lacks %q:\n%s", sec, want, s1)
		}
	}
	has("Goal", "Add a --json flag to the status command")
	has("Constraints", "never print colors")
	has("Progress", "User asked: Also never print colors")
	has("Progress", "Ran 2 tool calls: bash x1, read_file x1")
	has("Progress", "Last state: I decided to use encoding/json")
	has("Decisions", "I decided to use encoding/json instead of a template.")
	has("Files", "src/c1.go")
	has("Files", "internal/fmt/render.go")
	has("Files", "status.go")
	has("Next steps", "fix the newline in status.go")
	has("Critical context", "--- FAIL: TestStatus")
	has("Critical context", "exit status 1")
	if strings.Contains(strings.Join(secs["Files"], "\n"), "encoding/json") {
		t.Errorf("a package path counted as a file:\n%s", s1)
	}

	// Iterative: the previous summary's entries survive, the goal stays,
	// the old last state is replaced.
	prev := "## Goal\n- Ship v2\n\n## Files\n- old/file.go\n\n## Progress\n- Last state: stale\n- Earlier work\n"
	req.Previous = prev
	s3, _ := BuiltinSummarizer{}.Summarize(context.Background(), req)
	secs = parseSections(s3)
	has("Goal", "Ship v2")
	has("Files", "old/file.go")
	has("Files", "src/c1.go")
	has("Progress", "Earlier work")
	if strings.Contains(s3, "stale") {
		t.Errorf("the old last state survived:\n%s", s3)
	}

	// The budget holds.
	tk, _ := NewTokenizer(TokenizerCL100K, "")
	many := genConversation(rand.New(rand.NewPCG(1, 2)), 400)
	small, _ := BuiltinSummarizer{}.Summarize(context.Background(), SummaryRequest{Messages: many, MaxTokens: 300, Tokenizer: tk})
	if n := tk.Count(small); n > 300 {
		t.Fatalf("summary of %d tokens over a 300-token budget", n)
	}
	if !strings.Contains(small, "## Goal") {
		t.Fatalf("the budget cut the sections:\n%s", small)
	}
}

func TestBuildPrompt(t *testing.T) {
	head, middle := agentMiddle()
	p := BuildPrompt(SummaryRequest{Head: head, Messages: middle, Previous: "## Goal\n- prev", MaxTokens: 777})
	for _, want := range []string{"at most 777 tokens", "<previous-summary>\n## Goal\n- prev\n</previous-summary>", "[tool result for c2]", "-> call c2 bash(", "never print colors"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "Add a --json flag") {
		t.Error("the head reached the prompt")
	}
	big := []Message{user(strings.Repeat("x", 5000))}
	for i := 0; i < 300; i++ {
		big = append(big, assistant(strings.Repeat("y", 3000)))
	}
	p = BuildPrompt(SummaryRequest{Messages: big})
	if len(p) > maxPromptBytes+1000 || !strings.Contains(p, "earlier turns omitted") || !strings.Contains(p, "bytes cut") {
		t.Errorf("a large middle renders %d bytes", len(p))
	}
}

func TestCommandSummarizer(t *testing.T) {
	dir := t.TempDir()
	prompt := filepath.Join(dir, "prompt")
	script := `cat > "$1"; printf '## Goal\n- from the command for %s\n' "$RUBINOFS_SESSION_ID"`
	cfg := smallConfig()
	cfg.Summarizer = SummarizerConfig{Backend: "command", Command: []string{"/bin/sh", "-c", script, "sh", prompt}}
	c := newTestCompressor(t, cfg)
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(20, 20)), 60))
	res, err := c.Compact(ctx, id, false)
	if err != nil || !res.Compacted || res.Summarizer != "command" {
		t.Fatalf("%+v, %v", res, err)
	}
	row, _ := c.store.SummaryInto(ctx, res.TargetSessionID)
	if row.Content != "## Goal\n- from the command for "+id {
		t.Fatalf("summary %q", row.Content)
	}
	in, _ := os.ReadFile(prompt)
	if !strings.HasPrefix(string(in), SystemPrompt) || !strings.Contains(string(in), "<turns>") || !strings.Contains(string(in), "[tool result for call_") {
		t.Fatalf("the command's stdin:\n%.500s", in)
	}

	for _, tc := range []struct {
		name, script string
		timeout      int
		want         string
		timedOut     bool
	}{
		{"fails", `echo "model overloaded" >&2; exit 3`, 0, "exit status 3: model overloaded", false},
		{"silent", `cat >/dev/null`, 0, "printed no summary", false},
		{"hangs", `sleep 60 & wait`, 1, "ran longer than 1s", true},
		{"missing", ``, 0, "no such file", false},
	} {
		argv := []string{"/bin/sh", "-c", tc.script}
		if tc.name == "missing" {
			argv = []string{filepath.Join(dir, "no-such-summarizer")}
		}
		s := &CommandSummarizer{Argv: argv, Timeout: DefaultSummarizerTimeout}
		if tc.timeout > 0 {
			s.Timeout = time.Duration(tc.timeout) * time.Second
		}
		c.sum = s
		id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(21, 21)), 60))
		before := counts(t, c.store)
		_, err := c.Compact(ctx, id, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrSummarizerTimeout) != tc.timedOut {
			t.Errorf("%s: %v, want %q (timeout %v)", tc.name, err, tc.want, tc.timedOut)
		}
		if counts(t, c.store) != before {
			t.Errorf("%s: the store changed", tc.name)
		}
	}
}

func TestOpenAISummarizer(t *testing.T) {
	var hits atomic.Int64
	var mode atomic.Value
	mode.Store("ok")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "wrong endpoint "+r.URL.Path, http.StatusNotFound)
			return
		}
		var req struct {
			Model     string        `json:"model"`
			Messages  []chatMessage `json:"messages"`
			MaxTokens int           `json:"max_tokens"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch mode.Load().(string) {
		case "ok":
			if r.Header.Get("Authorization") != "Bearer sekrit" || req.Model != "summarizer-1" || req.MaxTokens != DefaultMaxSummaryTokens ||
				len(req.Messages) != 2 || req.Messages[0].Content != SystemPrompt || !strings.Contains(req.Messages[1].Content, "<turns>") {
				http.Error(w, "bad request: "+string(body[:min(len(body), 200)]), http.StatusBadRequest)
				return
			}
			io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"## Goal\n- from the API"},"finish_reason":"stop"}]}`)
		case "overloaded":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"the model is overloaded","type":"server_error"}}`)
		case "garbage":
			io.WriteString(w, `<html>`)
		case "empty":
			io.WriteString(w, `{"choices":[]}`)
		case "noauth":
			if r.Header.Get("Authorization") != "" {
				http.Error(w, "unexpected key", http.StatusBadRequest)
				return
			}
			io.WriteString(w, `{"choices":[{"message":{"content":"## Goal\n- keyless"}}]}`)
		}
	}))
	defer srv.Close()
	t.Setenv("TEST_COMPACT_KEY", "sekrit")
	cfg := smallConfig()
	cfg.Summarizer = SummarizerConfig{Backend: "openai", BaseURL: srv.URL + "/v1/", Model: "summarizer-1", APIKeyEnv: "TEST_COMPACT_KEY"}
	c := newTestCompressor(t, cfg)
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(22, 22)), 60))
	res, err := c.Compact(ctx, id, false)
	if err != nil || !res.Compacted || res.Summarizer != "openai" {
		t.Fatalf("%+v, %v", res, err)
	}
	row, _ := c.store.SummaryInto(ctx, res.TargetSessionID)
	if row.Content != "## Goal\n- from the API" {
		t.Fatalf("summary %q", row.Content)
	}
	for m, want := range map[string]string{"overloaded": "the model is overloaded", "garbage": "malformed answer", "empty": "no choices"} {
		mode.Store(m)
		id := newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(23, 23)), 60))
		before := counts(t, c.store)
		if _, err := c.Compact(ctx, id, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", m, err, want)
		}
		if counts(t, c.store) != before {
			t.Errorf("%s: the store changed", m)
		}
	}
	mode.Store("noauth")
	t.Setenv("TEST_COMPACT_KEY", "")
	if _, err := c.Compact(ctx, newSessionWith(t, c, SessionOptions{}, genConversation(rand.New(rand.NewPCG(24, 24)), 60)), false); err != nil {
		t.Fatalf("without a key: %v", err)
	}
	if hits.Load() != 5 {
		t.Fatalf("%d requests reached the server, want 5", hits.Load())
	}
}

func TestSummarizerConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  SummarizerConfig
		want string
	}{
		{SummarizerConfig{}, "builtin"},
		{SummarizerConfig{Backend: "builtin"}, "builtin"},
		{SummarizerConfig{Backend: "command", Command: []string{"x"}}, "command"},
		{SummarizerConfig{Backend: "openai", BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, "openai"},
		{SummarizerConfig{Backend: "command"}, "error"},
		{SummarizerConfig{Backend: "openai", Model: "m"}, "error"},
		{SummarizerConfig{Backend: "magic"}, "error"},
	} {
		s, err := NewSummarizer(tc.cfg)
		got := "error"
		if err == nil {
			got = s.Name()
		}
		if got != tc.want {
			t.Errorf("NewSummarizer(%v) = %s (%v), want %s", tc.cfg, got, err, tc.want)
		}
	}
	if _, err := ParseConfig([]byte(`{"summarizer":{"backend":"command","command":["summarize"],"timeout_seconds":5},"context_window":200000}`)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"context_window":5}`, `{"threshold":1.5}`, `{"colour":1}`, `{"head_messages":10,"minimum_messages":4}`, `{"summarizer":{"backend":"x"}}`} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s) accepted", bad)
		}
	}
	cfg, err := ParseConfig(nil)
	if err != nil || cfg.ContextWindow != DefaultContextWindow || cfg.Threshold != DefaultThreshold || cfg.Summarizer.Backend != "builtin" {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
}
