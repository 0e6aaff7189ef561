package tests

// Whose reads count (docs/DESIGN.md#scanner-reads): tree scanners' reads
// count for their own process only; a harness root's own reads count for
// nothing, its children's for the session; the harness declares its
// model's reads in .rubino/self/ctl.

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// startHarness runs `rubinofs run --harness --session NAME -- sh` in the
// mount: the shell is the harness root. Its builtins (read, echo and their
// redirections) are the root's own accesses; external commands (cat, sed,
// grep) are its children.
func (m *mount) startHarness(name string) *agent {
	m.t.Helper()
	return m.startSession(name, "--harness")
}

// writeErrno is a shell command writing text to the control file path and
// exiting 100+errno on failure (0 on success), so agent.run shows the errno.
func writeErrno(path, text string) string {
	// One line: the agent's loop reads one command per line.
	prog := `import os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    os.write(fd, sys.argv[2].encode())
except OSError as e:
    sys.exit(100 + e.errno)`
	return "python3 -c " + shq("exec("+strconv.Quote(prog)+")") + " " + shq(path) + " " + shq(text)
}

// TestScannerReadsMakeNothingWritable: after grep -r, rg and git grep over
// the tree, a blind write is still refused; a cat of the file then lets it
// through.
func TestScannerReadsMakeNothingWritable(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "x marks the spot\n", "sub/g.txt": "x again\n"}, nil)
	a := m.startAgent("a")
	a.ok("grep -r x . >/dev/null")
	if _, err := exec.LookPath("rg"); err == nil {
		a.ok("rg x . >/dev/null")
	}
	a.ok("find . -name '*.txt' >/dev/null")
	a.refused("echo y > f.txt")
	a.refused("echo y > sub/g.txt")
	if got := m.readBacking("f.txt"); got != "x marks the spot\n" {
		t.Fatalf("f.txt = %q after a refused write", got)
	}
	if n := m.d.Guard.RecordCount("a"); n != 0 {
		t.Fatalf("the session has %d records after scanners only, want 0", n)
	}
	a.ok("cat f.txt >/dev/null && echo y > f.txt")
}

// TestScannerReadsLocalToProcess: a scanner that read a file may replace
// it in the same process (sed -i, with sed configured as a scanner), but
// its read makes the file writable for no one else. git checkout of clean
// files nobody read still passes (docs/DESIGN.md#git-safe).
func TestScannerReadsLocalToProcess(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "alpha\n", "g.txt": "gamma\n"}, func(c *daemon.Config) {
		c.Scanners = append(append([]string(nil), guard.DefaultScanners...), "sed")
	})
	a := m.startAgent("a")
	a.ok("sed -i s/alpha/beta/ f.txt")
	if got := m.readBacking("f.txt"); got != "beta\n" {
		t.Fatalf("sed -i left %q", got)
	}
	a.ok("sed -n p g.txt >/dev/null")
	a.refused("echo y > g.txt")
	if got := m.readBacking("g.txt"); got != "gamma\n" {
		t.Fatalf("g.txt = %q after a refused write", got)
	}
}

// TestScannerSedInPlaceDefault: sed is no scanner by default, and sed -i of
// an unread file passes as before.
func TestScannerSedInPlaceDefault(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "alpha\n"}, nil)
	a := m.startAgent("a")
	a.ok("sed -i s/alpha/beta/ f.txt")
	if got := m.readBacking("f.txt"); got != "beta\n" {
		t.Fatalf("sed -i left %q", got)
	}
}

// TestScannerGitCheckout: git is a scanner, and checking out a branch that
// changes files the session never read still passes; a git status (which
// reads the tree) makes none of them writable for the session.
func TestScannerGitCheckout(t *testing.T) {
	m := gitRepo(t)
	m.mustSession("git status --porcelain >/dev/null && git checkout -q feature && git checkout -q main")
	assertTree(t, m, "main", mainTree)
	a := m.startAgent("a")
	a.ok("touch keep.txt") // its stat no longer matches the index: git status reads it
	a.ok("git status --porcelain >/dev/null")
	a.refused("echo y > keep.txt")
	if got := m.readBacking("keep.txt"); got != "keep\n" {
		t.Fatalf("keep.txt = %q", got)
	}
}

// TestHarnessRootReadsDoNotCount: the harness root's own read (the shell's
// builtin read) lets nothing through; a child's cat does.
func TestHarnessRootReadsDoNotCount(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "one\n"}, nil)
	h := m.startHarness("h")
	var info map[string]any
	b, err := os.ReadFile(m.path(".rubino/sessions/h/info"))
	if err != nil || json.Unmarshal(b, &info) != nil || info["harness"] != true {
		t.Fatalf("info: %v %s", err, b)
	}
	h.ok("read -r x < f.txt")
	h.refused("echo y > f.txt")
	if got := m.readBacking("f.txt"); got != "one\n" {
		t.Fatalf("f.txt = %q after a refused write", got)
	}
	h.ok("cat f.txt >/dev/null")
	h.ok("echo y > f.txt")
	if got := m.readBacking("f.txt"); got != "y\n" {
		t.Fatalf("f.txt = %q", got)
	}
	// A child scanner's reads count for itself only, in harness mode too.
	m.writeBacking("g.txt", "x\n")
	h.ok("grep -r x . >/dev/null")
	h.refused("echo y > g.txt")
}

