package tests

// Every CLI call returns (docs/DESIGN.md#ctl-blocking-io): a control write
// the daemon refuses at a cap (EAGAIN, "try again later") ends the command
// with exit status 1 and the daemon's one-line reason on stderr, never a
// wait on Go's poller for a readiness event that does not come. Each cap is
// hit through the CLI binary; runBounded's failsafe (cliFailsafe) only
// turns a hang into a failure, nothing here is timed.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
)

// cliSplit runs the CLI binary with args in dir and returns its stdout,
// its stderr and its exit status (exitCode); it fails the test when the
// command hung (killed after cliFailsafe) or did not run.
func cliSplit(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := cliCommand(t, dir, nil, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	hung, err := runBounded(cmd)
	if hung {
		t.Fatalf("rubinofs %s hung (killed after %v): a refused control write must return\nstdout: %s\nstderr: %s",
			strings.Join(args, " "), cliFailsafe, o.String(), e.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("rubinofs %v: %v", args, err)
	}
	return o.String(), e.String(), exitCode(err)
}

// mustRefuse checks a refused command: exit status 1, reason on stderr.
func mustRefuse(t *testing.T, what, stdout, stderr string, code int, reason string) {
	t.Helper()
	if code != 1 || !strings.Contains(stderr, reason) || !strings.Contains(stderr, "resource temporarily unavailable") {
		t.Fatalf("%s: exit %d, want 1 with %q on stderr\nstdout: %s\nstderr: %s", what, code, reason, stdout, stderr)
	}
}

// TestCLISpawnPastTaskCaps: `rubinofs agents spawn` past each task cap
// (per_owner, global, depth) exits 1 with the registry's reason.
func TestCLISpawnPastTaskCaps(t *testing.T) {
	spawn := func(t *testing.T, m *mount, prompt string) (string, string, int) {
		return cliSplit(t, m.tmp, "agents", "spawn", "--mount", m.mnt, prompt)
	}
	// sleeper spawns a task that stays live until the mount's teardown
	// stops it.
	sleeper := func(t *testing.T, m *mount) {
		t.Helper()
		out, errOut, code := spawn(t, m, "exec sleep 1000")
		if _, err := strconv.Atoi(strings.TrimSpace(out)); code != 0 || err != nil {
			t.Fatalf("spawn: exit %d\n%s%s", code, out, errOut)
		}
	}
	t.Run("per_owner", func(t *testing.T) {
		m := newMount(t, nil, func(c *daemon.Config) { c.Agents.MaxChildrenPerNode = 1 })
		sleeper(t, m)
		out, errOut, code := spawn(t, m, "true")
		mustRefuse(t, "spawn past max_children_per_node", out, errOut, code, "per_owner: uid 0 already has 1 live children (max_children_per_node 1)")
	})
	t.Run("global", func(t *testing.T) {
		m := newMount(t, nil, func(c *daemon.Config) { c.Agents.MaxConcurrentTotal = 1 })
		sleeper(t, m)
		out, errOut, code := spawn(t, m, "true")
		mustRefuse(t, "spawn past max_concurrent_total", out, errOut, code, "global: 1 tasks are live (max_concurrent_total 1)")
	})
	t.Run("depth", func(t *testing.T) {
		// A top-level task (depth 0) spawns a child (depth 1) with the
		// CLI: past max_depth 1, so the task's own `rubinofs agents spawn`
		// must return, and the task finish with what it printed.
		m := newMount(t, nil, func(c *daemon.Config) { c.Agents.MaxDepth = 1 })
		bin := rubinofsBin(t)
		out, errOut, code := spawn(t, m, shq(bin)+` agents spawn true 2>&1; echo "rc=$?"`)
		id := strings.TrimSpace(out)
		if code != 0 {
			t.Fatalf("spawn: exit %d\n%s%s", code, out, errOut)
		}
		res, errOut, code := cliSplit(t, m.tmp, "agents", "wait", "--mount", m.mnt, id)
		if code != 0 || !strings.Contains(res, "depth: a task at depth 1 is past max_depth 1 (resource temporarily unavailable)") ||
			!strings.HasSuffix(res, "rc=1\n") {
			t.Fatalf("the task's spawn past max_depth: exit %d\n%s%s", code, res, errOut)
		}
	})
}

// TestCLISessionsPastLiveCap: with --max-live-sessions 1, `rubinofs run`
// and `rubinofs session new` past the cap exit 1 with the daemon's reason;
// once the live session ends, run registers again.
func TestCLISessionsPastLiveCap(t *testing.T) {
	requireFuse(t)
	m := cliDirs(t, map[string]string{"a.txt": "a\n"})
	m.mountDaemon("--max-live-sessions", "1")
	out, errOut, code := cliSplit(t, m.tmp, "session", "new", "--keep", "--mount", m.mnt, "held")
	if code != 0 || strings.TrimSpace(out) != "held" {
		t.Fatalf("session new --keep held: exit %d\n%s%s", code, out, errOut)
	}
	const reason = "has 1 live sessions, the limit is 1 (sessions.max_live, --max-live-sessions)"
	out, errOut, code = cliSplit(t, m.tmp, "run", "--mount", m.mnt, "--", "true")
	mustRefuse(t, "run past the live-session cap", out, errOut, code, reason)
	if !strings.Contains(errOut, "registering the session:") {
		t.Fatalf("run: stderr %q does not say what failed", errOut)
	}
	out, errOut, code = cliSplit(t, m.tmp, "session", "new", "--keep", "--mount", m.mnt, "second")
	mustRefuse(t, "session new past the live-session cap", out, errOut, code, reason)
	out, errOut, code = cliSplit(t, m.tmp, "session", "end", "--mount", m.mnt, "held")
	if code != 0 {
		t.Fatalf("session end held: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cliSplit(t, m.tmp, "run", "--mount", m.mnt, "--", "sh", "-c", `echo "in $RUBINO_SESSION"`)
	if code != 0 || !strings.HasPrefix(out, "in s-") {
		t.Fatalf("run under the cap: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCLIAgentsWaitInterrupted: `rubinofs agents wait` blocks in the
// kernel on the task's wait file (a plain blocking read), and SIGINT still
// ends it: the kernel interrupts the FUSE request, the control tree
// answers it with EINTR, and the Go runtime's default handling of SIGINT
// ends the process.
func TestCLIAgentsWaitInterrupted(t *testing.T) {
	m := newMount(t, nil, nil)
	id := m.spawnSh("exec sleep 1000")
	cmd := cliCommand(t, m.tmp, nil, "agents", "wait", "--mount", m.mnt, id)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, "agents wait blocked in a FUSE request", func() bool { return inFuseRequest(cmd.Process.Pid) })
	cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-time.After(cliFailsafe):
		cmd.Process.Kill()
		<-done
		t.Fatalf("agents wait did not end on SIGINT\n%s", out.String())
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("agents wait after SIGINT: %v\n%s", err, out.String())
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("agents wait after SIGINT: %v, want killed by SIGINT\n%s", err, out.String())
	}
	if got := m.cat(id + "/status"); got != "running\n" {
		t.Fatalf("the task after its waiter was interrupted: %q", got)
	}
}

// inFuseRequest reports whether a thread of pid waits for the answer of a
// FUSE request (its wchan is request_wait_answer).
func inFuseRequest(pid int) bool {
	tids, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/wchan")
	for _, p := range tids {
		if b, err := os.ReadFile(p); err == nil && string(b) == "request_wait_answer" {
			return true
		}
	}
	return false
}
