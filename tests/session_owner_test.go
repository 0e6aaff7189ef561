package tests

// Sessions belong to a uid (docs/DESIGN.md#sessions): a caller outside
// every session is its own uid's default session, and the control files
// show and act on another uid's sessions only for the mount's owner and
// root. Run as uid 65534 (nobody) against a root daemon on an allow_other
// mount, as the attacker would.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
)

// newSharedMount mounts files with allow_other, the test's directories
// reachable by uid 65534, and the backing directory p (when files hold
// it) mode 0700: root's private files.
func newSharedMount(t *testing.T, files map[string]string, adjust ...func(*daemon.Config)) *mount {
	t.Helper()
	m := newMount(t, files, func(c *daemon.Config) {
		for _, a := range adjust {
			a(c)
		}
		c.Options = append(c.Options, "allow_other")
		// Before the mount (files are written by now): no watcher event.
		if _, err := os.Stat(filepath.Join(c.Workspace, "p")); err == nil {
			if err := os.Chmod(filepath.Join(c.Workspace, "p"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	})
	openUp(t, m.tmp)
	return m
}

// nobodyCmd is script under sh as uid/gid 65534 with no supplementary
// groups, in the test's directory; the script cds into the mount itself.
func (m *mount) nobodyCmd(script string) *exec.Cmd {
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
	cmd.Dir = m.tmp
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "MNT=" + m.mnt}
	return cmd
}

// nobody runs script as uid 65534 and returns its combined output and
// error (a non-zero exit is an *exec.ExitError).
func (m *mount) nobody(script string) (string, error) {
	m.t.Helper()
	out, err := m.nobodyCmd(script).CombinedOutput()
	return string(out), err
}

// TestSessionOwnerDefaultPerUid: nobody outside every session is its own
// session default-65534, never root's default: its declared reads do not
// land in root's tracker, and it can neither read root's default session's
// records nor declare reads for it. On a mount where every caller outside a
// session was `default`, nobody's `read p/pin` on self/ctl went into root's
// session and root's tracked showed nobody the hash of a file in a 0700
// directory.
func TestSessionOwnerDefaultPerUid(t *testing.T) {
	m := newSharedMount(t, map[string]string{"p/pin": "4711\n", "pub.txt": "hello\n"})
	m.mustSh(`cat p/pin >/dev/null`) // root's default session reads p/pin

	out, err := m.nobody(`cd "$MNT" && readlink .rubino/self`)
	if err != nil || strings.TrimSpace(out) != "sessions/default-65534" {
		t.Fatalf("nobody's self: %q, %v; want sessions/default-65534", out, err)
	}
	// nobody declares a read on its own self/ctl (whether its own session
	// may record it is the read declaration's permission check): never
	// root's session.
	m.nobody(`cd "$MNT" && echo "read pub.txt" > .rubino/self/ctl; echo "read p/pin" > .rubino/self/ctl`)
	rootTracked := m.mustSh(`cat .rubino/guard/tracked`)
	if strings.Contains(rootTracked, "pub.txt") {
		t.Fatalf("nobody's declaration landed in root's default session:\n%s", rootTracked)
	}
	if !strings.Contains(rootTracked, "p/pin") {
		t.Fatalf("root's own read of p/pin is not in its tracked:\n%s", rootTracked)
	}
	mine, err := m.nobody(`cd "$MNT" && cat .rubino/self/tracked`)
	if err != nil || !strings.Contains(mine, "pub.txt") {
		t.Fatalf("nobody's own tracked: %q, %v; want its declared pub.txt", mine, err)
	}
	// Root's default session is not nobody's to read or to write.
	if out, err := m.nobody(`cd "$MNT" && cat .rubino/sessions/default/tracked`); err == nil || strings.Contains(out, "p/pin") {
		t.Fatalf("nobody read root's default tracked: %q, %v", out, err)
	}
	if out, err := m.nobody(`cd "$MNT" && cat .rubino/sessions/default/info`); err == nil {
		t.Fatalf("nobody read root's default info: %q", out)
	}
	if out, err := m.nobody(`cd "$MNT" && echo "read pub.txt" > .rubino/sessions/default/ctl`); err == nil {
		t.Fatalf("nobody declared a read for root's default session: %q", out)
	}
	// Root, the mount's owner, sees nobody's default session.
	if out := m.mustSh(`ls .rubino/sessions && cat .rubino/sessions/default-65534/info`); !strings.Contains(out, `"owner": 65534`) {
		t.Fatalf("root's view of default-65534:\n%s", out)
	}
}

// TestSessionOwnerListings: denials, errors, the sessions listing,
// sessions/NAME/info and the access log show nobody nothing of root's
// agent session: not its name, its command, nor the paths it touched in a
// 0700 directory. Root outside every session still sees all of it.
func TestSessionOwnerListings(t *testing.T) {
	m := newSharedMount(t, map[string]string{"p/secret-name.txt": "s\n", "p/other": "o\n"})

	// nobody's access-log reader, attached before root's agent works.
	logCmd := m.nobodyCmd(`cd "$MNT" && exec cat .rubino/accesslog`)
	logOut, err := logCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := logCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logCmd.Process.Kill(); logCmd.Wait() })
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(logOut)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The reader is attached once it sees one of nobody's own markers: a
	// lookup of a name never looked up before (a new one per attempt: the
	// kernel caches a miss).
	attempt := 0
	waitMarker := func(marker string) []string {
		t.Helper()
		var seen []string
		for ; attempt < 1000; attempt++ {
			name := fmt.Sprintf("%s-%d", marker, attempt)
			m.nobody(`cd "$MNT" && stat ` + name + ` 2>/dev/null`)
			deadline := time.After(2 * time.Second) // only how often the marker is retried
		wait:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("nobody's access log ended; lines so far:\n%s", strings.Join(seen, "\n"))
					}
					seen = append(seen, l)
					if strings.Contains(l, name) {
						return seen
					}
				case <-deadline:
					break wait
				}
			}
		}
		t.Fatalf("nobody's access log never showed its own lookups; lines:\n%s", strings.Join(seen, "\n"))
		return nil
	}
	waitMarker("marker-one")

	a := m.startSession("rootagent")
	a.ok("cat p/other >/dev/null")
	a.refused("echo x > p/secret-name.txt")                      // a denial naming the path
	a.refused(`echo "read p/no-such-secret" > .rubino/self/ctl`) // an error record naming the path
	seen := waitMarker("marker-two")
	for _, l := range seen {
		if strings.Contains(l, "rootagent") || strings.Contains(l, "secret") || strings.Contains(l, "other") {
			t.Fatalf("nobody's access log shows root's agent: %q", l)
		}
	}

	for _, c := range []struct{ what, script string }{
		{"denials", `cat .rubino/guard/denials`},
		{"errors", `cat .rubino/errors`},
		{"the sessions listing", `ls .rubino/sessions`},
		{"the agent's info", `cat .rubino/sessions/rootagent/info 2>&1`},
		{"the agent's tracked", `cat .rubino/sessions/rootagent/tracked 2>&1`},
		{"the agent's denials", `cat .rubino/sessions/rootagent/denials 2>&1`},
	} {
		out, _ := m.nobody(`cd "$MNT" && ` + c.script)
		if strings.Contains(out, "rootagent\n") || strings.Contains(out, `"rootagent"`) || strings.Contains(out, "secret") ||
			strings.Contains(out, "p/other") || strings.Contains(out, "/bin/sh") {
			t.Errorf("nobody sees root's agent in %s:\n%s", c.what, out)
		}
	}
	if out, err := m.nobody(`cd "$MNT" && echo "end rootagent" > .rubino/sessions/ctl`); err == nil {
		t.Errorf("nobody ended root's session: %q", out)
	}

	// Root, the mount's owner outside every session, sees it all.
	all := m.mustSh(`cat .rubino/guard/denials .rubino/errors && ls .rubino/sessions && cat .rubino/sessions/rootagent/info`)
	for _, want := range []string{"secret-name.txt", "no-such-secret", "rootagent", `"owner": 0`} {
		if !strings.Contains(all, want) {
			t.Errorf("root's view lacks %q:\n%s", want, all)
		}
	}
}

