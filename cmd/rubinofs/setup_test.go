package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hookCommands returns, per event, the commands of every hook in settings.
func hookCommands(t *testing.T, settings []byte) map[string][]string {
	t.Helper()
	var doc struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(settings, &doc); err != nil {
		t.Fatalf("settings are not JSON: %v\n%s", err, settings)
	}
	out := map[string][]string{}
	for ev, groups := range doc.Hooks {
		for _, g := range groups {
			for _, h := range g.Hooks {
				out[ev] = append(out[ev], g.Matcher+" "+h.Type+" "+h.Command)
			}
		}
	}
	return out
}

// TestSetupMergeKeepsUserSettings: the merge adds the rubinofs hook to each
// event beside the user's own hooks and settings, a second merge changes
// nothing, and a merge from another rubinofs path updates the entry in
// place instead of adding a second one.
func TestSetupMergeKeepsUserSettings(t *testing.T) {
	user := `{
  "model": "opus",
  "permissions": {"allow": ["Bash(npm test)"]},
  "hooks": {
    "PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  }
}`
	cmd := "/usr/local/bin/rubinofs hook claude-code"
	out, changes, err := mergeClaudeHooks([]byte(user), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 {
		t.Errorf("changes = %q, want one per event", changes)
	}
	got := hookCommands(t, out)
	for _, ev := range claudeHookEvents {
		if n := strings.Count(strings.Join(got[ev], "\n"), "* command "+cmd); n != 1 {
			t.Errorf("%s has the rubinofs hook %d times: %q", ev, n, got[ev])
		}
	}
	if !strings.Contains(strings.Join(got["PostToolUse"], "\n"), "Write|Edit command prettier --write") ||
		len(got["Stop"]) != 1 || got["Stop"][0] != " command notify-send done" {
		t.Errorf("the user's hooks were not kept: %q", got)
	}
	var doc map[string]any
	json.Unmarshal(out, &doc)
	if doc["model"] != "opus" || doc["permissions"] == nil {
		t.Errorf("the user's other settings were not kept:\n%s", out)
	}

	again, changes, err := mergeClaudeHooks(out, cmd)
	if err != nil || len(changes) != 0 || string(again) != string(out) {
		t.Errorf("a second merge changed %q (err %v)", changes, err)
	}

	moved := "/opt/rubinofs/bin/rubinofs hook claude-code"
	out2, changes, err := mergeClaudeHooks(out, moved)
	if err != nil || len(changes) != 3 {
		t.Fatalf("merge from a moved binary: changes %q, err %v", changes, err)
	}
	got = hookCommands(t, out2)
	for _, ev := range claudeHookEvents {
		if j := strings.Join(got[ev], "\n"); strings.Contains(j, cmd) || strings.Count(j, moved) != 1 {
			t.Errorf("%s after the move: %q, want the new path once", ev, got[ev])
		}
	}
}

func TestSetupMergeRefusesWhatItCannotRead(t *testing.T) {
	for _, bad := range []string{`{"hooks": [1]}`, `{not json`, `{"hooks": {"PreToolUse": {}}}`} {
		if _, _, err := mergeClaudeHooks([]byte(bad), "rubinofs hook claude-code"); err == nil {
			t.Errorf("merge into %s: no error", bad)
		}
	}
	if out, changes, err := mergeClaudeHooks(nil, "rubinofs hook claude-code"); err != nil || len(changes) != 3 || len(hookCommands(t, out)) != 3 {
		t.Errorf("merge into no file: %v %q\n%s", err, changes, out)
	}
}

func TestIsRubinoHook(t *testing.T) {
	for cmd, want := range map[string]bool{
		"rubinofs hook claude-code":                 true,
		"/usr/bin/rubinofs hook claude-code":        true,
		"'/my dir/rubinofs' hook claude-code":       true,
		"rubinofs hook codex":                       false,
		"/usr/bin/other hook claude-code":           false,
		"rubinofs hook claude-code && echo spliced": false,
		"": false,
	} {
		if got := isRubinoHook(cmd, "claude-code"); got != want {
			t.Errorf("isRubinoHook(%q) = %v, want %v", cmd, got, want)
		}
	}
}

// TestSetupClaudeSettingsFile: setup creates the file and its directory,
// keeps an existing file's mode, and leaves a file it cannot parse alone.
func TestSetupClaudeSettingsFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, ".claude", "settings.json")
	if changes, err := setupClaudeSettings(file, "rubinofs hook claude-code"); err != nil || len(changes) != 3 {
		t.Fatalf("setup into a missing file: %q, %v", changes, err)
	}
	os.Chmod(file, 0o600)
	if changes, err := setupClaudeSettings(file, "/bin/rubinofs hook claude-code"); err != nil || len(changes) != 3 {
		t.Fatalf("setup with a new path: %q, %v", changes, err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("mode after setup = %v, want 0600 kept", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".claude", ".settings.json.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	os.WriteFile(file, []byte("{broken"), 0o644)
	if _, err := setupClaudeSettings(file, "rubinofs hook claude-code"); err == nil {
		t.Error("setup over a broken file: no error")
	}
	if b, _ := os.ReadFile(file); string(b) != "{broken" {
		t.Errorf("a broken settings file was changed: %q", b)
	}
}

// TestSetupPromptCheckpointHook: setup claude-code also adds the prompt
// checkpoint hook (UserPromptSubmit, no matcher, its own short timeout)
// beside the tool hooks, once; a settings file set up before it gets only
// that entry added.
func TestSetupPromptCheckpointHook(t *testing.T) {
	file := filepath.Join(t.TempDir(), "settings.json")
	cmd := "/usr/bin/rubinofs hook claude-code"
	if _, err := setupClaudeSettings(file, cmd); err != nil { // the tool hooks only, as an older setup left them
		t.Fatal(err)
	}
	changes, err := setupHooksFile(file, cmd, "claude-code", claudeSetupEvents)
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0], "checkpoint at every prompt (UserPromptSubmit hook): "+cmd) {
		t.Fatalf("setup over an older setup: %q, %v; want the prompt hook added alone", changes, err)
	}
	b, _ := os.ReadFile(file)
	var doc struct {
		Hooks map[string][]map[string]any `json:"hooks"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	groups := doc.Hooks["UserPromptSubmit"]
	if len(groups) != 1 || groups[0]["matcher"] != nil {
		t.Fatalf("UserPromptSubmit entries: %v, want one without a matcher", groups)
	}
	hook := groups[0]["hooks"].([]any)[0].(map[string]any)
	if hook["command"] != cmd || hook["timeout"].(float64) != claudePromptHookTimeout || claudePromptHookTimeout >= claudeHookTimeout {
		t.Errorf("the prompt hook = %v, want %s with timeout %d", hook, cmd, claudePromptHookTimeout)
	}
	if got := hookCommands(t, b); len(got) != 4 {
		t.Errorf("hooked events = %v, want the three tool events and the prompt", got)
	}
	if changes, err := setupHooksFile(file, cmd, "claude-code", claudeSetupEvents); err != nil || len(changes) != 0 {
		t.Errorf("a second setup: %q, %v; want nothing changed", changes, err)
	}
}
