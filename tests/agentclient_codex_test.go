package tests

// A second real agent client through the mount: Codex CLI (npm package
// @openai/codex), driven by a scripted local model that speaks the OpenAI
// Responses API (POST /v1/responses, streamed as server-sent events). Its
// answer to the n-th turn is the n-th scripted call: an exec_command
// function call (Codex runs the command in a child shell) or an apply_patch
// custom tool call (Codex applies the patch inside its own process: it
// reads the target, then rewrites it in place or unlinks it). Codex is
// started with `rubinofs run --harness`, so the guard sees what a user of
// Codex under rubinofs would see.

import (
	"bytes"
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

// codexCall is one scripted step of the model: a function call (Custom
// false; Input is the JSON arguments) or a freeform custom tool call
// (Custom true; Input is the raw text, as apply_patch takes it).
type codexCall struct {
	Name   string // "exec_command" or "apply_patch", as Codex's tool list names them
	Input  string
	Custom bool
	// Namespace, when set, is the call's tool namespace: an MCP server's
	// tools are deferred in a namespace (mcp__SERVER) named to the model,
	// and called by their own name in it.
	Namespace string
	// Inputs, when set, makes Input at the moment the model issues this
	// call, from the results so far (toolCall.Inputs).
	Inputs func(results *stepLog) string
	// Before, when set, runs just before the model issues this call: an
	// edit from outside the agent between two of its steps.
	Before func()
}

// before returns c with Before set to f.
func (c codexCall) before(f func()) codexCall {
	c.Before = f
	return c
}

// codexExec is the scripted exec_command call of the shell command cmd,
// run without a terminal and waited for (yield_time_ms at its maximum,
// which a short command never reaches).
func codexExec(cmd string) codexCall {
	in, _ := json.Marshal(map[string]any{"cmd": cmd, "tty": false, "login": false, "yield_time_ms": 30000})
	return codexCall{Name: "exec_command", Input: string(in)}
}

// codexPatch is the scripted apply_patch call of patch, the body between
// "*** Begin Patch" and "*** End Patch" (both added here).
func codexPatch(patch string) codexCall {
	return codexCall{Name: "apply_patch", Custom: true,
		Input: "*** Begin Patch\n" + strings.TrimSuffix(patch, "\n") + "\n*** End Patch\n"}
}

// codexModel is an OpenAI Responses API endpoint that answers Codex's
// turns from a script and records the tool outputs it is sent.
type codexModel struct {
	stepLog
	script []codexCall
	srv    *httptest.Server

	mu sync.Mutex
	// bodies are the request bodies of the turns that offered tools, in
	// the order they arrived: what the model was sent.
	bodies []string
}

// requests returns the bodies of the tool-bearing requests so far.
func (cm *codexModel) requests() []string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	return append([]string(nil), cm.bodies...)
}

// newCodexModel starts the model on a loopback port; it stops at the end
// of the test.
func newCodexModel(t *testing.T, script ...codexCall) *codexModel {
	t.Helper()
	names := make([]string, len(script))
	for i, c := range script {
		names[i] = c.Name
	}
	cm := &codexModel{stepLog: newStepLog("call_step%02d", names), script: script}
	cm.srv = httptest.NewServer(http.HandlerFunc(cm.serve))
	t.Cleanup(cm.srv.Close)
	return cm
}

