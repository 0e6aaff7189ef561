package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
)

// agent is a long-lived shell started with `rubinofs run`: a session whose
// reads persist across commands. Each command runs in the mount root and
// its exit status comes back on a pipe, so the test steps are ordered by
// events.
type agent struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
}

// startAgent runs `rubinofs run --session NAME -- sh` in the mount.
func (m *mount) startAgent(name string) *agent {
	m.t.Helper()
	return m.startSession(name)
}

// startSession runs `rubinofs run [runFlags...] --session NAME -- sh` in
// the mount and waits until its first command ran in the session.
func (m *mount) startSession(name string, runFlags ...string) *agent {
	m.t.Helper()
	t := m.t.(*testing.T)
	// Commands run in the loop shell itself (not a subshell), so a
	// background job stays a descendant of the session root: a process
	// reparented to init leaves the session.
	loop := `while IFS= read -r line; do { cd "$RUBINO_MOUNT" && eval "$line"; } >/dev/null 2>&1 </dev/null; echo "rc=$? session=$RUBINO_SESSION"; done`
	args := append(append([]string{"run"}, runFlags...), "--session", name, "--mount", m.mnt, "--", "/bin/sh", "-c", loop)
	cmd := exec.Command(rubinofsBin(t), args...)
	cmd.Dir = m.tmp
	cmd.Env = testEnv(m.tmp)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, name: name, cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(a.exit)
	// The first command proves the session is registered and the loop runs.
	if rc := a.run("true"); rc != "rc=0 session="+name {
		t.Fatalf("agent %s did not start: %q", name, rc)
	}
	return a
}

// run runs one shell command in the agent and returns "rc=N session=S".
func (a *agent) run(script string) string {
	a.t.Helper()
	if _, err := io.WriteString(a.in, script+"\n"); err != nil {
		a.t.Fatalf("agent %s: %v", a.name, err)
	}
	line, err := a.out.ReadString('\n')
	if err != nil {
		a.t.Fatalf("agent %s: %v", a.name, err)
	}
	return strings.TrimSpace(line)
}

// ok runs script and fails the test unless it succeeds.
func (a *agent) ok(script string) {
	a.t.Helper()
	if rc := a.run(script); !strings.HasPrefix(rc, "rc=0 ") {
		a.t.Fatalf("agent %s: %s: %s", a.name, script, rc)
	}
}

// refused runs script and fails the test if it succeeds.
func (a *agent) refused(script string) {
	a.t.Helper()
	if rc := a.run(script); strings.HasPrefix(rc, "rc=0 ") {
		a.t.Fatalf("agent %s: %s succeeded, want a refusal", a.name, script)
	}
}

// exit ends the agent's shell (and so its session).
func (a *agent) exit() {
	if a.in != nil {
		a.in.Close()
		a.cmd.Wait()
		a.in = nil
	}
}

// TestSessionsNoLostUpdate: A and B read f; A writes it; B's write is refused
// as stale until B reads again. The human's shell (default session) is a
// third party with its own reads.
func TestSessionsNoLostUpdate(t *testing.T) {
	m := newMount(t, map[string]string{"f": "v1\n"}, nil)
	a, b := m.startAgent("agent-a"), m.startAgent("agent-b")
	a.ok("cat f")
	b.ok("cat f")
	a.ok("echo 'v2 by A' > f")
	b.refused("echo 'v2 by B' > f")
	if got := m.readBacking("f"); got != "v2 by A\n" {
		t.Fatalf("B's refused write changed f: %q", got)
	}
	a.ok("echo 'v3 by A' >> f") // A's own write keeps A fresh
	b.refused("echo 'B appends' >> f")
	b.ok("cat f")
	b.ok("echo 'v4 by B' > f")
	a.refused("echo 'v5 by A' > f")
	if got := m.readBacking("f"); got != "v4 by B\n" {
		t.Fatalf("final content %q", got)
	}
	// Denials name the session; each session's why is its own.
	var bDenials int
	for _, d := range m.denials() {
		if d["session"] == "agent-b" {
			bDenials++
		}
		if d["code"] != "stale" {
			t.Errorf("denial %v: want stale", d)
		}
	}
	if bDenials != 2 {
		t.Errorf("agent-b denials: %d, want 2", bDenials)
	}
	why, err := os.ReadFile(m.path(".rubino/sessions/agent-a/why"))
	if err != nil || !strings.Contains(string(why), "changed on disk") {
		t.Errorf("sessions/agent-a/why = %q, %v", why, err)
	}
}

