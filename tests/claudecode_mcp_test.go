package tests

// Claude Code with rubinofs's MCP server (`rubinofs mcp`), configured the
// way a user does it: `rubinofs setup claude-code --mcp` (the project's
// .mcp.json, approved in .claude/settings.json), or `rubinofs agent
// claude-code` from an unmounted project. The scripted model calls the
// server's tools as mcp__rubinofs__TOOL; each test checks what the model
// was shown (the tool results Claude Code sent back) and what is on disk.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// checkpointID finds a checkpoint id (cp000003) in a tool result.
var checkpointID = regexp.MustCompile(`cp[0-9]{6}`)

// mcpCall is the scripted call of the rubinofs MCP server's tool.
func mcpCall(tool string, input map[string]any) toolCall {
	if input == nil {
		input = map[string]any{}
	}
	return toolCall{Name: "mcp__rubinofs__" + tool, Input: input}
}

// TestClaudeCodeMCPCheckpointChangesRewind: through MCP alone the model
// marks a checkpoint, edits and creates files with Bash, lists what it
// changed since the checkpoint, and rewinds to it: it is shown the
// checkpoint's id, the changed paths and the rewind's report, and the
// workspace is back as it was at the checkpoint.
func TestClaudeCodeMCPCheckpointChangesRewind(t *testing.T) {
	claudeBin(t)
	m := newMount(t, map[string]string{"notes.txt": "alpha\n"}, nil)
	out, err := cli(t, m.tmp, "setup", "claude-code", "--mcp", "--mount", m.mnt)
	if err != nil || !strings.Contains(out, `.mcp.json: added the MCP server "rubinofs"`) {
		t.Fatalf("rubinofs setup claude-code --mcp: %v\n%s", err, out)
	}
	// cp is the checkpoint id step 0 showed the model.
	cp := func(l *stepLog) string {
		text, _, _ := l.result(0)
		return checkpointID.FindString(text)
	}
	edited := make(chan string, 1) // notes.txt after the Bash step
	model := newScriptedModel(t,
		mcpCall("checkpoint", map[string]any{"label": "before the edit"}),
		bash("cat notes.txt && echo edited > notes.txt && echo new > added.txt; echo edit-exit=$?"),
		toolCall{Name: "mcp__rubinofs__changes", Before: func() { edited <- m.readBacking("notes.txt") }, Inputs: func(l *stepLog) map[string]any { return map[string]any{"since": cp(l)} }},
		toolCall{Name: "mcp__rubinofs__rewind", Inputs: func(l *stepLog) map[string]any { return map[string]any{"to": cp(l)} }},
	)
	runClaude(t, m, "", model, asHarness())

	text, isErr := model.mustStep(t, 0)
	if isErr || cp(&model.stepLog) == "" {
		t.Fatalf("mcp__rubinofs__checkpoint: want a checkpoint id; got (error %v)\n%s", isErr, text)
	}
	if text, _ := model.mustStep(t, 1); !strings.Contains(text, "edit-exit=0") {
		t.Fatalf("the Bash edit after cat failed:\n%s", text)
	}
	if got := <-edited; got != "edited\n" {
		t.Fatalf("notes.txt after the Bash edit = %q", got)
	}
	if text, isErr := model.mustStep(t, 2); isErr || !strings.Contains(text, "notes.txt") || !strings.Contains(text, "added.txt") {
		t.Errorf("mcp__rubinofs__changes since %s: want notes.txt and added.txt; got (error %v)\n%s", cp(&model.stepLog), isErr, text)
	}
	text, isErr = model.mustStep(t, 3)
	if isErr || !strings.Contains(text, "notes.txt") || !strings.Contains(text, "added.txt") {
		t.Errorf("mcp__rubinofs__rewind to %s: want a report naming notes.txt and added.txt; got (error %v)\n%s", cp(&model.stepLog), isErr, text)
	}
	for i := 0; i < 4; i++ {
		text, _, _ := model.result(i)
		t.Logf("step %d (%s) showed the model:\n%s", i, model.names[i], text)
	}
	if got := m.readBacking("notes.txt"); got != "alpha\n" {
		t.Errorf("notes.txt after the rewind = %q, want the checkpoint's %q", got, "alpha\n")
	}
	if _, err := os.Stat(m.backing("added.txt")); !os.IsNotExist(err) {
		t.Errorf("added.txt still exists after the rewind to a checkpoint before it (err %v)", err)
	}
}

