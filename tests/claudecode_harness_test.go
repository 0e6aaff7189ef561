package tests

// Claude Code as the agent harness of its session (`rubinofs run --harness
// -- claude`) with rubinofs's hooks set up (`rubinofs setup claude-code`):
// the guard counts only what reached the model (its Read tool, declared by
// the hook, and reads by the commands it runs), and a refusal reaches the
// model with the reason, as the hook's additional context. Each test
// checks what a user would: the bytes on disk, the tool result, and the
// request the model server got after the step.

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// refusalReport is the text the hook adds to the model's next request for
// a refused write (cmd/rubinofs/hook.go's denialContext).
const refusalReport = "rubinofs refused"

// TestClaudeHarnessBlindBashOverwrite: a blind overwrite through Bash is
// refused and the model is told why, both when the command fails
// (`>>`: PostToolUseFailure) and when it exits 0 anyway (`; true`:
// PostToolUse); a step without a refusal gets no such report.
func TestClaudeHarnessBlindBashOverwrite(t *testing.T) {
	claudeBin(t)
	m := newMount(t, map[string]string{"b.txt": "never read\n", "c.txt": "never read either\n"}, nil)
	model := newScriptedModel(t,
		bash("echo clobber > b.txt; true"),
		bash("echo more >> c.txt"),
		bash("echo fine > new.txt"),
	)
	runClaude(t, m, "", model, asHarness())

	if out, _ := model.mustStep(t, 0); !strings.Contains(out, "Permission denied") {
		t.Errorf("echo > b.txt over a never-read file: want Permission denied; got\n%s", out)
	}
	if got := m.readBacking("b.txt"); got != "never read\n" {
		t.Errorf("b.txt after a refused overwrite = %q, want its bytes intact", got)
	}
	if rep := model.reportOf(t, 0); !strings.Contains(rep, refusalReport) || !strings.Contains(rep, "b.txt") || !strings.Contains(rep, "read it first") {
		t.Errorf("the request after a refused `echo > b.txt; true` does not tell the model why:\n%s", rep)
	}
	if out, isErr := model.mustStep(t, 1); !isErr || !strings.Contains(out, "Permission denied") {
		t.Errorf("echo >> c.txt over a never-read file: want a failed step with Permission denied; got (error %v)\n%s", isErr, out)
	}
	if rep := model.reportOf(t, 1); !strings.Contains(rep, refusalReport) || !strings.Contains(rep, "c.txt") {
		t.Errorf("the request after a failed `echo >> c.txt` does not tell the model why:\n%s", rep)
	}
	if got := m.readBacking("c.txt"); got != "never read either\n" {
		t.Errorf("c.txt after a refused append = %q, want its bytes intact", got)
	}
	if out, isErr := model.mustStep(t, 2); isErr {
		t.Errorf("creating new.txt failed: %s", out)
	}
	if rep := model.reportOf(t, 2); strings.Contains(rep, refusalReport) {
		t.Errorf("a step without a refusal was reported as refused:\n%s", rep)
	}
}

