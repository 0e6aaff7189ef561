package tests

// Everyday agent workflows through a real mount, with the real tools: the
// recursive ones (grep -r, rg --hidden, find, tar, cp -r, zip -r, rsync -a)
// and git run from the mount root while a reader is attached to
// .rubino/accesslog, and never see the control tree, which is left out of
// the root's listing but reachable by name
// (docs/DESIGN.md#control-tree-visibility). Every command is bounded by
// workflowDeadline: a hang detector (a tool stuck on a control file never
// returns), never a timed assertion.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/tasks"
)

// workflowDeadline bounds one command: far above any honest run on a
// loaded machine, so only a hang reaches it.
const workflowDeadline = 2 * time.Minute

// boundedSh runs script with /bin/sh in the mount's subdirectory dir (as
// shIn) and returns its combined output and error. A command still running
// at workflowDeadline is killed and fails the test as a hang.
func (m *mount) boundedSh(dir, script string) (string, error) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), workflowDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "cd "+shq(m.path(dir))+" && "+script)
	cmd.Dir = m.tmp
	cmd.Env = testEnv(m.tmp)
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		m.t.Fatalf("%s: still running after %v: a hang\n%s", script, workflowDeadline, b)
	}
	return string(b), err
}

// mustBounded is boundedSh at the mount root, failing the test when the
// script fails.
func (m *mount) mustBounded(script string) string {
	m.t.Helper()
	out, err := m.boundedSh("", script)
	if err != nil {
		m.t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// attachAccessLogCat starts `cat .rubino/accesslog` as a reader of its own
// (a separate process, as a user's terminal would be) and returns once it
// has read its first line, so it is attached. t.Cleanup kills it by pid.
func attachAccessLogCat(t *testing.T, m *mount) {
	t.Helper()
	cmd := exec.Command("cat", m.path(".rubino/accesslog"))
	cmd.Dir = m.tmp
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		if !sc.Scan() { // a line of our own ops, or the idle heartbeat
			first <- fmt.Errorf("cat ended before its first line: %v", sc.Err())
			return
		}
		first <- nil
		for sc.Scan() {
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-drained
		cmd.Wait()
	})
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("reading .rubino/accesslog: %v", err)
		}
	case <-time.After(workflowDeadline):
		t.Fatal("cat .rubino/accesslog printed nothing, not even a heartbeat")
	}
}

// workflowFiles is a small project in which every file contains an "x".
var workflowFiles = map[string]string{
	"README":             "x marks the spot\n",
	"src/main.go":        "package main // x\n",
	"src/lib/util.go":    "package lib // x\n",
	"docs/notes.md":      "# notes\nx\n",
	".hidden/config.txt": "x=1\n",
}

// noCtl fails when out names the control tree.
func noCtl(t *testing.T, what, out string) {
	t.Helper()
	if strings.Contains(out, ".rubino") {
		t.Errorf("%s sees the control tree:\n%s", what, out)
	}
}

// wantAllFiles fails unless out names every file of workflowFiles.
func wantAllFiles(t *testing.T, what, out string) {
	t.Helper()
	for name := range workflowFiles {
		if !strings.Contains(out, name) {
			t.Errorf("%s misses %s:\n%s", what, name, out)
		}
	}
}

// sameTree fails unless dir holds exactly workflowFiles, byte for byte.
func sameTree(t *testing.T, what, dir string) {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for name, content := range workflowFiles {
		if got[name] != content {
			t.Errorf("%s: %s is %q, want %q", what, name, got[name], content)
		}
	}
	for name := range got {
		if _, ok := workflowFiles[name]; !ok {
			t.Errorf("%s holds %s, which the workspace does not", what, name)
		}
	}
}