// TestSessionHandleLosesRight: a handle B opened for writing loses its right
// once the file is modified through another session: its next write is
// refused and the file is not half-overwritten.
func TestSessionHandleLosesRight(t *testing.T) {
	m := newMount(t, map[string]string{"f": "0123456789\n"}, nil)
	a, b := m.startAgent("agent-a"), m.startAgent("agent-b")
	b.ok("cat f")
	a.ok("cat f")
	// B holds f open for writing in a background python that writes once,
	// reports, waits for a go-ahead, writes again and reports the result,
	// all through fifos the test blocks on: ordered by events.
	fifo := func(name string) string {
		p := m.tmp + "/" + name
		if err := exec.Command("mkfifo", p).Run(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ready, goAhead, result := fifo("ready"), fifo("go"), fifo("result")
	script := m.tmp + "/holder.py"
	if err := os.WriteFile(script, []byte(`
import os, sys, errno
fd = os.open("f", os.O_WRONLY)
os.pwrite(fd, b"BB", 0)
open(sys.argv[1], "w").write("1")
open(sys.argv[2]).read()
try:
    os.pwrite(fd, b"BBBBBBBB", 2)
    r = "written"
except OSError as e:
    r = errno.errorcode[e.errno]
open(sys.argv[3], "w").write(r)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	b.ok("python3 " + shq(script) + " " + shq(ready) + " " + shq(goAhead) + " " + shq(result) + " &")
	if _, err := os.ReadFile(ready); err != nil {
		t.Fatal(err)
	}
	a.ok("cat f >/dev/null && echo 'A rewrote it' > f")
	if err := os.WriteFile(goAhead, []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	if string(r) != "EACCES" {
		t.Fatalf("B's second write through its old handle: %s, want EACCES", r)
	}
	if got := m.readBacking("f"); got != "A rewrote it\n" {
		t.Fatalf("f half-overwritten: %q", got)
	}
}

// TestSessionControlFiles: sessions are listed, .rubino/self resolves per
// caller, info shows the root, and authorisation holds: a session cannot end
// or rename another, cannot take an existing name, and the owner's
// unregistered shell can end any session.
func TestSessionControlFiles(t *testing.T) {
	m := newMount(t, map[string]string{"f": "x\n"}, nil)
	a, b := m.startAgent("agent-a"), m.startAgent("agent-b")
	a.ok("cat f")
	if got := m.mustSh("ls .rubino/sessions"); got != "agent-a\nagent-b\nclone\nctl\ndefault\n" {
		t.Fatalf("sessions listing %q", got)
	}
	if got := m.mustSh("readlink .rubino/self"); got != "sessions/default\n" {
		t.Fatalf("self of the test shell: %q", got)
	}
	a.ok(`test "$(readlink .rubino/self)" = sessions/agent-a && test "$(cat .rubino/self/tracked | wc -l)" = 1`)
	var info map[string]any
	if err := json.Unmarshal([]byte(m.mustSh("cat .rubino/sessions/agent-a/info")), &info); err != nil {
		t.Fatal(err)
	}
	if info["root_pid"].(float64) != float64(a.cmd.Process.Pid) || info["live"] != true || info["tracked"].(float64) != 1 {
		t.Fatalf("info %v (root pid %d)", info, a.cmd.Process.Pid)
	}
	// A may not end or rename B, nor register a session named like B.
	a.refused("echo 'end agent-b' > .rubino/sessions/ctl")
	a.refused("echo 'rename agent-b x' > .rubino/sessions/ctl")
	a.refused(`exec 3<>.rubino/sessions/clone && echo name=agent-b >&3`)
	// A may rename itself; its reads go with it.
	a.ok("echo 'rename agent-a agent-a2' > .rubino/sessions/ctl")
	a.ok(`test "$(readlink .rubino/self)" = sessions/agent-a2 && echo y > f`)
	// The owner's shell (unregistered, root) ends B; B's processes then
	// left it: a fresh session rooted at B's root, never default with the
	// shell's reads (docs/DESIGN.md#sessions).
	m.mustSh("echo 'end agent-b' > .rubino/sessions/ctl")
	b.ok(fmt.Sprintf(`test "$(readlink .rubino/self)" = sessions/left-%d`, b.cmd.Process.Pid))
	errs := m.mustSh("cat .rubino/errors")
	if !strings.Contains(errs, `"errno":"EPERM"`) || !strings.Contains(errs, `"errno":"EEXIST"`) {
		t.Errorf("errors log lacks the refusals:\n%s", errs)
	}
	// A session ends when its root exits.
	a.exit()
	waitGone(t, m, "agent-a2")
}

// waitGone waits until sessions/NAME/info says the session is no longer
// live (the root's exit is noticed through a pidfd, asynchronously).
func waitGone(t *testing.T, m *mount, name string) {
	t.Helper()
	for i := 0; ; i++ {
		b, err := os.ReadFile(m.path(".rubino/sessions/" + name + "/info"))
		if err == nil && strings.Contains(string(b), `"live": false`) {
			return
		}
		if i > 100000 {
			t.Fatalf("session %s still live: %s %v", name, b, err)
		}
	}
}

// TestUnregisteredAllow: with --unregistered allow the human's shell is not
// guarded, agents started with `rubinofs run` are, and an agent cannot end
// its own session to escape the guard.
func TestUnregisteredAllow(t *testing.T) {
	m := newMount(t, map[string]string{"f": "x\n", "g": "y\n"}, func(c *daemon.Config) { c.AllowUnregistered = true })
	m.mustSh("echo human > f")
	a := m.startAgent("agent-a")
	a.refused("echo agent > g")
	a.refused("echo 'end agent-a' > .rubino/sessions/ctl")
	a.refused("echo agent > g")
	if got := m.readBacking("g"); got != "y\n" {
		t.Fatalf("g = %q", got)
	}
}

// TestSessionsConcurrentCounter: four `rubinofs run` sessions increment one
// counter file concurrently (read, add one, write; retry when refused). No
// update may be lost: the final value equals the number of successful
// writes. bench/sessions runs the same loop bigger, and on native.
func TestSessionsConcurrentCounter(t *testing.T) {
	m := newMount(t, map[string]string{"counter": "0\n"}, nil)
	worker := m.tmp + "/worker.py"
	if err := os.WriteFile(worker, []byte(`
import os, sys, errno
path, rounds = sys.argv[1], int(sys.argv[2])
ok = refused = 0
while ok < rounds:
    with open(path) as f:
        s = f.read().strip()
    if not s:
        continue  # read between another writer's truncate and its write
    try:
        with open(path, "w") as f:
            f.write(str(int(s) + 1) + "\n")
        ok += 1
    except PermissionError:
        refused += 1
print(ok, refused)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 4, 40
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for i := 0; i < workers; i++ {
		cmd := exec.Command(rubinofsBin(t), "run", "--mount", m.mnt, "--", "python3", worker, m.path("counter"), fmt.Sprint(rounds))
		cmd.Dir, cmd.Env = m.tmp, testEnv(m.tmp)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	total, refused := 0, 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
		var ok, r int
		if _, err := fmt.Sscan(outs[i].String(), &ok, &r); err != nil {
			t.Fatalf("worker %d output %q", i, outs[i])
		}
		total, refused = total+ok, refused+r
	}
	final := strings.TrimSpace(m.readBacking("counter"))
	if final != fmt.Sprint(total) {
		t.Fatalf("final counter %s after %d successful writes: %d updates lost", final, total, total-atoi(final))
	}
	t.Logf("%d writes, %d refused and retried, 0 lost", total, refused)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestPersistReads: with --persist-reads (the CLI default) a read survives a
// remount of the same state directory; a file changed while unmounted is
// stale after it.
func TestPersistReads(t *testing.T) {
	files := map[string]string{"kept.txt": "k\n", "changed.txt": "c\n"}
	m := newMount(t, files, func(c *daemon.Config) { c.PersistReads = true })
	m.mustSh("cat kept.txt changed.txt >/dev/null")
	if err := m.d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.state + "/reads.json"); err != nil {
		t.Fatalf("no saved read state: %v", err)
	}
	m.writeBacking("changed.txt", "changed while unmounted\n")
	d, err := daemon.Start(daemon.Config{Workspace: m.ws, Mountpoint: m.mnt, StateDir: m.state,
		Cache: config.Cache{PersistReads: true, Watch: true, CacheTimeout: time.Hour}, Version: "test", Slog: m.d.Slog()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m.mustSh("echo edited > kept.txt")
	m.mustFail("echo edited > changed.txt")
	if got := m.readBacking("changed.txt"); got != "changed while unmounted\n" {
		t.Fatalf("changed.txt = %q", got)
	}
}