// TestClaudeHarnessReadThenEdit: the Read tool's read, declared by the
// hook, lets the Edit tool replace the file, and its own edit keeps the
// next one passing. A file with CRLF line ends, which Claude Code shows
// the model with LF, counts as read too, and so does one whose name holds
// a space (the declaration quotes it).
func TestClaudeHarnessReadThenEdit(t *testing.T) {
	claudeBin(t)
	m := newMount(t, map[string]string{"notes.txt": "alpha\nbeta\n", "dos.txt": "one\r\ntwo\r\n", "my notes.txt": "left\n"}, nil)
	notes, dos, spaced := m.path("notes.txt"), m.path("dos.txt"), m.path("my notes.txt")
	model := newScriptedModel(t,
		toolCall{Name: "Read", Input: map[string]any{"file_path": notes}},
		toolCall{Name: "Edit", Input: map[string]any{"file_path": notes, "old_string": "alpha", "new_string": "gamma"}},
		toolCall{Name: "Edit", Input: map[string]any{"file_path": notes, "old_string": "beta", "new_string": "delta"}},
		toolCall{Name: "Read", Input: map[string]any{"file_path": dos}},
		toolCall{Name: "Edit", Input: map[string]any{"file_path": dos, "old_string": "one", "new_string": "uno"}},
		toolCall{Name: "Read", Input: map[string]any{"file_path": spaced}},
		toolCall{Name: "Edit", Input: map[string]any{"file_path": spaced, "old_string": "left", "new_string": "right"}},
	)
	runClaude(t, m, "", model, asHarness())
	for _, i := range []int{1, 2, 4, 6} {
		if out, isErr := model.mustStep(t, i); isErr {
			t.Errorf("step %d, an Edit after a Read, was refused: %s", i, out)
		}
	}
	if got := m.readBacking("notes.txt"); got != "gamma\ndelta\n" {
		t.Errorf("notes.txt after Read, Edit, Edit = %q, want %q", got, "gamma\ndelta\n")
	}
	if got := m.readBacking("dos.txt"); !strings.HasPrefix(got, "uno") {
		t.Errorf("dos.txt after Read, Edit = %q, want the edit", got)
	}
	if got := m.readBacking("my notes.txt"); got != "right\n" {
		t.Errorf("my notes.txt after Read, Edit = %q, want %q", got, "right\n")
	}
}

// TestClaudeHarnessExternalEditThenBashRewrite: after the model read a
// file, an edit from outside the agent makes its view stale; Claude Code's
// own re-read of the file before the next Bash command (its diff snapshot)
// does not reach the model, so a rewrite through Bash is refused as stale
// and the external edit survives. After the model reads it again, the
// rewrite passes.
func TestClaudeHarnessExternalEditThenBashRewrite(t *testing.T) {
	claudeBin(t)
	m := newMount(t, map[string]string{"notes.txt": "alpha\n"}, nil)
	notes := m.path("notes.txt")
	model := newScriptedModel(t,
		toolCall{Name: "Read", Input: map[string]any{"file_path": notes}},
		toolCall{Name: "Bash", Input: map[string]any{"command": "echo rewritten > notes.txt; echo write-exit=$?", "description": "scripted step"},
			Before: func() {
				mark := m.appliedMark()
				m.writeBacking("notes.txt", "edited outside the agent\n")
				m.waitApplied(mark, "notes.txt")
			}},
		toolCall{Name: "Read", Input: map[string]any{"file_path": notes}},
		bash("echo rewritten > notes.txt; echo write-exit=$?"),
	)
	runClaude(t, m, "", model, asHarness())
	if out, _ := model.mustStep(t, 1); !strings.Contains(out, "Permission denied") || strings.Contains(out, "write-exit=0") {
		t.Errorf("a Bash rewrite after an external edit: want Permission denied; got\n%s", out)
	}
	if rep := model.reportOf(t, 1); !strings.Contains(rep, refusalReport) || !strings.Contains(rep, "stale") {
		t.Errorf("the request after the stale rewrite does not tell the model why:\n%s", rep)
	}
	if out, _ := model.mustStep(t, 2); !strings.Contains(out, "edited outside the agent") {
		t.Errorf("the second Read did not show the external edit:\n%s", out)
	}
	if out, _ := model.mustStep(t, 3); !strings.Contains(out, "write-exit=0") {
		t.Errorf("a Bash rewrite after reading the current bytes was refused:\n%s", out)
	}
	if got := m.readBacking("notes.txt"); got != "rewritten\n" {
		t.Errorf("notes.txt = %q, want the rewrite that followed the second Read", got)
	}
}

