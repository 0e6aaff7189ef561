package tests

// Codex CLI with rubinofs's MCP server, configured by `rubinofs setup codex
// --mcp` ([mcp_servers.rubinofs] in its config.toml).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCodexMCP runs `codex exec` as runCodexHooked does (the harness of
// session codex, the hook installed), with the MCP server added to its
// config.toml by `rubinofs setup codex --mcp` after the test's own
// settings, and returns its output.
func runCodexMCP(t *testing.T, m *mount, model *codexModel) string {
	t.Helper()
	bin := codexBin(t)
	home, err := os.MkdirTemp(m.tmp, "codex-home-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(fmt.Sprintf(codexConfig, model.srv.URL+"/v1")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(rubinofsBin(t), "setup", "codex", "--mcp", "--codex-home", home).CombinedOutput(); err != nil || !strings.Contains(string(out), "added the MCP server [mcp_servers.rubinofs]") {
		t.Fatalf("rubinofs setup codex --mcp: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rubinofsBin(t), "run", "--harness", "--session", "codex", "--mount", m.mnt, "--",
		bin, "exec", "--skip-git-repo-check", "--color", "never", "-C", m.mnt, "--dangerously-bypass-hook-trust", "work through the script")
	cmd.Dir = m.mnt
	cmd.Env = append(testEnv(home), "CODEX_HOME="+home, "RUBINOFS_TEST_CODEX_KEY=sk-rubinofs-test")
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

// codexMCP is the scripted call of the rubinofs MCP server's tool: Codex
// defers an MCP server's tools into the namespace mcp__SERVER, which the
// model calls them in; input makes the JSON arguments from the results
// so far.
func codexMCP(tool string, input func(*stepLog) map[string]any) codexCall {
	return codexCall{Name: tool, Namespace: "mcp__rubinofs", Inputs: func(l *stepLog) string {
		in := map[string]any{}
		if input != nil {
			in = input(l)
		}
		b, _ := json.Marshal(in)
		return string(b)
	}}
}

// TestCodexMCPCheckpointChangesRewind: Codex, with the server set up by
// `rubinofs setup codex --mcp`, offers the model the mcp__rubinofs
// namespace; through it the model marks a checkpoint, edits with a shell
// command, lists its changes and rewinds them, and is shown the
// checkpoint's id, the changed paths and the rewind's report; the
// workspace is back as it was.
func TestCodexMCPCheckpointChangesRewind(t *testing.T) {
	m := newMount(t, map[string]string{"notes.txt": "alpha\n"}, nil)
	cp := func(l *stepLog) string {
		text, _, _ := l.result(0)
		return checkpointID.FindString(text)
	}
	edited := make(chan string, 1) // notes.txt after the shell step
	model := newCodexModel(t,
		codexMCP("checkpoint", func(*stepLog) map[string]any { return map[string]any{"label": "before the edit"} }),
		codexExec("cat notes.txt && echo edited > notes.txt && echo new > added.txt; echo edit-exit=$?"),
		codexMCP("changes", func(l *stepLog) map[string]any { return map[string]any{"since": cp(l)} }).
			before(func() { edited <- m.readBacking("notes.txt") }),
		codexMCP("rewind", func(l *stepLog) map[string]any { return map[string]any{"to": cp(l)} }),
	)
	runCodexMCP(t, m, model)

	if reqs := model.requests(); len(reqs) == 0 || !strings.Contains(reqs[0], "mcp__rubinofs: rubinofs guards this workspace") {
		t.Fatalf("Codex did not offer the model the rubinofs server's namespace: the server from setup codex --mcp did not start")
	}
	text, _ := model.mustStep(t, 0)
	id := cp(&model.stepLog)
	if id == "" {
		t.Fatalf("checkpoint: want a checkpoint id; got\n%s", text)
	}
	if text, _ := model.mustStep(t, 1); !strings.Contains(text, "edit-exit=0") {
		t.Fatalf("the shell edit after cat failed:\n%s", text)
	}
	if got := <-edited; got != "edited\n" {
		t.Fatalf("notes.txt after the shell edit = %q", got)
	}
	if text, _ := model.mustStep(t, 2); !strings.Contains(text, "notes.txt") || !strings.Contains(text, "added.txt") {
		t.Errorf("changes since %s: want notes.txt and added.txt; got\n%s", id, text)
	}
	if text, _ := model.mustStep(t, 3); !strings.Contains(text, "restore") || !strings.Contains(text, "notes.txt") || !strings.Contains(text, "added.txt") {
		t.Errorf("rewind to %s: want a report naming notes.txt and added.txt; got\n%s", id, text)
	}
	if got := m.readBacking("notes.txt"); got != "alpha\n" {
		t.Errorf("notes.txt after the rewind = %q, want the checkpoint's %q", got, "alpha\n")
	}
	if _, err := os.Stat(m.backing("added.txt")); !os.IsNotExist(err) {
		t.Errorf("added.txt still exists after the rewind to a checkpoint before it (err %v)", err)
	}
}

// TestCodexAgentCommand: `rubinofs agent codex` from an unmounted project
// merges the hook and the MCP server into an existing CODEX_HOME (its
// settings kept), and starts the real Codex guarded: its shell write to an
// unread file is refused, the server's why tool names the refusal, and
// the project is unmounted when Codex exits.
func TestCodexAgentCommand(t *testing.T) {
	bin := codexBin(t)
	m, env := agentProject(t, map[string]string{"existing.txt": "the user's\n"})
	model := newCodexModel(t,
		codexExec("echo clobber > existing.txt; echo write-exit=$?"),
		codexMCP("why", nil),
	)
	home := filepath.Join(m.tmp, "codex-home") // agentProject's CODEX_HOME
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	user := fmt.Sprintf(codexConfig, model.srv.URL+"/v1")
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(env, "RUBINOFS_TEST_CODEX_KEY=sk-rubinofs-test")
	out, code := agentRun(t, m, env, "--agent-bin", bin, "codex", "--",
		"exec", "--skip-git-repo-check", "--color", "never", "--dangerously-bypass-hook-trust", "work through the script")
	if code != 0 {
		t.Fatalf("rubinofs agent codex: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "unmounted "+m.mnt) {
		t.Errorf("want the project unmounted at the end:\n%s", out)
	}
	m.waitDaemon()
	if m.mounted() {
		t.Fatalf("%s still mounted after Codex exited", m.mnt)
	}
	if config, _ := os.ReadFile(filepath.Join(home, "config.toml")); !strings.HasPrefix(string(config), user) || !strings.Contains(string(config), "[mcp_servers.rubinofs]") {
		t.Errorf("config.toml: want the user's settings as they were and the server added:\n%s", config)
	}
	if text, _ := model.mustStep(t, 0); !strings.Contains(text, "Permission denied") || strings.Contains(text, "write-exit=0") {
		t.Errorf("a blind overwrite of an unread file: want Permission denied; got\n%s", text)
	}
	if got, _ := os.ReadFile(filepath.Join(m.mnt, "existing.txt")); string(got) != "the user's\n" {
		t.Errorf("existing.txt = %q, want it intact", got)
	}
	if text, _ := model.mustStep(t, 1); !strings.Contains(text, "existing.txt") {
		t.Errorf("why: want the refusal of existing.txt; got\n%s", text)
	}
}
