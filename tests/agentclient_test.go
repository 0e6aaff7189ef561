package tests

// A real agent client through the mount: Claude Code (npm package
// @anthropic-ai/claude-code), driven by a scripted local model. The model
// is an HTTP server on 127.0.0.1 that speaks the Anthropic Messages API
// (streamed as server-sent events): its answer to the n-th turn is the n-th
// scripted tool call, and after the script a plain "done". Claude Code runs
// the tools for real, in the mount, with its own harness reads (git status
// at start, the Read tool's read, the Edit tool's read-then-replace), so a
// test sees what a user of a real agent would see.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// toolCall is one scripted step of the model: a tool_use block.
type toolCall struct {
	Name  string         // "Bash", "Read", "Edit", "Write"
	Input map[string]any // the tool's input, as Claude Code's tool schema names it
	// Before, when set, runs just before the model issues this call: an
	// edit from outside the agent between two of its steps.
	Before func()
	// Inputs, when set, makes the input at the moment the model issues
	// this call, in place of Input, from the results so far: a step that
	// uses what an earlier step's result said (a checkpoint id).
	Inputs func(results *stepLog) map[string]any
}

// bash is the scripted Bash tool call of command.
func bash(command string) toolCall {
	return toolCall{Name: "Bash", Input: map[string]any{"command": command, "description": "scripted step"}}
}

// stepLog records, for a scripted model of any wire protocol, what the
// agent client sent back for each scripted step: the tool result's text and
// whether the client flagged it as an error. Step i's call carries the id
// fmt.Sprintf(idFormat, i), so a result is filed under its step whatever
// order the client reports it in. Safe for concurrent use: the model's
// HTTP handler records while the test reads.
type stepLog struct {
	idFormat string   // the call id of step i, e.g. "toolu_step%02d"
	names    []string // step i's tool name, for failure messages

	mu      sync.Mutex
	results map[string]string // call id -> the tool result's text
	errors  map[string]bool   // call id -> flagged as an error
	turns   int               // requests answered with a scripted call
}

func newStepLog(idFormat string, names []string) stepLog {
	return stepLog{idFormat: idFormat, names: names, results: map[string]string{}, errors: map[string]bool{}}
}

// callID is the id the model gives scripted step i's call.
func (l *stepLog) callID(i int) string { return fmt.Sprintf(l.idFormat, i) }

// record files the client's result for the call id.
func (l *stepLog) record(id, text string, isErr bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.results[id] = text
	l.errors[id] = isErr
}

// issued counts one request answered with a scripted call.
func (l *stepLog) issued() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns++
}

// result returns the text the client reported for scripted step i, and
// whether it flagged it as an error; ok is false when the step never ran.
func (l *stepLog) result(i int) (text string, isErr, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.callID(i)
	text, ok = l.results[id]
	return text, l.errors[id], ok
}

// mustStep returns scripted step i's result and fails the test when the
// step never ran.
func (l *stepLog) mustStep(t *testing.T, i int) (string, bool) {
	t.Helper()
	text, isErr, ok := l.result(i)
	if !ok {
		t.Fatalf("step %d (%s) never ran: the agent stopped early", i, l.names[i])
	}
	return text, isErr
}

// scriptedModel is an Anthropic Messages API endpoint that answers the
// agent's turns from a script and records the tool results it is sent.
type scriptedModel struct {
	stepLog
	script []toolCall
	srv    *httptest.Server

	// bodies (under stepLog.mu) holds, per step, the raw request body of the first request
	// that carried that many tool results: bodies[i+1] is the request
	// that reported step i back, with everything the model was told
	// about it (the tool_result and any hook's additional context).
	bodies map[int]string
}

// newScriptedModel starts the model on a loopback port; it stops at the
// end of the test.
func newScriptedModel(t *testing.T, script ...toolCall) *scriptedModel {
	t.Helper()
	names := make([]string, len(script))
	for i, c := range script {
		names[i] = c.Name
	}
	sm := &scriptedModel{stepLog: newStepLog("toolu_step%02d", names), script: script, bodies: map[int]string{}}
	sm.srv = httptest.NewServer(http.HandlerFunc(sm.serve))
	t.Cleanup(sm.srv.Close)
	return sm
}

func (sm *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		http.NotFound(w, r) // count_tokens and the like: the client copes
		return
	}
	var req struct {
		Model    string            `json:"model"`
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The step is the number of tool results the conversation carries:
	// each earlier step's call came back as exactly one.
	step := 0
	for _, m := range req.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			step++
			sm.record(b.ToolUseID, toolResultText(b.Content), b.IsError)
		}
	}
	if len(req.Tools) > 0 {
		sm.mu.Lock()
		if _, seen := sm.bodies[step]; !seen {
			sm.bodies[step] = string(body)
		}
		sm.mu.Unlock()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(v map[string]any) {
		j, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], j)
	}
	ev(map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", step), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}})
	stop := "end_turn"
	// Side requests (titles, summaries) carry no tools: they get text.
	if len(req.Tools) > 0 && step < len(sm.script) {
		call := sm.script[step]
		if call.Before != nil {
			call.Before()
		}
		input := call.Input
		if call.Inputs != nil {
			input = call.Inputs(&sm.stepLog)
		}
		in, _ := json.Marshal(input)
		ev(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{
			"type": "tool_use", "id": sm.callID(step), "name": call.Name, "input": map[string]any{}}})
		ev(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{
			"type": "input_json_delta", "partial_json": string(in)}})
		stop = "tool_use"
		sm.issued()
	} else {
		ev(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	ev(map[string]any{"type": "content_block_stop", "index": 0})
	ev(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 1}})
	ev(map[string]any{"type": "message_stop"})
}