// TestClaudeHarnessGrepThenBlindWrite: a recursive grep reads every file
// of the tree, but the model saw only the matching lines: a blind write
// after it is refused, to a file with a match as to one without. In
// Claude Code's Bash tool `grep` is a shell function that runs the
// ugrep built into Claude Code's own executable (`exec -a ugrep
// claude.exe ...`); `command grep` is GNU grep. Both are scanners.
func TestClaudeHarnessGrepThenBlindWrite(t *testing.T) {
	claudeBin(t)
	files := map[string]string{
		"a/app.txt":   "a line with the needle in it\n",
		"a/lib.txt":   "no match here\n",
		"b/other.txt": "another needle\n",
	}
	m := newMount(t, files, nil)
	model := newScriptedModel(t,
		bash("type grep | head -1; grep -rn needle a ; echo grep-exit=$?"),
		bash("echo clobber > a/app.txt; echo write-exit=$?"),
		bash("echo clobber > a/lib.txt; echo write-exit=$?"),
		bash("command grep -rn needle b ; echo grep-exit=$?"),
		bash("echo clobber > b/other.txt; echo write-exit=$?"),
	)
	runClaude(t, m, "", model, asHarness())
	if out, _ := model.mustStep(t, 0); !strings.Contains(out, "a/app.txt") || !strings.Contains(out, "grep-exit=0") {
		t.Errorf("grep -rn: want a match in a/app.txt; got\n%s", out)
	}
	if out, _ := model.mustStep(t, 3); !strings.Contains(out, "b/other.txt") || !strings.Contains(out, "grep-exit=0") {
		t.Errorf("command grep -rn: want a match in b/other.txt; got\n%s", out)
	}
	for i, name := range map[int]string{1: "a/app.txt", 2: "a/lib.txt", 4: "b/other.txt"} {
		if out, _ := model.mustStep(t, i); !strings.Contains(out, "Permission denied") {
			t.Errorf("a blind write to %s after a recursive grep: want Permission denied; got\n%s", name, out)
		}
		if rep := model.reportOf(t, i); !strings.Contains(rep, refusalReport) || !strings.Contains(rep, name) {
			t.Errorf("the request after the refused write to %s does not tell the model why:\n%s", name, rep)
		}
		if got := m.readBacking(name); got != files[name] {
			t.Errorf("%s = %q, want it intact", name, got)
		}
	}
}

// TestClaudeHarnessWriteToolNeedsRead: the Write tool reads the file
// itself right before it replaces it, but that read is the harness's, not
// the model's: over a never-read file it is refused, and after a Read it
// passes.
func TestClaudeHarnessWriteToolNeedsRead(t *testing.T) {
	claudeBin(t)
	m := newMount(t, map[string]string{"b.txt": "never read\n"}, nil)
	b := m.path("b.txt")
	write := toolCall{Name: "Write", Input: map[string]any{"file_path": b, "content": "written by the model\n"}}
	model := newScriptedModel(t,
		write,
		toolCall{Name: "Read", Input: map[string]any{"file_path": b}},
		write,
	)
	runClaude(t, m, "", model, asHarness())
	if out, isErr := model.mustStep(t, 0); !isErr {
		t.Errorf("the Write tool over a never-read file passed: %s", out)
	}
	if rep := model.reportOf(t, 0); !strings.Contains(rep, refusalReport) || !strings.Contains(rep, "b.txt") {
		t.Errorf("the request after the refused Write does not tell the model why:\n%s", rep)
	}
	if out, isErr := model.mustStep(t, 2); isErr {
		t.Errorf("the Write tool after a Read was refused: %s", out)
	}
	if got := m.readBacking("b.txt"); got != "written by the model\n" {
		t.Errorf("b.txt = %q, want the Write after the Read", got)
	}
}