// TestClaudeCodeAgentCommand: `rubinofs agent claude-code` from an
// unmounted project starts the real Claude Code guarded (its Bash write to
// an unread file is refused and the hook tells the model why), with the
// MCP server reachable (its why tool names the refusal), and unmounts the
// project when Claude Code exits.
func TestClaudeCodeAgentCommand(t *testing.T) {
	bin := claudeBin(t)
	m, env := agentProject(t, map[string]string{"existing.txt": "the user's\n"})
	model := newScriptedModel(t,
		bash("echo clobber > existing.txt; echo write-exit=$?"),
		mcpCall("why", nil),
		mcpCall("status", nil),
	)
	env = append(claudeEnv(filepath.Join(m.tmp, "home"), model), env[len(env)-2:]...) // + XDG_STATE_HOME, CODEX_HOME
	out, code := agentRun(t, m, env, "--agent-bin", bin, "claude-code", "--",
		"-p", "work through the script", "--dangerously-skip-permissions", "--output-format", "json")
	if code != 0 {
		t.Fatalf("rubinofs agent claude-code: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "mounted "+m.mnt) || !strings.Contains(out, "unmounted "+m.mnt) {
		t.Errorf("want the project mounted in place and unmounted at the end:\n%s", out)
	}
	m.waitDaemon()
	if m.mounted() {
		t.Fatalf("%s still mounted after Claude Code exited", m.mnt)
	}
	if text, _ := model.mustStep(t, 0); !strings.Contains(text, "Permission denied") || strings.Contains(text, "write-exit=0") {
		t.Errorf("a blind overwrite of an unread file: want Permission denied; got\n%s", text)
	}
	if rep := model.reportOf(t, 0); !strings.Contains(rep, refusalReport) || !strings.Contains(rep, "existing.txt") {
		t.Errorf("the hook did not tell the model why the write was refused:\n%s", rep)
	}
	if got, _ := os.ReadFile(filepath.Join(m.mnt, "existing.txt")); string(got) != "the user's\n" {
		t.Errorf("existing.txt = %q, want it intact", got)
	}
	if text, isErr := model.mustStep(t, 1); isErr || !strings.Contains(text, "existing.txt") {
		t.Errorf("mcp__rubinofs__why: want the refusal of existing.txt; got (error %v)\n%s", isErr, text)
	}
	if text, isErr := model.mustStep(t, 2); isErr || !strings.Contains(text, "claude-code-") {
		t.Errorf("mcp__rubinofs__status: want the agent's session claude-code-…; got (error %v)\n%s", isErr, text)
	}
}

// TestClaudeCodeMCPApproval: interactive Claude Code starts a project's
// .mcp.json server only once it is approved. `rubinofs setup claude-code
// --mcp` approves it in the project's settings, which Claude Code honours
// once the user trusted the folder (its first question in a new one): then
// `claude mcp get` finds the server approved and connects to it; without
// setup's approval it is pending.
func TestClaudeCodeMCPApproval(t *testing.T) {
	bin := claudeBin(t)
	m := newMount(t, nil, nil)
	if out, err := cli(t, m.tmp, "setup", "claude-code", "--mcp", "--mount", m.mnt); err != nil {
		t.Fatalf("rubinofs setup claude-code --mcp: %v\n%s", err, out)
	}
	home := filepath.Join(m.tmp, "claude-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// The folder trusted, as Claude Code records the user's answer.
	trusted := `{"projects": {` + strconv.Quote(m.mnt) + `: {"hasTrustDialogAccepted": true}}}`
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(trusted), 0o600); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", "cd "+shq(m.mnt)+" && exec "+shq(bin)+" mcp get rubinofs </dev/null")
		cmd.Dir, cmd.Env = m.tmp, claudeEnv(home, newScriptedModel(t))
		out, _ := runCombined(t, cmd)
		return out
	}
	if out := status(); !strings.Contains(out, "Connected") {
		t.Errorf("claude mcp get rubinofs after setup --mcp in a trusted folder: want the server approved and connected; got\n%s", out)
	}
	settings := m.path(".claude/settings.json")
	b, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	unapproved := strings.Replace(string(b), `"enabledMcpjsonServers"`, `"notTheApprovalKey"`, 1)
	if err := os.WriteFile(settings, []byte(unapproved), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := status(); !strings.Contains(out, "Pending approval") {
		t.Errorf("claude mcp get rubinofs without setup's approval: want it pending; got\n%s", out)
	}
}

// TestClaudeCodeMCPViewsAndTasks: the rest of the server's tools, called
// by the model through Claude Code: read (the numbered bytes, then
// "unchanged" for the same read), a checkpoint and a Bash edit, the
// checkpoints list and the diff since the checkpoint, a background task
// spawned and waited for (its output shown), and sessions naming the
// model's own session.
func TestClaudeCodeMCPViewsAndTasks(t *testing.T) {
	claudeBin(t)
	m := newMount(t, map[string]string{"notes.txt": "alpha\nbeta\n"}, nil)
	if out, err := cli(t, m.tmp, "setup", "claude-code", "--mcp", "--mount", m.mnt); err != nil {
		t.Fatalf("rubinofs setup claude-code --mcp: %v\n%s", err, out)
	}
	cp := func(l *stepLog) string {
		text, _, _ := l.result(2)
		return checkpointID.FindString(text)
	}
	taskID := func(l *stepLog) string {
		text, _, _ := l.result(6)
		return strings.TrimSpace(text)
	}
	model := newScriptedModel(t,
		mcpCall("read", map[string]any{"path": "notes.txt"}),
		mcpCall("read", map[string]any{"path": "notes.txt"}),
		mcpCall("checkpoint", map[string]any{"label": "views"}),
		bash("echo gamma >> notes.txt; echo edit-exit=$?"),
		mcpCall("checkpoints", nil),
		toolCall{Name: "mcp__rubinofs__diff", Inputs: func(l *stepLog) map[string]any { return map[string]any{"since": cp(l)} }},
		mcpCall("task_spawn", map[string]any{"prompt": "echo from-the-task"}),
		toolCall{Name: "mcp__rubinofs__task_wait", Inputs: func(l *stepLog) map[string]any { return map[string]any{"id": taskID(l), "timeout_s": 120} }},
		mcpCall("sessions", nil),
	)
	runClaude(t, m, "", model, asHarness())

	want := []struct {
		step int
		re   string
	}{
		{0, `(?m)^\s+2\tbeta$`},
		{1, `unchanged since your last read`},
		{2, `cp[0-9]{6}`},
		{3, `edit-exit=0`},
		{4, `views`},
		{5, `(?m)^\+gamma$`},
		{6, `^\s*\S+\s*$`},
		{7, `(?s)done.*from-the-task`},
		{8, `(?m)^\* `},
	}
	for _, w := range want {
		text, isErr := model.mustStep(t, w.step)
		if isErr || !regexp.MustCompile(w.re).MatchString(text) {
			t.Errorf("step %d (%s): want %q, got (error %v):\n%s", w.step, model.names[w.step], w.re, isErr, text)
		}
	}
	if got := m.readBacking("notes.txt"); got != "alpha\nbeta\ngamma\n" {
		t.Errorf("notes.txt = %q after the model's read and edit", got)
	}
}
