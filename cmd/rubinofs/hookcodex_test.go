package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// TestCodexHookDenials: Codex's events (the payloads of Codex 0.169, as
// its hooks receive them). A denial during a call that gets a PostToolUse
// is reported there; a denial during a call that gets none (a refused
// apply_patch: Codex runs no hook after a failed call) is reported once by
// the next PreToolUse, as "the previous tool call"; a call without one
// prints nothing; a Stop after a refused last call blocks once with the
// refusal as the reason; no state is left behind. The output is the
// hookSpecificOutput object (or, for Stop, the decision) Codex parses.
func TestCodexHookDenials(t *testing.T) {
	mnt := fakeMount(t)
	denials := filepath.Join(mnt, ctltree.DirName, "self/denials")
	logDenial := func(path string) {
		b, _ := json.Marshal(guard.Denial{Time: time.Now(), Op: guard.OpOpenTrunc, Code: guard.CodeUnread, Path: path,
			Message: "refusing to overwrite " + path + ": read it first"})
		f, _ := os.OpenFile(denials, os.O_APPEND|os.O_WRONLY, 0)
		f.Write(append(b, '\n'))
		f.Close()
	}
	call := func(event, tool, id string) string {
		in := `{"command":"echo x > f; true"}`
		resp := `,"tool_response":"/bin/bash: line 1: f: Permission denied\n"`
		if tool == "apply_patch" {
			in, resp = `{"command":"*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n"}`, ""
		}
		if event == "PreToolUse" {
			resp = ""
		}
		ev := `{"session_id":"01a20cc8-4045-78a1-bc82-8c5791d70b3c","turn_id":"t","transcript_path":null,"cwd":"` + mnt +
			`","hook_event_name":"` + event + `","model":"gpt-5.5","permission_mode":"bypassPermissions","tool_name":"` + tool +
			`","tool_input":` + in + resp + `,"tool_use_id":"` + id + `"}`
		var out bytes.Buffer
		if err := runCodexHook(strings.NewReader(ev), &out, mnt); err != nil {
			t.Fatalf("%s %s: %v", event, id, err)
		}
		return out.String()
	}
	context := func(out, event string) string {
		t.Helper()
		var o struct {
			HookSpecificOutput struct {
				HookEventName     string `json:"hookEventName"`
				AdditionalContext string `json:"additionalContext"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal([]byte(out), &o); err != nil || o.HookSpecificOutput.HookEventName != event {
			t.Fatalf("hook output %q: want a %s hookSpecificOutput (%v)", out, event, err)
		}
		return o.HookSpecificOutput.AdditionalContext
	}
	logDenial("before.txt") // older than any call: never reported

	if out := call("PreToolUse", "Bash", "call_1"); out != "" {
		t.Errorf("the first PreToolUse printed %q", out)
	}
	logDenial("f.txt")
	if got := context(call("PostToolUse", "Bash", "call_1"), "PostToolUse"); !strings.Contains(got, "during this tool call") ||
		!strings.Contains(got, "f.txt") || strings.Contains(got, "before.txt") {
		t.Errorf("PostToolUse after a denial: context %q, want the f.txt denial only", got)
	}

	call("PreToolUse", "apply_patch", "call_2")
	logDenial("a.txt") // the patch is refused: no PostToolUse follows
	got := context(call("PreToolUse", "Bash", "call_3"), "PreToolUse")
	if !strings.Contains(got, "during the previous tool call") || !strings.Contains(got, "a.txt") || strings.Contains(got, "f.txt") {
		t.Errorf("PreToolUse after a call without a post event: context %q, want the a.txt denial only", got)
	}
	if out := call("PostToolUse", "Bash", "call_3"); out != "" {
		t.Errorf("a call without a denial printed %q (the a.txt denial again?)", out)
	}
	call("PreToolUse", "Bash", "call_4")
	if out := call("PostToolUse", "Bash", "call_4"); out != "" {
		t.Errorf("a later call printed %q", out)
	}
	stop := func() string {
		ev := `{"session_id":"01a20cc8-4045-78a1-bc82-8c5791d70b3c","turn_id":"t","cwd":"` + mnt +
			`","hook_event_name":"Stop","model":"gpt-5.5","stop_hook_active":false,"last_assistant_message":"done"}`
		var out bytes.Buffer
		if err := runCodexHook(strings.NewReader(ev), &out, mnt); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		return out.String()
	}
	if out := stop(); out != "" {
		t.Errorf("Stop after calls that were all reported printed %q", out)
	}
	// A refused patch as the last call: the stop is blocked once, with
	// the refusal as the reason.
	call("PreToolUse", "apply_patch", "call_5")
	logDenial("b.txt")
	var block struct{ Decision, Reason string }
	if out := stop(); json.Unmarshal([]byte(out), &block) != nil || block.Decision != "block" ||
		!strings.Contains(block.Reason, "during your last tool call") || !strings.Contains(block.Reason, "b.txt") || strings.Contains(block.Reason, "a.txt") {
		t.Errorf("Stop after a refused last call printed %q, want a block with the b.txt refusal", out)
	}
	if out := stop(); out != "" {
		t.Errorf("a second Stop printed %q, want nothing (block once)", out)
	}
	if left, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "rubinofs-hooks", "*", "*")); len(left) != 0 {
		t.Errorf("state left after the calls: %v", left)
	}
}

// TestSetupCodexHooksFile: `rubinofs setup codex` writes PreToolUse,
// PostToolUse and Stop entries into hooks.json, keeps the user's hooks, adds
// nothing twice, and leaves a Claude Code entry of rubinofs (another
// agent) alone.
func TestSetupCodexHooksFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "codex-home", "hooks.json")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	user := `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]},
	  {"matcher": "*", "hooks": [{"type": "command", "command": "rubinofs hook claude-code"}]}],
	  "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}`
	if err := os.WriteFile(file, []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := "/opt/bin/rubinofs hook codex"
	changes, err := setupHooksFile(file, cmd, "codex", codexHookEvents)
	if err != nil || len(changes) != len(codexHookEvents) {
		t.Fatalf("setupHooksFile = %q, %v; want one addition per event", changes, err)
	}
	b, _ := os.ReadFile(file)
	got := hookCommands(t, b)
	for _, ev := range codexHookEvents {
		if n := strings.Count(strings.Join(got[ev], "\n"), "* command "+cmd); n != 1 {
			t.Errorf("%s has %d rubinofs codex hooks, want 1: %q", ev, n, got[ev])
		}
	}
	for _, want := range []string{"Bash command audit.sh", "* command rubinofs hook claude-code"} {
		if !strings.Contains(strings.Join(got["PreToolUse"], "\n"), want) {
			t.Errorf("PreToolUse lost %q: %q", want, got["PreToolUse"])
		}
	}
	if !strings.Contains(strings.Join(got["Stop"], "\n"), "notify-send done") || len(got["PostToolUseFailure"]) != 0 {
		t.Errorf("other events changed: %q", got)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want the user's 0600 kept", st.Mode().Perm())
	}
	if changes, err := setupHooksFile(file, cmd, "codex", codexHookEvents); err != nil || len(changes) != 0 {
		t.Errorf("second setup = %q, %v; want no change", changes, err)
	}
	if changes, err := setupHooksFile(file, "/usr/bin/rubinofs hook codex", "codex", codexHookEvents); err != nil || len(changes) != len(codexHookEvents) ||
		!strings.Contains(changes[0], "updated") {
		t.Errorf("setup from another path = %q, %v; want every entry updated in place", changes, err)
	}
}