func (cm *codexModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.NotFound(w, r) // model lists and the like: Codex falls back
		return
	}
	var req struct {
		Tools []json.RawMessage `json:"tools"`
		Input []struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.Tools) > 0 {
		cm.mu.Lock()
		cm.bodies = append(cm.bodies, string(body))
		cm.mu.Unlock()
	}
	// The step is the number of tool outputs the conversation carries:
	// each earlier step's call came back as exactly one.
	step := 0
	for _, it := range req.Input {
		if it.Type != "function_call_output" && it.Type != "custom_tool_call_output" {
			continue
		}
		step++
		// The Responses API has no error flag on an output: Codex says
		// so in the text (an exit code, "apply_patch verification
		// failed", the error).
		cm.record(it.CallID, toolResultText(it.Output), false)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(v map[string]any) {
		j, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], j)
	}
	id := fmt.Sprintf("resp_%d", step)
	ev(map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	var item map[string]any
	// Side requests (titles, summaries) carry no tools: they get text.
	if len(req.Tools) > 0 && step < len(cm.script) {
		call := cm.script[step]
		if call.Before != nil {
			call.Before()
		}
		if call.Inputs != nil {
			call.Input = call.Inputs(&cm.stepLog)
		}
		if call.Custom {
			item = map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_%d", step),
				"call_id": cm.callID(step), "name": call.Name, "input": call.Input, "status": "completed"}
		} else {
			item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", step),
				"call_id": cm.callID(step), "name": call.Name, "arguments": call.Input, "status": "completed"}
			if call.Namespace != "" {
				item["namespace"] = call.Namespace
			}
		}
		cm.issued()
	} else {
		item = map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%d", step),
			"status": "completed", "content": []any{map[string]any{"type": "output_text", "text": "done", "annotations": []any{}}}}
	}
	ev(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	ev(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	ev(map[string]any{"type": "response.completed", "response": map[string]any{"id": id,
		"usage": map[string]any{"input_tokens": 1, "input_tokens_details": nil, "output_tokens": 1,
			"output_tokens_details": nil, "total_tokens": 2}}})
}

// codexBin returns Codex's native executable, from $RUBINOFS_CODEX or
// codex on PATH. Without one the test skips, unless
// RUBINOFS_REQUIRE_CODEX=1 (CI installs it from npm) makes that a
// failure. npm installs a Node launcher (bin/codex.js) that, on a Node
// without process.execve (before 23.11), runs the native binary as its
// child: under `rubinofs run --harness` the harness root would then be
// Node, and Codex's own reads (apply_patch's) a descendant's. So a
// launcher is resolved to the native binary of the platform package
// beside it, as the launcher itself finds it.
func codexBin(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("RUBINOFS_REQUIRE_CODEX") == "1" {
			t.Fatalf("RUBINOFS_REQUIRE_CODEX=1 but %s (npm i @openai/codex)", what)
		}
		t.Skipf("Codex CLI not usable: %s (npm i @openai/codex, or set RUBINOFS_CODEX)", what)
	}
	p := os.Getenv("RUBINOFS_CODEX")
	if p == "" {
		p, _ = exec.LookPath("codex")
	}
	if p == "" {
		missing("no codex: set RUBINOFS_CODEX or put codex on PATH")
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		missing(fmt.Sprintf("%s: %v", p, err))
	}
	head := make([]byte, 2)
	if f, err := os.Open(real); err == nil {
		io.ReadFull(f, head)
		f.Close()
	}
	if !bytes.Equal(head, []byte("#!")) {
		return real // the native binary itself
	}
	// .../node_modules/@openai/codex/bin/codex.js: the platform package
	// (@openai/codex-linux-x64, -arm64) is a sibling of @openai/codex, or
	// nested in its own node_modules.
	pkg := filepath.Dir(filepath.Dir(real))
	for _, pattern := range []string{
		filepath.Join(filepath.Dir(pkg), "codex-linux-*", "vendor", "*", "bin", "codex"),
		filepath.Join(pkg, "node_modules", "@openai", "codex-linux-*", "vendor", "*", "bin", "codex"),
		filepath.Join(pkg, "vendor", "*", "bin", "codex"),
	} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0]
		}
	}
	missing(fmt.Sprintf("%s is a launcher script and no native codex binary lies beside it", p))
	return ""
}

// codexConfig is the config.toml of a fresh CODEX_HOME: the scripted model
// as the only provider, no approvals and no sandbox (rubinofs is the
// guard), a model slug whose bundled metadata gives Codex the freeform
// apply_patch tool, and no plugin marketplace (Codex would otherwise
// git ls-remote it from GitHub at start): the run stays offline.
const codexConfig = `model = "gpt-5.5"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[features]
plugins = false
remote_plugin = false

[model_providers.scripted]
name = "scripted"
base_url = %q
wire_api = "responses"
env_key = "RUBINOFS_TEST_CODEX_KEY"
`

// runCodex runs `codex exec` under `rubinofs run --harness --session codex`
// in the mount's directory dir against model and returns its output. The
// context deadline is a hang detector (a hung mount is what these tests
// exist to catch), not a timing assertion.
func runCodex(t *testing.T, m *mount, dir string, model *codexModel) string {
	t.Helper()
	return runCodexHooked(t, m, dir, model, false)
}

// runCodexHooked is runCodex; with hooks, rubinofs's hook is first
// installed into the fresh CODEX_HOME by `rubinofs setup codex
// --codex-home`, and Codex runs with --dangerously-bypass-hook-trust (a
// fresh home has not trusted any hook; a user trusts it once in Codex's
// /hooks instead).
func runCodexHooked(t *testing.T, m *mount, dir string, model *codexModel, hooks bool) string {
	t.Helper()
	bin := codexBin(t)
	home, err := os.MkdirTemp(m.tmp, "codex-home-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(fmt.Sprintf(codexConfig, model.srv.URL+"/v1")), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--harness", "--session", "codex", "--mount", m.mnt, "--",
		bin, "exec", "--skip-git-repo-check", "--color", "never", "-C", m.path(dir)}
	if hooks {
		setup := exec.Command(rubinofsBin(t), "setup", "codex", "--codex-home", home)
		if out, err := setup.CombinedOutput(); err != nil {
			t.Fatalf("rubinofs setup codex: %v\n%s", err, out)
		}
		args = append(args, "--dangerously-bypass-hook-trust")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rubinofsBin(t), append(args, "work through the script")...)
	cmd.Dir = m.path(dir)
	cmd.Env = append(testEnv(home), "CODEX_HOME="+home, "RUBINOFS_TEST_CODEX_KEY=sk-rubinofs-test")
	cmd.Stdin = nil // /dev/null: no piped prompt
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("Codex hung in the mount (killed after 3m); output:\n%s", out)
	}
	if err != nil {
		t.Fatalf("rubinofs run --harness -- codex exec: %v\n%s", err, out)
	}
	return string(out)
}
