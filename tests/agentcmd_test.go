package tests

// `rubinofs agent claude-code|codex`: one command starts an agent guarded
// in an unmounted project directory. These tests use a stand-in agent (a
// shell script given with --agent-bin) to check the command's own work:
// the in-place mount, the settings, the harness session, the exit status
// and the unmount; tests/claudecode_mcp_test.go runs it with the real
// Claude Code.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// agentProject makes tmp/proj holding files, an in-place mount target for
// `rubinofs agent` whose cleanup (cliMountAt's) unmounts it if the command
// left it mounted and waits for the daemons the test tracked.
func agentProject(t *testing.T, files map[string]string) (*cliMount, []string) {
	t.Helper()
	tmp := t.TempDir()
	proj := filepath.Join(tmp, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := cliMountAt(t, tmp, proj, filepath.Join(tmp, "state"))
	m.mnt = proj // in place
	ownMounts.add(proj)
	// The state directory under the test's own directory, not
	// /var/lib/rubinofs; Claude Code's and Codex's homes likewise.
	env := append(testEnv(filepath.Join(tmp, "home")), "XDG_STATE_HOME="+filepath.Join(tmp, "xdg"), "CODEX_HOME="+filepath.Join(tmp, "codex-home"))
	return m, env
}

// writeScript writes an executable shell script and returns its path.
func writeScript(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentRun runs `rubinofs agent ARGS...` in the project directory and
// returns its output and exit status, tracking the daemon it started (its
// "(pid N," line) for the cleanup.
func agentRun(t *testing.T, m *cliMount, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := cliCommand(t, m.mnt, env, append([]string{"agent"}, args...)...)
	out, err := runCombined(t, cmd)
	m.trackAgentDaemon(out)
	return out, exitCode(err)
}

// trackAgentDaemon tracks the daemon `rubinofs agent` started, from its
// output's "(pid N," line, for the cleanup.
func (m *cliMount) trackAgentDaemon(out string) {
	if sm := daemonPidRe.FindStringSubmatch(out); sm != nil {
		pid, _ := strconv.Atoi(sm[1])
		m.track(pid)
	}
}

// TestAgentCommandMountsRunsUnmounts: from an unmounted project, `rubinofs
// agent claude-code` installs the hooks and the MCP server, mounts the
// directory in place, runs the agent there as the harness of a new
// session with its arguments (a write by it to an unread file is
// refused), returns its exit status, and unmounts at the end; a second
// run finds everything set up and changes nothing.
func TestAgentCommandMountsRunsUnmounts(t *testing.T) {
	m, env := agentProject(t, map[string]string{"existing.txt": "the user's\n"})
	fake := writeScript(t, filepath.Join(m.tmp, "fake-claude"), `echo "args: $*"
echo "cwd: $(pwd)"
cat .rubino/self/info
echo clobber > existing.txt && echo write=ok || echo write=refused
exit 3
`)
	out, code := agentRun(t, m, env, "--agent-bin", fake, "claude-code", "--", "-p", "hello world")
	if code != 3 {
		t.Fatalf("rubinofs agent: exit %d, want the agent's 3\n%s", code, out)
	}
	for _, want := range []string{"args: -p hello world", "cwd: " + m.mnt, `"harness": true`, `"name": "claude-code-`, "write=refused", "Permission denied", "unmounted " + m.mnt} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "working directory") { // the agent starts in the mount
		t.Errorf("the in-place mount warned about a working directory under it:\n%s", out)
	}
	m.waitDaemon()
	if m.mounted() {
		t.Fatalf("%s still mounted after the agent exited", m.mnt)
	}
	if b, _ := os.ReadFile(filepath.Join(m.mnt, "existing.txt")); string(b) != "the user's\n" {
		t.Errorf("existing.txt = %q, want it intact", b)
	}
	settings, _ := os.ReadFile(filepath.Join(m.mnt, ".claude", "settings.json"))
	if !strings.Contains(string(settings), "hook claude-code") || !strings.Contains(string(settings), `"enabledMcpjsonServers"`) {
		t.Errorf(".claude/settings.json lacks the hooks or the server's approval:\n%s", settings)
	}
	var mcp struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	raw, _ := os.ReadFile(filepath.Join(m.mnt, ".mcp.json"))
	if err := json.Unmarshal(raw, &mcp); err != nil || mcp.MCPServers["rubinofs"].Command != rubinofsBin(t) || strings.Join(mcp.MCPServers["rubinofs"].Args, " ") != "mcp" {
		t.Errorf(".mcp.json = %s (err %v), want rubinofs: %s mcp", raw, err, rubinofsBin(t))
	}

	out, code = agentRun(t, m, env, "--agent-bin", fake, "claude-code")
	if code != 3 || strings.Contains(out, "added") || !strings.Contains(out, "unchanged") || !strings.Contains(out, "unmounted ") {
		t.Errorf("a second rubinofs agent: exit %d, want 3 with nothing added and an unmount\n%s", code, out)
	}
	m.waitDaemon()
}

// TestAgentCommandLeavesLiveSessionsMounted: when another session of the
// mount is live as the agent exits, the command does not unmount, says
// why (naming the session), and still returns the agent's status.
func TestAgentCommandLeavesLiveSessionsMounted(t *testing.T) {
	m, env := agentProject(t, nil)
	ready, goOn := filepath.Join(m.tmp, "ready"), filepath.Join(m.tmp, "go")
	for _, p := range []string{ready, goOn} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fake := writeScript(t, filepath.Join(m.tmp, "fake-codex"), "echo up > "+shq(ready)+"\nread x < "+shq(goOn)+"\nexit 0\n")
	type result struct {
		out  string
		code int
		hung bool
	}
	done := make(chan result, 1)
	go func() {
		var b bytes.Buffer
		cmd := cliCommand(t, m.mnt, env, "agent", "--agent-bin", fake, "codex")
		cmd.Stdout, cmd.Stderr = &b, &b
		hung, err := runBounded(cmd)
		done <- result{b.String(), exitCode(err), hung}
	}()
	up := make(chan error, 1)
	go func() { _, err := os.ReadFile(ready); up <- err }()
	select {
	case err := <-up: // the agent runs, in the mount
		if err != nil {
			t.Fatal(err)
		}
	case r := <-done:
		if f, err := os.OpenFile(ready, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close() // lets the reader above go
		}
		m.trackAgentDaemon(r.out)
		t.Fatalf("rubinofs agent ended before its agent ran: exit %d (hung %v)\n%s", r.code, r.hung, r.out)
	}
	if out, err := runCLI(t, m.tmp, env, "session", "new", "--mount", m.mnt, "other-work", "--keep"); err != nil {
		t.Fatalf("session new --keep: %v\n%s", err, out)
	}
	if err := os.WriteFile(goOn, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	m.trackAgentDaemon(r.out)
	if r.code != 0 || !strings.Contains(r.out, "left "+m.mnt+" mounted: other sessions are live (other-work") {
		t.Fatalf("rubinofs agent with a live session: exit %d, want 0 and the mount left with the reason\n%s", r.code, r.out)
	}
	if !m.mounted() {
		t.Fatalf("%s was unmounted while the session other-work was live", m.mnt)
	}
	hooks, _ := os.ReadFile(filepath.Join(m.tmp, "codex-home", "hooks.json"))
	config, _ := os.ReadFile(filepath.Join(m.tmp, "codex-home", "config.toml"))
	if !strings.Contains(string(hooks), "hook codex") || !strings.Contains(string(config), "[mcp_servers.rubinofs]") {
		t.Errorf("Codex's hooks.json or config.toml lack rubinofs:\n%s\n%s", hooks, config)
	}
	if out, err := runCLI(t, m.tmp, env, "session", "end", "--mount", m.mnt, "other-work"); err != nil {
		t.Fatalf("session end: %v\n%s", err, out)
	}
	m.unmount()
}

// TestAgentCommandInsideMount: run inside a mount, the command neither
// mounts nor unmounts; it installs the settings through the mount and
// runs the agent in a session of it.
func TestAgentCommandInsideMount(t *testing.T) {
	m := newMount(t, map[string]string{"sub/keep.txt": "x\n"}, nil)
	fake := writeScript(t, filepath.Join(m.tmp, "fake-claude"), `grep -E '"(harness|name)"' "$RUBINO_MOUNT/.rubino/self/info"; pwd`+"\n")
	env := append(testEnv(filepath.Join(m.tmp, "home")), "XDG_STATE_HOME="+filepath.Join(m.tmp, "xdg"))
	out, err := runCLI(t, m.path("sub"), env, "agent", "--agent-bin", fake, "--session", "mine", "claude-code")
	if err != nil {
		t.Fatalf("rubinofs agent in a mount: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"name": "mine"`) || !strings.Contains(out, `"harness": true`) || !strings.Contains(out, m.path("sub")) ||
		strings.Contains(out, "mounted ") || strings.Contains(out, "unmounted") {
		t.Errorf("want the agent in session mine, in sub, and no mount or unmount:\n%s", out)
	}
	if got := m.readBacking(".mcp.json"); !strings.Contains(got, `"rubinofs"`) {
		t.Errorf(".mcp.json at the mount root = %q", got)
	}
	if !isMounted(t, m.mnt) {
		t.Error("the mount was unmounted by a command that did not mount it")
	}
}

// TestAgentCommandErrors: a missing agent says how to install it, and an
// unknown agent is a usage error; neither mounts or writes anything.
func TestAgentCommandErrors(t *testing.T) {
	m, env := agentProject(t, nil)
	for i, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			env[i] = "PATH=/nonexistent"
		}
	}
	out, code := agentRun(t, m, env, "claude-code")
	if code != 127 || !strings.Contains(out, "claude not found on PATH") || !strings.Contains(out, "npm install -g @anthropic-ai/claude-code") {
		t.Errorf("rubinofs agent without claude: exit %d\n%s", code, out)
	}
	out, code = agentRun(t, m, env, "aider")
	if code != 2 || !strings.Contains(out, `unknown agent "aider"`) {
		t.Errorf("rubinofs agent aider: exit %d\n%s", code, out)
	}
	if m.mounted() {
		t.Error("a failed rubinofs agent left a mount")
	}
	if ents, _ := os.ReadDir(m.mnt); len(ents) != 0 {
		t.Errorf("a failed rubinofs agent wrote into the project: %v", ents)
	}
}