// TestHarnessDeclareRead: a declared read lets the root's overwrite
// through; a declaration with the hash of other bytes (what the model saw
// before an external edit) is stale; a declaration without hash never
// refreshes a stale record.
func TestHarnessDeclareRead(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "one\n", "g.txt": "two\n", "sub/s.txt": "three\n"}, nil)
	h := m.startHarness("h")
	h.ok("echo 'read f.txt' > .rubino/self/ctl")
	h.ok("echo y > f.txt")

	old := guard.HashBytes([]byte("what the model saw\n")).String()
	h.ok("echo 'read g.txt " + old + "' > .rubino/self/ctl")
	h.refused("echo y > g.txt")
	if why, _ := os.ReadFile(m.path(".rubino/sessions/h/why")); !strings.Contains(string(why), "stale") {
		t.Fatalf("why = %q, want stale", why)
	}
	// A hashless declaration (a partial read, a stub) does not refresh it.
	h.ok("echo 'read g.txt' > .rubino/self/ctl")
	h.refused("echo y > g.txt")
	cur := guard.HashBytes([]byte("two\n")).String()
	h.ok("echo 'read g.txt " + cur + "' > .rubino/self/ctl")
	h.ok("echo y > g.txt")

	// Relative to the caller's cwd.
	h.ok("cd sub && echo 'read s.txt' > ../.rubino/self/ctl")
	h.ok("echo y > sub/s.txt")
}

// TestHarnessCtlErrors: bad declarations fail with the errno the protocol
// names, and only the session itself (or the mount's owner from outside
// every session) may write its ctl.
func TestHarnessCtlErrors(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "one\n"}, nil)
	h := m.startHarness("h")
	a := m.startAgent("a")
	for _, c := range []struct{ cmd, want string }{
		{writeErrno(".rubino/self/ctl", "read /etc/hostname"), "rc=101"},    // EPERM: outside the mount
		{writeErrno(".rubino/self/ctl", "read missing.txt"), "rc=102"},      // ENOENT
		{writeErrno(".rubino/self/ctl", "read f.txt nothex"), "rc=122"},     // EINVAL
		{writeErrno(".rubino/self/ctl", "write f.txt"), "rc=122"},           // EINVAL
		{writeErrno(".rubino/self/ctl", "read .rubino/self/ctl"), "rc=101"}, // EPERM: a control file
		{writeErrno(".rubino/sessions/h/ctl", "edit-failed f.txt"), "rc=0"}, // its own ctl by name
		{writeErrno(".rubino/sessions/a/ctl", "read f.txt"), "rc=102"},      // ENOENT: another session's is hidden
	} {
		if rc := h.run(c.cmd); !strings.HasPrefix(rc, c.want+" ") {
			t.Errorf("%s: %s, want %s", c.cmd, rc, c.want)
		}
	}
	if rc := a.run(writeErrno(".rubino/sessions/h/ctl", "read f.txt")); !strings.HasPrefix(rc, "rc=102 ") {
		t.Fatalf("session a writing h's ctl: %s, want ENOENT (another session's directory is hidden)", rc)
	}
	h.refused("echo y > f.txt") // nothing above declared a read
	// The mount's owner, outside every session, may.
	m.mustSh("echo 'read f.txt' > .rubino/sessions/h/ctl")
	h.ok("echo y > f.txt")
	_, err := m.sh(writeErrno(".rubino/sessions/h/ctl", "read /etc/hostname"))
	if code := exitCode(err); code != 100+int(syscall.EPERM) {
		t.Fatalf("owner declaring a path outside: exit %d (%v), want EPERM", code, err)
	}
}

// TestHarnessEditFailed: edit-failed flags the file so the session's next
// read bypasses dedup.
func TestHarnessEditFailed(t *testing.T) {
	m := newMount(t, map[string]string{"sub/f.txt": "one\n"}, nil)
	h := m.startHarness("h")
	var st syscall.Stat_t
	if err := syscall.Stat(m.backing("sub/f.txt"), &st); err != nil {
		t.Fatal(err)
	}
	id := guard.StatOf(&st).ID
	if m.d.Guard.RecoveryPending("h", id) {
		t.Fatal("recovery pending before edit-failed")
	}
	h.ok("cd sub && echo 'edit-failed f.txt' > ../.rubino/self/ctl")
	if !m.d.Guard.RecoveryPending("h", id) {
		t.Fatal("edit-failed did not flag the file")
	}
}
