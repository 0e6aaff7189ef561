package tests

// An attacker's review of branches (docs/DESIGN.md#branch-merge,
// #branch-diff): an agent confined to a branch controls every byte of the
// branch's upper directory and can race the merge; another session changes
// the workspace while a merge runs. Each test is one attack that once
// worked.

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// confirmMerge is a `branch merge --confirm` stopped at its question: the
// plan is made and printed, nothing applied yet.
type confirmMerge struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	errR   *os.File
	stdout strings.Builder
	asked  string
	done   chan error
}

// startConfirmMerge starts `rubinofs branch merge --confirm ARGS... NAME`
// and returns once it asks (its plan is printed).
func (m *branchMount) startConfirmMerge(name string, args ...string) *confirmMerge {
	t := m.t
	t.Helper()
	c := &confirmMerge{t: t, done: make(chan error, 1)}
	c.cmd = cliCommand(t, m.tmp, m.env, append(append([]string{"branch", "merge", "--confirm", "--mount", m.mnt}, args...), name)...)
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.errR, c.cmd.Stderr, c.cmd.Stdout = r, w, &c.stdout
	// Its own process group, so the failsafe kills the re-executed child
	// too (a hung merge holds the stderr pipe).
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	kill := func() { syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) }
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close() // the child holds its own copy
	t.Cleanup(kill)
	go func() {
		var hung atomic.Bool
		timer := time.AfterFunc(cliFailsafe, func() { hung.Store(true); kill() })
		err := c.cmd.Wait()
		timer.Stop()
		if hung.Load() {
			err = errHung
		}
		c.done <- err
	}()
	buf := make([]byte, 512)
	for !strings.Contains(c.asked, "[y/N] ") {
		n, err := r.Read(buf)
		c.asked += string(buf[:n])
		if err != nil {
			t.Fatalf("the merge never asked (%v): %q\n%s", <-c.done, c.asked, c.stdout.String())
		}
	}
	return c
}

// errHung is the error of a merge killed by runBounded's failsafe.
var errHung = os.ErrDeadlineExceeded

// answer says yes, waits for the merge and returns its whole output and
// exit status; it fails the test when the merge hung.
func (c *confirmMerge) answer() (string, int) {
	c.t.Helper()
	c.stdin.Write([]byte("y\n"))
	c.stdin.Close()
	rest, _ := io.ReadAll(c.errR)
	err := <-c.done
	out := c.stdout.String() + c.asked + string(rest)
	if err == errHung {
		c.t.Fatalf("the merge hung (killed after %v)\n%s", cliFailsafe, out)
	}
	return out, exitCode(err)
}

// TestBranchReviewSwapAfterPlan: the agent in the branch swaps its files
// between the merge's plan and its apply (while --confirm waits, a session
// of the branch may start after the merge checked for live ones): a file
// becomes a symlink to a root-only file outside the workspace, another a
// fifo, a directory a symlink to a root-only directory. The merge, root,
// must copy none of those bytes into the workspace (where the file keeps
// the plan's owner, 65534, and mode 0644: a read of what the agent could
// not read), must not hang on the fifo, and says the branch changed.
func TestBranchReviewSwapAfterPlan(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "x\n"}, "")
	secretDir := filepath.Join(m.tmp, "secret")
	if err := os.Mkdir(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "s.txt"), []byte("TOPSECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.newBranch("b")
	m.mustInBranch("b", `set -e
echo mine > a.txt && echo mine > z.txt && mkdir d && echo mine > d/s.txt
chown 65534:65534 a.txt z.txt d/s.txt && chmod 644 a.txt z.txt d/s.txt`)
	c := m.startConfirmMerge("b", "--partial")
	m.mustInBranch("b", `set -e
cat a.txt z.txt d/s.txt >/dev/null
rm a.txt && ln -s `+shq(filepath.Join(secretDir, "s.txt"))+` a.txt
rm z.txt && mkfifo z.txt
rm -r d && ln -s `+shq(secretDir)+` d`)
	out, code := c.answer()
	for _, rel := range []string{"a.txt", "d/s.txt", "z.txt"} {
		if b, _ := os.ReadFile(m.backing(rel)); strings.Contains(string(b), "TOPSECRET") {
			t.Errorf("the merge copied a root-only file into the workspace's %s\n%s", rel, out)
		}
	}
	if code != 1 || strings.Count(out, "refused  ") != 3 || !strings.Contains(out, "changed in the branch since the plan") {
		t.Fatalf("merge: exit %d, want the 3 swapped paths refused as changed in the branch\n%s", code, out)
	}
}