// toolResultText flattens a tool result's content to text: a string, or
// blocks with text (Anthropic's tool_result content, and the Responses
// API's function_call_output alike).
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// claudeBin returns the Claude Code executable: $RUBINOFS_CLAUDE, else
// claude on PATH. Without one the test skips, unless
// RUBINOFS_REQUIRE_CLAUDE=1 (CI installs it from npm) makes that a failure.
func claudeBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("RUBINOFS_CLAUDE")
	if p == "" {
		p, _ = exec.LookPath("claude")
	}
	if p == "" {
		if os.Getenv("RUBINOFS_REQUIRE_CLAUDE") == "1" {
			t.Fatal("RUBINOFS_REQUIRE_CLAUDE=1 but no Claude Code: set RUBINOFS_CLAUDE or put claude on PATH (npm i @anthropic-ai/claude-code)")
		}
		t.Skip("Claude Code not installed (npm i @anthropic-ai/claude-code, or set RUBINOFS_CLAUDE)")
	}
	return p
}

// claudeOption adjusts how runClaude starts Claude Code.
type claudeOption func(*claudeRun)

// claudeRun is runClaude's configuration.
type claudeRun struct {
	harness bool // under `rubinofs run --harness`, with the hooks set up
}

// asHarness runs Claude Code as the agent harness of a session of its own
// (`rubinofs run --harness -- claude ...`), with rubinofs's hooks merged
// into the workspace's .claude/settings.json by `rubinofs setup
// claude-code` first, as docs/agents.md tells a user to.
func asHarness() claudeOption { return func(r *claudeRun) { r.harness = true } }

// runClaude runs Claude Code in print mode in the mount's directory dir
// against model, with every tool permitted, and returns its output. The
// context deadline is a hang detector (a hung mount is what these tests
// exist to catch), not a timing assertion.
func runClaude(t *testing.T, m *mount, dir string, model *scriptedModel, opts ...claudeOption) string {
	t.Helper()
	bin := claudeBin(t)
	var run claudeRun
	for _, o := range opts {
		o(&run)
	}
	home := filepath.Join(m.tmp, "claude-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	launch := shq(bin)
	if run.harness {
		if out, err := cli(t, m.tmp, "setup", "claude-code", "--mount", m.mnt); err != nil {
			t.Fatalf("rubinofs setup claude-code: %v\n%s", err, out)
		}
		launch = shq(rubinofsBin(t)) + " run --harness --mount " + shq(m.mnt) + " -- " + launch
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := fmt.Sprintf("cd %s && exec %s -p 'work through the script' --dangerously-skip-permissions --output-format json </dev/null",
		shq(m.path(dir)), launch)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Dir = m.tmp
	cmd.Env = claudeEnv(home, model)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("Claude Code hung in the mount (killed after 3m); output:\n%s", out)
	}
	if err != nil {
		t.Fatalf("Claude Code: %v\n%s", err, out)
	}
	return string(out)
}

// claudeEnv is the environment runClaude runs Claude Code with: a fresh
// home, the scripted model as its API, and no traffic but to it.
func claudeEnv(home string, model *scriptedModel) []string {
	return append(testEnv(home),
		"ANTHROPIC_BASE_URL="+model.srv.URL,
		"ANTHROPIC_API_KEY=sk-rubinofs-test",
		"IS_SANDBOX=1", // --dangerously-skip-permissions as root
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
	)
}

// reportOf returns what the model was told of scripted step i: the
// messages (raw JSON, one a line) of the request that reported it back,
// from the one carrying the step's tool_result on, so with whatever hooks
// added after it; it fails the test when no request did.
func (sm *scriptedModel) reportOf(t *testing.T, i int) string {
	t.Helper()
	sm.mu.Lock()
	body, ok := sm.bodies[i+1]
	sm.mu.Unlock()
	if !ok {
		t.Fatalf("no request reported step %d back to the model", i)
	}
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatalf("the request after step %d: %v", i, err)
	}
	id := fmt.Sprintf("%q", fmt.Sprintf("toolu_step%02d", i))
	for at, m := range req.Messages {
		if strings.Contains(string(m), `"tool_result"`) && strings.Contains(string(m), id) {
			var b strings.Builder
			for _, m := range req.Messages[at:] {
				b.Write(m)
				b.WriteByte('\n')
			}
			return b.String()
		}
	}
	t.Fatalf("the request after step %d does not carry its result", i)
	return ""
}