// TestWorkflowRecursiveToolsAtRoot runs the recursive tools over the
// mount root while cat reads .rubino/accesslog: each finishes, sees every
// workspace file and nothing of the control tree, which stays reachable
// by name.
func TestWorkflowRecursiveToolsAtRoot(t *testing.T) {
	m := newMount(t, workflowFiles, nil)
	attachAccessLogCat(t, m)
	out := t.TempDir()

	t.Run("ls", func(t *testing.T) {
		ls := m.mustBounded("ls -a")
		noCtl(t, "ls -a", ls)
		if !slices.Contains(strings.Fields(ls), "README") {
			t.Errorf("ls -a: %q", ls)
		}
		if got := m.mustBounded("ls .rubino"); !slices.Contains(strings.Fields(got), "status") || !slices.Contains(strings.Fields(got), "accesslog") {
			t.Errorf("ls .rubino: %q", got)
		}
		if got := m.mustBounded("cat .rubino/status"); !strings.Contains(got, `"workspace"`) {
			t.Errorf("cat .rubino/status: %q", got)
		}
		if got := m.mustBounded("cd .rubino && readlink self && test -d guard && echo ok"); !strings.HasSuffix(got, "ok\n") || strings.HasPrefix(got, "\n") {
			t.Errorf("cd .rubino, readlink self: %q", got)
		}
		if got := m.mustBounded("stat -c %F .rubino"); got != "directory\n" {
			t.Errorf("stat .rubino: %q", got)
		}
	})
	t.Run("grep", func(t *testing.T) {
		got := m.mustBounded("grep -r x .")
		noCtl(t, "grep -r", got)
		wantAllFiles(t, "grep -r", got)
	})
	t.Run("rg", func(t *testing.T) {
		if _, err := exec.LookPath("rg"); err != nil {
			t.Skip("rg is not installed (Debian package ripgrep)")
		}
		got := m.mustBounded("rg --hidden --no-ignore x")
		noCtl(t, "rg --hidden", got)
		wantAllFiles(t, "rg --hidden", got)
	})
	t.Run("find", func(t *testing.T) {
		got := m.mustBounded("find .")
		noCtl(t, "find", got)
		wantAllFiles(t, "find", got)
	})
	t.Run("tar", func(t *testing.T) {
		// GNU tar reads no file content into /dev/null; the second
		// archive is read in full.
		m.mustBounded("tar cf /dev/null .")
		ar := filepath.Join(out, "ws.tar")
		m.mustBounded("tar cf " + shq(ar) + " .")
		dst := filepath.Join(out, "untar")
		os.Mkdir(dst, 0o755)
		list := m.mustBounded("tar tf " + shq(ar) + " && tar xf " + shq(ar) + " -C " + shq(dst))
		noCtl(t, "tar", list)
		sameTree(t, "the tar archive", dst)
	})
	t.Run("cp", func(t *testing.T) {
		dst := filepath.Join(out, "copy")
		m.mustBounded("cp -r . " + shq(dst))
		sameTree(t, "cp -r", dst)
	})
	t.Run("rsync", func(t *testing.T) {
		dst := filepath.Join(out, "rsync")
		m.mustBounded("rsync -a ./ " + shq(dst+"/"))
		sameTree(t, "rsync -a", dst)
	})
	t.Run("zip", func(t *testing.T) {
		z := filepath.Join(out, "ws.zip")
		dst := filepath.Join(out, "unzip")
		list := m.mustBounded("zip -qr " + shq(z) + " . && unzip -Z1 " + shq(z) + " && unzip -q " + shq(z) + " -d " + shq(dst))
		noCtl(t, "zip -r", list)
		sameTree(t, "zip -r", dst)
	})
}

// TestWorkflowShadowedRubinoStaysHidden: a real .rubino directory in the
// workspace is shadowed by the control tree, and neither is listed; the
// root's link count matches the listed subdirectories, so find (which may
// trust it) sees every subdirectory.
func TestWorkflowShadowedRubinoStaysHidden(t *testing.T) {
	m := newMount(t, map[string]string{".rubino/real.txt": "x real\n", "a/f": "x\n", "b/g": "x\n"}, nil)
	noCtl(t, "ls -a", m.mustBounded("ls -a"))
	if got := m.mustBounded("cat .rubino/status"); !strings.Contains(got, `"shadowed_rubino": true`) {
		t.Errorf("status does not report the shadowed .rubino:\n%s", got)
	}
	if out, err := m.boundedSh("", "cat .rubino/real.txt"); err == nil {
		t.Errorf("the shadowed .rubino/real.txt is reachable: %q", out)
	}
	got := m.mustBounded("grep -r x . && find .")
	noCtl(t, "grep -r, find", got)
	if !strings.Contains(got, "./a/f") || !strings.Contains(got, "./b/g") {
		t.Errorf("grep -r, find: %q", got)
	}
	nlink, err := strconv.Atoi(strings.TrimSpace(m.mustBounded("stat -c %h .")))
	if err != nil {
		t.Fatal(err)
	}
	if dirs := strings.Fields(m.mustBounded("find . -mindepth 1 -maxdepth 1 -type d")); nlink != 2+len(dirs) {
		t.Errorf("root nlink %d, listed subdirectories %v", nlink, dirs)
	}
}