// TestBranchReviewNoForgedLines: a file name with a newline, made in the
// workspace by another session, reaches the merge's reason for a
// conflict: it must not start a line of its own (a forged plan line).
func TestBranchReviewNoForgedLines(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "x\n"}, "mkdir dd && echo a > dd/a")
	m.newBranch("n")
	m.mustInBranch("n", `cat dd/a >/dev/null && rm -rf dd`)
	if err := os.WriteFile(m.backing("dd/x\nremove   evil"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := m.merge("n", "--dry-run")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "conflict ") && !strings.HasPrefix(line, "remove   ") && !strings.HasPrefix(line, "rubinofs: branch n: ") {
			t.Errorf("a line the plan does not make: %q", line)
		}
		if strings.HasPrefix(line, "remove   evil") {
			t.Errorf("a forged plan line: %q", line)
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("merge --dry-run: exit %d\n%s", code, out)
	}
}

// TestBranchReviewStaleSymlink: the branch retargets a symlink; before the
// merge applies, another session retargets the workspace's symlink too
// (here outside the mount). The guard hashes files, not symlinks, so no
// declaration covers it: the merge must see the change itself and refuse,
// leaving the workspace's symlink as the other session made it (a stale
// write otherwise, silently).
func TestBranchReviewStaleSymlink(t *testing.T) {
	m := newBranchMount(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, "ln -s a.txt l")
	m.newBranch("s")
	m.mustInBranch("s", `ln -sfn b.txt l`)
	c := m.startConfirmMerge("s")
	if err := os.Remove(m.backing("l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other.txt", m.backing("l")); err != nil {
		t.Fatal(err)
	}
	out, code := c.answer()
	if got, _ := os.Readlink(m.backing("l")); got != "other.txt" {
		t.Fatalf("the merge replaced a file it never saw (l = %q): exit %d\n%s", got, code, out)
	}
	if code != 1 || !strings.Contains(out, "refused  l") {
		t.Fatalf("merge: exit %d, want l refused\n%s", code, out)
	}
}

// TestBranchReviewDiffQuotesNames: a file name with a newline and a tab,
// made by the agent in its branch, cannot forge a line of `branch diff`
// or `branch diff --stat`: both quote it as git does (core.quotePath off).
func TestBranchReviewDiffQuotesNames(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "x\n"}, "")
	m.newBranch("q")
	m.mustInBranch("q", `printf 'y\n' > "$(printf 'x\nA\tevil')"`)
	out, err := runCLI(t, m.tmp, m.env, "branch", "diff", "--stat", "--mount", m.mnt, "q")
	if err != nil || out != "A\t\"x\\nA\\tevil\"\n" {
		t.Errorf("branch diff --stat: %v %q, want one line with the name quoted", err, out)
	}
	out, err = runCLI(t, m.tmp, m.env, "branch", "diff", "--mount", m.mnt, "q")
	if err != nil || !strings.HasPrefix(out, "diff --git \"a/x\\nA\\tevil\" \"b/x\\nA\\tevil\"\nnew file mode 100644\n") ||
		!strings.Contains(out, "\n+++ \"b/x\\nA\\tevil\"\n") || strings.Contains(out, "\nA\tevil") {
		t.Errorf("branch diff: %v, want the name quoted in every header\n%s", err, out)
	}
}