// TestSessionCapPerUid: nobody registers sessions until its own cap
// (sessions.max_live, here 64, EAGAIN past it); root's next registration and its
// `rubinofs run` are not affected. With one cap for every uid, nobody's
// sessions used it up and root's `rubinofs run` failed (or hung).
func TestSessionCapPerUid(t *testing.T) {
	// sessions.max_live is the per-uid cap; a small one proves the same
	// rule as the default 1024 without registering a thousand sessions.
	const limit = 64
	m := newSharedMount(t, nil, func(c *daemon.Config) { c.MaxLive = limit })
	// Each registration needs a live root process of nobody's own: one
	// `sleep` per session, all in one process group killed at the end.
	// A registration of a process still in its execve is refused with
	// EAGAIN "process busy": tried again; the cap's EAGAIN ends the loop.
	// The reason of a refused registration is the last line of nobody's
	// .rubino/errors.
	cmd := m.nobodyCmd(`cd "$MNT" || exit 1
i=0
tries=0
while [ $i -le 100 ] && [ $tries -lt 20000 ]; do
	sleep 100000 >/dev/null 2>&1 </dev/null &
	p=$!
	while :; do
		tries=$((tries+1))
		if echo "pid=$p" 2>/dev/null 1<>.rubino/sessions/clone; then
			break
		fi
		why=$(tail -n 1 .rubino/errors)
		case $why in
		*"too many live sessions"*) echo "refused at $i: $why"; exit 0;;
		*"process busy"*) continue;;
		esac
		echo "failed at $i: $why"
		exit 1
	done
	i=$((i+1))
done
echo "never refused"`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), fmt.Sprintf("refused at %d: ", limit)) || !strings.Contains(string(out), fmt.Sprintf("uid 65534 has %d live sessions", limit)) {
		t.Fatalf("nobody's registrations: %q, %v; want refused at %d with a reason naming its cap", out, err, limit)
	}
	// Root registers and runs as before.
	if out, err := m.sh(`exec 3<>.rubino/sessions/clone && echo name=rootstill >&3 && read -r id <&3 && echo "$id"`); err != nil || strings.TrimSpace(out) != "rootstill" {
		t.Fatalf("root's registration past nobody's cap: %q, %v", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang fails, not blocks the run
	defer cancel()
	run := exec.CommandContext(ctx, rubinofsBin(t), "run", "--mount", m.mnt, "--", "sh", "-c", `echo "$RUBINO_SESSION"`)
	run.Dir = m.tmp
	run.Env = testEnv(m.tmp)
	if out, err := run.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "s-") {
		t.Fatalf("root's rubinofs run past nobody's cap: %q, %v", out, err)
	}
}