// TestClaudeHarnessGitCheckout: a branch switch over files the session
// never read passes (git-safe), with no refusal reported to the model.
func TestClaudeHarnessGitCheckout(t *testing.T) {
	claudeBin(t)
	m := newMount(t, nil, nil)
	gitRepoBacking(t, m.ws)
	model := newScriptedModel(t,
		bash("git checkout -q feature ; echo checkout-exit=$?"),
		bash("git status --porcelain --untracked-files=no ; echo status-exit=$?"),
	)
	runClaude(t, m, "", model, asHarness())
	if out, _ := model.mustStep(t, 0); strings.TrimSpace(out) != "checkout-exit=0" {
		t.Errorf("git checkout feature: want exit 0 and no output; got\n%s", out)
	}
	if strings.Contains(model.reportOf(t, 0), refusalReport) {
		t.Errorf("a refusal was reported for git checkout:\n%s", model.reportOf(t, 0))
	}
	if out, _ := model.mustStep(t, 1); strings.TrimSpace(out) != "status-exit=0" {
		t.Errorf("git status after the switch: want a clean tree; got\n%s", out)
	}
	if got := m.readBacking("changed.txt"); got != "feature version\n" {
		t.Errorf("changed.txt after the branch switch = %q, want the feature branch's bytes", got)
	}
	if got := m.readBacking("new.txt"); got != "only on feature\n" {
		t.Errorf("new.txt = %q, want the feature branch's file", got)
	}
}

// TestHookAndSetupThroughMount drives the two commands as Claude Code
// would, without Claude Code: `rubinofs setup claude-code` installs the
// hook once (a second run changes nothing), and `rubinofs hook claude-code`
// run in the agent's session around a refused write reports it, even
// though the command exited 0.
func TestHookAndSetupThroughMount(t *testing.T) {
	m := newMount(t, map[string]string{"b.txt": "never read\n"}, nil)
	out, err := cli(t, m.tmp, "setup", "claude-code", "--mount", m.mnt)
	if err != nil || strings.Count(out, "added the ") != 3 {
		t.Fatalf("setup claude-code: %v\n%s", err, out)
	}
	if out, err := cli(t, m.tmp, "setup", "claude-code", "--mount", m.mnt); err != nil || !strings.Contains(out, "unchanged") {
		t.Errorf("a second setup claude-code: %v\n%s", err, out)
	}
	if got := m.readBacking(".claude/settings.json"); !strings.Contains(got, "hook claude-code") {
		t.Errorf(".claude/settings.json after setup:\n%s", got)
	}
	event := func(name string) string {
		p := m.tmp + "/" + name + ".json"
		ev := `{"session_id":"s1","cwd":"` + m.mnt + `","hook_event_name":"` + name + `","tool_name":"Bash",` +
			`"tool_input":{"command":"echo x > b.txt; true"},"tool_response":{"stdout":""},"tool_use_id":"toolu_1"}`
		if err := os.WriteFile(p, []byte(ev), 0o644); err != nil {
			t.Fatal(err)
		}
		return shq(p)
	}
	bin := shq(rubinofsBin(t))
	script := bin + " hook claude-code < " + event("PreToolUse") + " && (echo x > b.txt; true) 2>/dev/null && " +
		bin + " hook claude-code < " + event("PostToolUse")
	env := append(testEnv(m.tmp), "XDG_RUNTIME_DIR="+m.tmp)
	out, err = runCLI(t, m.mnt, env, "run", "--mount", m.mnt, "--", "/bin/sh", "-c", script)
	if err != nil {
		t.Fatalf("the hooks around a refused write: %v\n%s", err, out)
	}
	var res struct {
		HookSpecificOutput struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("the PostToolUse hook's output is not the JSON Claude Code takes: %v\n%s", err, out)
	}
	if c := res.HookSpecificOutput; c.HookEventName != "PostToolUse" || !strings.Contains(c.AdditionalContext, "b.txt") || !strings.Contains(c.AdditionalContext, "read it first") {
		t.Errorf("the PostToolUse hook's output = %+v, want the refusal of b.txt", c)
	}
	if got := m.readBacking("b.txt"); got != "never read\n" {
		t.Errorf("b.txt = %q, want it intact", got)
	}
}