// TestWorkflowGitCommitIsClean: in a fresh mount, with a reader on the
// access log, git init, add -A and commit leave `git status --porcelain`
// empty and commit nothing of .rubino; stash -u and pop round-trip byte for
// byte; clean -fdn lists only the workspace's own untracked file. The
// files are created through the mount (the default session's own
// creations), so the guard's git policy is not what is tested here.
func TestWorkflowGitCommitIsClean(t *testing.T) {
	m := newMount(t, nil, nil)
	attachAccessLogCat(t, m)
	m.mustBounded(`mkdir -p src && printf 'package main // x\n' > src/main.go && printf 'hello\n' > README && printf 'tmp\n' > .env.local`)
	if got := m.mustBounded("git init -q && git status --porcelain -uall"); got != "?? .env.local\n?? README\n?? src/main.go\n" {
		t.Errorf("git status before the first commit:\n%s", got)
	}
	m.mustBounded("git add -A && git commit -qm initial")
	if got := m.mustBounded("git status --porcelain --ignored"); got != "" {
		t.Errorf("git status after add -A and commit:\n%s", got)
	}
	if got := m.mustBounded("git ls-tree -r --name-only HEAD"); got != ".env.local\nREADME\nsrc/main.go\n" {
		t.Errorf("the commit holds:\n%s", got)
	}

	// stash -u: a tracked change and an untracked file go away and come
	// back byte for byte.
	m.mustBounded(`printf 'hello\nchanged\n' > README && printf 'new\n' > untracked.txt`)
	m.mustBounded("git stash -u -q")
	if got := m.readBacking("README"); got != "hello\n" {
		t.Errorf("README after stash -u: %q", got)
	}
	if _, err := os.Stat(m.backing("untracked.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("untracked.txt after stash -u: %v", err)
	}
	if out, err := m.boundedSh("", "git stash pop -q"); err != nil {
		t.Fatalf("git stash pop: %v\n%s", err, out)
	}
	if got := m.readBacking("README"); got != "hello\nchanged\n" {
		t.Errorf("README after stash pop: %q", got)
	}
	if got := m.readBacking("untracked.txt"); got != "new\n" {
		t.Errorf("untracked.txt after stash pop: %q", got)
	}
	if got := m.mustBounded("git stash list"); got != "" {
		t.Errorf("stash pop left a stash: %q", got)
	}
	if got := m.mustBounded("git status --porcelain"); got != " M README\n?? untracked.txt\n" {
		t.Errorf("git status after stash pop:\n%s", got)
	}
	if got := m.mustBounded("git clean -fdn"); got != "Would remove untracked.txt\n" {
		t.Errorf("git clean -fdn:\n%s", got)
	}
}

// nonblockRead is a python3 reader that opens argv[1] with O_NONBLOCK and
// reads until a read fails with EAGAIN (printing "EAGAIN after N reads"),
// reaches end of file ("EOF"), or gives up after 10000 reads of data: a
// reader never blocked, whatever it printed.
const nonblockRead = `
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
data = b""
for n in range(10000):
    try:
        b = os.read(fd, 65536)
    except BlockingIOError:
        print("EAGAIN after %d reads" % n)
        break
    if not b:
        print("EOF " + data.decode())
        break
    data += b
else:
    print("never EAGAIN")
`

// nonblockMount mounts a fresh workspace with the nonblockRead script
// next to it and returns a runner of the script on a mount-relative path.
func nonblockMount(t *testing.T) (*mount, func(rel string) string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	m := newMount(t, nil, nil)
	script := filepath.Join(m.tmp, "nonblock.py")
	if err := os.WriteFile(script, []byte(nonblockRead), 0o644); err != nil {
		t.Fatal(err)
	}
	return m, func(rel string) string { return m.mustBounded("python3 " + shq(script) + " " + shq(rel)) }
}

// TestWorkflowNonBlockingAccessLog: a reader that opens .rubino/accesslog
// with O_NONBLOCK (while cat reads it too) drains what is pending, then
// gets EAGAIN instead of blocking.
func TestWorkflowNonBlockingAccessLog(t *testing.T) {
	m, read := nonblockMount(t)
	attachAccessLogCat(t, m)
	if got := read(".rubino/accesslog"); !strings.HasPrefix(got, "EAGAIN after ") {
		t.Errorf("O_NONBLOCK read of .rubino/accesslog: %q", got)
	}
}

// TestWorkflowNonBlockingTaskWait: an O_NONBLOCK read of a running task's
// wait is EAGAIN at once; once the task ended, the same read returns its
// outcome.
func TestWorkflowNonBlockingTaskWait(t *testing.T) {
	m, read := nonblockMount(t)
	id := m.spawnSh("exec sleep 1000")
	m.waitStatus(id, tasks.StatusRunning)
	if got := read(".rubino/agents/" + id + "/wait"); got != "EAGAIN after 0 reads\n" {
		t.Errorf("O_NONBLOCK read of a running task's wait: %q", got)
	}
	m.mustBounded("echo stop > .rubino/agents/" + id + "/ctl")
	m.waitStatus(id, tasks.StatusStopped)
	if got := read(".rubino/agents/" + id + "/wait"); !strings.HasPrefix(got, "EOF stopped\n") {
		t.Errorf("O_NONBLOCK read of a stopped task's wait: %q", got)
	}
}