// TestLeavingSessionGainsNoReads: the human's shell (default) has read
// notes.md; an agent session has not. A process that leaves the agent's
// session never lands in default with its reads: a double fork under
// setsid stays in the session (the root is a child subreaper), the
// processes of a session ended by `end` and those that outlive the
// session's root land in a fresh session of their own, and `rm notes.md`,
// refused inside the session, stays refused. Each passed where leaving a
// session meant landing in `default`.
func TestLeavingSessionGainsNoReads(t *testing.T) {
	m := newMount(t, map[string]string{"notes.md": "mine\n", "pub.txt": "p\n"}, nil)
	m.mustSh("cat notes.md >/dev/null") // the human's shell has read it
	fifo := func(name string) string {
		p := filepath.Join(m.tmp, name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	readFifo := func(p string) string {
		b, err := os.ReadFile(p) // blocks until the writer has written and closed
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	stillThere := func(what string) {
		t.Helper()
		if got := m.readBacking("notes.md"); got != "mine\n" {
			t.Fatalf("%s: notes.md = %q, want it untouched", what, got)
		}
	}

	// A double fork under setsid, while the session's root lives.
	a := m.startSession("agent")
	a.refused("rm notes.md")
	out := fifo("double")
	a.ok(`setsid sh -c '(rm notes.md 2>/dev/null; echo "rc=$? $(readlink .rubino/self)" > ` + shq(out) + `) &'`)
	if got := readFifo(out); !strings.HasPrefix(got, "rc=1 sessions/agent") {
		t.Fatalf("double-forked rm: %q, want refused in sessions/agent", got)
	}
	stillThere("double-forked rm")

	// The session is ended while its processes live.
	in, out2 := fifo("in2"), fifo("out2")
	a.ok(`(read x < ` + shq(in) + `; rm notes.md 2>/dev/null; echo "rc=$? $(readlink .rubino/self)" > ` + shq(out2) + `) &`)
	m.mustSh(`echo "end agent" > .rubino/sessions/ctl`)
	a.refused("rm notes.md") // the root itself
	if err := os.WriteFile(in, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFifo(out2); !strings.HasPrefix(got, "rc=1 sessions/left-") {
		t.Fatalf("rm by a process of an ended session: %q, want refused in a left-PID session", got)
	}
	stillThere("rm after end")

	// The session's root exits; a process it started (which touched the
	// mount) outlives it.
	b := m.startSession("agent2")
	ready, in3, out3 := fifo("ready3"), fifo("in3"), fifo("out3")
	b.ok(`(cat pub.txt >/dev/null; echo ready > ` + shq(ready) + `; read x < ` + shq(in3) + `; rm notes.md 2>/dev/null; echo "rc=$? $(readlink .rubino/self)" > ` + shq(out3) + `) &`)
	readFifo(ready) // it has touched the mount from inside the session
	b.exit()
	waitGone(t, m, "agent2")
	if err := os.WriteFile(in3, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFifo(out3); !strings.HasPrefix(got, "rc=1 sessions/left-") {
		t.Fatalf("rm by a process that outlived its session's root: %q, want refused in a left-PID session", got)
	}
	stillThere("rm after the root's exit")
	// The human's shell, which read it, still may.
	m.mustSh("rm notes.md")
}

// TestTaskDoubleForkStaysInTask: a task's process that double-forks leaves
// the task's process tree but not its POSIX session (every task runs under
// setsid), so it stays in task-ID, with no reads, and never lands in its
// spawner's default session, which has read the file.
func TestTaskDoubleForkStaysInTask(t *testing.T) {
	m := newMount(t, map[string]string{"notes.md": "mine\n"}, nil)
	m.mustSh("cat notes.md >/dev/null") // the spawner's default session has read it
	in, out := filepath.Join(m.tmp, "in"), filepath.Join(m.tmp, "out")
	for _, p := range []string{in, out} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	prompt := `sh -c '(rm notes.md 2>/dev/null; echo "rc=$? $(readlink .rubino/self)" > ` + shq(out) + `) &'; read x < ` + shq(in)
	m.mustSh(shq(rubinofsBin(t)) + " agents spawn --mount " + shq(m.mnt) + " " + shq(prompt))
	b, err := os.ReadFile(out) // blocks until the orphan has written and closed
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte("go\n"), 0); err != nil { // the task may end
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); !strings.HasPrefix(got, "rc=1 sessions/task-") {
		t.Fatalf("a task's double-forked rm: %q, want refused in the task's session", got)
	}
	if got := m.readBacking("notes.md"); got != "mine\n" {
		t.Fatalf("notes.md = %q, want it untouched", got)
	}
}
