package tests

// Branches (docs/DESIGN.md#branches): `rubinofs branch new` makes a
// copy-on-write view of a workspace mounted by a CLI daemon, and `rubinofs
// run --branch NAME -- CMD` runs real tools (git, rm, sed, python3) in it
// from the workspace's own paths; the workspace stays byte for byte.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// branchMount is a workspace mounted by a CLI daemon, for branching.
type branchMount struct {
	*cliMount
	env []string
}

// newBranchMount mounts a fresh workspace holding files through the CLI
// (cliDirs, mountDaemon); before mounting, setup (if any) runs in the
// backing directory (a git repository's history, say).
func newBranchMount(t *testing.T, files map[string]string, setup string) *branchMount {
	t.Helper()
	m := cliDirs(t, files)
	env := testEnv(filepath.Join(m.tmp, "home"))
	if setup != "" {
		cmd := exec.Command("sh", "-c", setup)
		cmd.Dir, cmd.Env = m.ws, env
		if out, err := runCombined(t, cmd); err != nil {
			t.Fatalf("%s: %v\n%s", setup, err, out)
		}
	}
	m.mountDaemon()
	return &branchMount{cliMount: m, env: env}
}

// branchDir is STATE/branches/NAME of the mount.
func (m *branchMount) branchDir(name string) string {
	return filepath.Join(m.state, "branches", name)
}

// newBranch runs `rubinofs branch new NAME`, fails the test unless it
// prints the branch's mount path, and registers its cleanup
// (cleanBranch).
func (m *branchMount) newBranch(name string) string {
	t := m.t
	t.Helper()
	dir := m.branchDir(name)
	ownMounts.add(filepath.Join(dir, "mnt"))
	out, err := runCLI(t, m.tmp, m.env, "branch", "new", "--mount", m.mnt, name)
	if err != nil {
		t.Fatalf("branch new %s: %v\n%s", name, err, out)
	}
	pid := 0
	if sm := daemonPidRe.FindStringSubmatch(out); sm != nil {
		pid, _ = strconv.Atoi(sm[1])
	}
	m.cleanBranch(name, pid)
	want := filepath.Join(dir, "mnt")
	if !strings.Contains(out, want+"\n") || !isMounted(t, want) {
		t.Fatalf("branch new %s: want %s printed and mounted\n%s", name, want, out)
	}
	return want
}

// cleanBranch registers a cleanup (run before the workspace's) that
// discards branch name if the test left it, and waits for its daemon (pid,
// or when 0 the pid the branch recorded) to exit; a mount left under the
// branch fails the test.
func (m *branchMount) cleanBranch(name string, pid int) {
	t := m.t
	dir := m.branchDir(name)
	ownMounts.add(filepath.Join(dir, "mnt"))
	t.Cleanup(func() {
		if pid == 0 {
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.pid"))
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if _, err := os.Stat(dir); err == nil {
			if out, err := runCLI(t, m.tmp, m.env, "branch", "discard", "--force", "--mount", m.mnt, name); err != nil {
				t.Errorf("cleanup: branch discard %s: %v\n%s", name, err, out)
			}
		}
		if pid > 0 && !waitPidGone(pid) {
			t.Errorf("branch daemon %d still running after the discard", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, p := range []string{"mnt", "merged"} {
			if isMounted(t, filepath.Join(dir, p)) {
				syscall.Unmount(filepath.Join(dir, p), syscall.MNT_DETACH)
				t.Errorf("%s/%s still mounted after the cleanup; detached", dir, p)
			}
		}
	})
}

// inBranch runs script with sh in branch name through `rubinofs run
// --branch`, with the workspace's mountpoint as its working directory, and
// returns its combined output and error.
func (m *branchMount) inBranch(name, script string) (string, error) {
	m.t.Helper()
	return runCLI(m.t, m.mnt, m.env, "run", "--branch", name, "--", "sh", "-c", script)
}

// mustInBranch is inBranch failing the test when script fails.
func (m *branchMount) mustInBranch(name, script string) string {
	m.t.Helper()
	out, err := m.inBranch(name, script)
	if err != nil {
		m.t.Fatalf("in branch %s: %s: %v\n%s", name, script, err, out)
	}
	return out
}

// treeHash hashes the tree at root: every path, its type and permission
// bits, a file's bytes and a link's target.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		h.Write([]byte(rel + "\x00" + info.Mode().String() + "\x00"))
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			h.Write([]byte(l))
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestBranchIsolatesWorkspace: `git reset --hard` over an uncommitted
// change, `rm -rf` of a directory, `sed -i` and a python3 write, all run
// in a branch from the workspace's mountpoint, leave the workspace byte
// for byte, while the branch shows them (through run --branch and in its
// upper layer).
func TestBranchIsolatesWorkspace(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "one\n", "s.txt": "alpha\n", "p.txt": "py\n"},
		"mkdir -p d/e && echo x > d/e/x && echo y > d/y && git init -q && git add -A && git commit -qm init && echo two > f.txt")
	before := treeHash(t, m.ws)
	m.newBranch("b")
	m.mustInBranch("b", `set -e
cat f.txt >/dev/null
git reset -q --hard
find d -type f -exec cat {} + >/dev/null # the guard lets a session unlink what it read
rm -rf d
cat s.txt >/dev/null
sed -i s/alpha/beta/ s.txt
python3 -c "p='p.txt'; s=open(p).read(); open(p,'w').write(s+'thon\n')"
echo via-backing > `+shq(filepath.Join(m.ws, "back.txt")))
	if after := treeHash(t, m.ws); after != before {
		t.Fatalf("the workspace changed: tree hash %s before, %s after", before, after)
	}
	if b, _ := os.ReadFile(m.path("f.txt")); string(b) != "two\n" {
		t.Fatalf("workspace f.txt through its mount = %q, want the uncommitted %q", b, "two\n")
	}
	got := m.mustInBranch("b", `cat f.txt s.txt p.txt back.txt; test -e d && echo d-still-there; true`)
	if want := "one\nbeta\npy\nthon\nvia-backing\n"; got != want {
		t.Fatalf("in the branch: %q, want %q", got, want)
	}
	up := filepath.Join(m.branchDir("b"), "upper")
	for _, rel := range []string{"f.txt", "s.txt", "p.txt", "back.txt"} {
		if _, err := os.Stat(filepath.Join(up, rel)); err != nil {
			t.Errorf("upper/%s: %v", rel, err)
		}
	}
	if st, err := os.Lstat(filepath.Join(up, "d")); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Errorf("upper/d is no whiteout: %v %v", st, err)
	}
}

// TestBranchGuardRefuses: inside a branch the branch daemon's guard still
// refuses a blind write to a file the session never read, and lets it
// through once read.
func TestBranchGuardRefuses(t *testing.T) {
	m := newBranchMount(t, map[string]string{"u.txt": "unread\n"}, "")
	m.newBranch("g")
	out, err := m.inBranch("g", `echo blind > u.txt`)
	if err == nil || !strings.Contains(out, "denied") {
		t.Fatalf("a blind write in the branch: %v %q, want a refusal", err, out)
	}
	m.mustInBranch("g", `cat u.txt >/dev/null && echo read > u.txt`)
	if got := m.mustInBranch("g", `cat u.txt`); got != "read\n" {
		t.Fatalf("u.txt in the branch = %q", got)
	}
	if got, _ := os.ReadFile(m.backing("u.txt")); string(got) != "unread\n" {
		t.Fatalf("u.txt in the workspace = %q", got)
	}
}

// backing is rel in the backing workspace.
func (m *branchMount) backing(rel string) string { return filepath.Join(m.ws, rel) }

// TestBranchesSeparate: two branches of one workspace do not see each
// other's changes.
func TestBranchesSeparate(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "base\n"}, "")
	m.newBranch("b1")
	m.newBranch("b2")
	m.mustInBranch("b1", `cat f.txt >/dev/null && echo one > f.txt && echo n > n1`)
	m.mustInBranch("b2", `cat f.txt >/dev/null && echo two > f.txt && echo n > n2`)
	if got := m.mustInBranch("b1", `cat f.txt; ls`); got != "one\nf.txt\nn1\n" {
		t.Fatalf("b1 sees %q", got)
	}
	if got := m.mustInBranch("b2", `cat f.txt; ls`); got != "two\nf.txt\nn2\n" {
		t.Fatalf("b2 sees %q", got)
	}
	if got, _ := os.ReadFile(m.path("f.txt")); string(got) != "base\n" {
		t.Fatalf("the workspace sees %q", got)
	}
}

// TestBranchSeesOutsideEdits: an edit made outside the mount to a file the
// branch has not changed shows in the branch, also when the branch read it
// before (its daemon's kernel caches do not hide it); one to a file the
// branch changed does not.
func TestBranchSeesOutsideEdits(t *testing.T) {
	m := newBranchMount(t, map[string]string{"o.txt": "before\n", "c.txt": "before\n"}, "")
	m.newBranch("b")
	m.mustInBranch("b", `cat o.txt c.txt >/dev/null && echo mine > c.txt && cat o.txt`)
	for _, rel := range []string{"o.txt", "c.txt"} {
		if err := os.WriteFile(m.backing(rel), []byte("outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Waits for the branch to show it (bounded by runCLI's failsafe).
	m.mustInBranch("b", `until grep -q outside o.txt; do sleep 0.05; done`)
	if got := m.mustInBranch("b", `cat c.txt`); got != "mine\n" {
		t.Fatalf("c.txt in the branch = %q, want the branch's own", got)
	}
}

// TestBranchLsDiscard: `branch ls` shows the branch and its changed-path
// count; `branch discard` refuses while a kept session of the branch is
// live and discards with --force, leaving nothing mounted and no
// directory.
func TestBranchLsDiscard(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "x\n", "g.txt": "y\n"}, "")
	bmnt := m.newBranch("b")
	m.mustInBranch("b", `cat f.txt g.txt >/dev/null && echo z > f.txt && rm g.txt && echo n > new.txt`)
	out, err := runCLI(t, m.tmp, m.env, "branch", "ls", "--json", "--mount", m.mnt)
	if err != nil {
		t.Fatalf("branch ls: %v\n%s", err, out)
	}
	var rows []struct {
		Name    string
		Changed int
		Mounted bool
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].Name != "b" || rows[0].Changed != 3 || !rows[0].Mounted {
		t.Fatalf("branch ls --json = %s (%v), want b with 3 changed paths, mounted", out, err)
	}
	if out, err := runCLI(t, m.tmp, m.env, "session", "new", "--mount", bmnt, "kept", "--keep"); err != nil {
		t.Fatalf("session new --keep: %v\n%s", err, out)
	}
	// A command running in the branch: its private namespace holds a
	// bind of the branch daemon's mount.
	run := cliCommand(t, m.mnt, m.env, "run", "--branch", "b", "--session", "runner", "--", "sh", "-c", "echo ready; read x")
	stdin, err := run.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); run.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("run --branch: %q %v", line, err)
	}
	out, err = runCLI(t, m.tmp, m.env, "branch", "discard", "--mount", m.mnt, "b")
	if exitCode(err) != 1 || !strings.Contains(out, "kept") || !strings.Contains(out, "runner") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("branch discard with live sessions: exit %d, %q; want a one-line refusal naming them", exitCode(err), out)
	}
	pid := statusPid(bmnt)
	if out, err := runCLI(t, m.tmp, m.env, "branch", "discard", "--force", "--mount", m.mnt, "b"); err != nil {
		t.Fatalf("branch discard --force: %v\n%s", err, out)
	}
	if !waitPidGone(pid) {
		t.Fatalf("branch daemon %d still running after discard", pid)
	}
	stdin.Close()
	run.Wait()
	dir := m.branchDir("b")
	for _, p := range []string{"mnt", "merged"} {
		if isMounted(t, filepath.Join(dir, p)) {
			t.Fatalf("%s still mounted after discard", p)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s still there after discard", dir)
	}
	if b, _ := os.ReadFile(m.path("g.txt")); string(b) != "y\n" {
		t.Fatalf("the workspace lost g.txt: %q", b)
	}
}

// TestBranchBadInput: a bad name, an existing name, discarding an unknown
// branch and running in one: each a one-line error, exit 2 or 1.
func TestBranchBadInput(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "x\n"}, "")
	m.newBranch("b")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"branch", "new", "--mount", m.mnt, "../x"}, 2, "bad branch name"},
		{[]string{"branch", "new", "--mount", m.mnt}, 2, "usage"},
		{[]string{"branch", "new", "--mount", m.mnt, "b"}, 1, "exists"},
		{[]string{"branch", "discard", "--mount", m.mnt, "nope"}, 1, "no branch nope"},
		{[]string{"run", "--branch", "nope", "--mount", m.mnt, "--", "true"}, 1, "no branch nope"},
		{[]string{"run", "--branch", "a/b", "--mount", m.mnt, "--", "true"}, 2, "bad branch name"},
	} {
		out, err := runCLI(t, m.tmp, m.env, c.args...)
		line := strings.TrimSpace(out)
		if exitCode(err) != c.code || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
			t.Errorf("rubinofs %v: exit %d %q, want exit %d and one line with %q", c.args, exitCode(err), out, c.code, c.want)
		}
	}
	// Not root: a clear error, before anything is looked at.
	bin := sharedBin(t)
	for _, args := range [][]string{{"branch", "new", "--mount", m.mnt, "c"}, {"run", "--branch", "b", "--mount", m.mnt, "--", "true"}} {
		cmd := exec.Command("sh", "-c", asNobody+shq(bin)+" "+strings.Join(args, " "))
		cmd.Dir = "/"
		out, err := runCombined(t, cmd)
		if exitCode(err) != 1 || !strings.Contains(out, "needs root") || strings.Contains(strings.TrimSpace(out), "\n") {
			t.Errorf("rubinofs %v as uid 65534: exit %d %q, want exit 1 and one line saying it needs root", args, exitCode(err), out)
		}
	}
	if !isMounted(t, filepath.Join(m.branchDir("b"), "mnt")) {
		t.Fatal("the existing branch b was unmounted by the failed branch new b")
	}
}

// TestBranchInPlace: for a workspace mounted in place the branch's lower
// layer is the directory hidden under the mount (the branch's reads do not
// go through the workspace's daemon); a command in the branch changes
// nothing of the workspace.
func TestBranchInPlace(t *testing.T) {
	cm := cliInPlaceDirs(t, map[string]string{"f.txt": "base\n"})
	tmp, ws := cm.tmp, cm.ws
	out, code := cliCode(t, tmp, "mount", "--daemon", "--in-place", "--state-dir", cm.state, ws)
	if code != 0 {
		t.Fatalf("mount --in-place: exit %d\n%s", code, out)
	}
	cm.trackAgentDaemon(out)
	m := &branchMount{cliMount: cm, env: testEnv(filepath.Join(tmp, "home"))}
	m.newBranch("b")
	reads := func() any { return m.status()["counts"].(map[string]any)["reads"] }
	before := reads()
	m.mustInBranch("b", `cat f.txt >/dev/null && echo branch > f.txt && echo n > new.txt`)
	// The overlay reads the hidden directory, not the workspace's mount.
	if after := reads(); after != before {
		t.Fatalf("the branch's reads went through the workspace's daemon: its reads count %v before, %v after", before, after)
	}
	if got := m.mustInBranch("b", `cat f.txt new.txt`); got != "branch\nn\n" {
		t.Fatalf("in the branch: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "f.txt")); string(got) != "base\n" {
		t.Fatalf("the workspace's f.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Fatal("new.txt reached the workspace")
	}
}

// TestBranchInheritsMountFlags: the branch daemon is guarded as its
// workspace is: a workspace mounted with --mode warn lets a blind write
// through in its branch too, while a workspace's own flags such as its
// state directory are not inherited (the branch keeps its own).
func TestBranchInheritsMountFlags(t *testing.T) {
	cm := cliDirs(t, map[string]string{"u.txt": "unread\n"})
	cm.mountDaemon("--mode", "warn")
	m := &branchMount{cliMount: cm, env: testEnv(filepath.Join(cm.tmp, "home"))}
	bmnt := m.newBranch("b")
	m.mustInBranch("b", `echo blind > u.txt`)
	st := readStatus(t, bmnt)
	if st["mode"] != "warn" {
		t.Fatalf("the branch daemon's mode = %v, want the workspace's warn", st["mode"])
	}
	if dir := st["state"].(map[string]any)["dir"]; dir != filepath.Join(m.branchDir("b"), "state") {
		t.Fatalf("the branch daemon's state dir = %v", dir)
	}
}

// TestBranchDiffThroughCLI: `rubinofs branch diff NAME` after real tools
// changed the branch shows, as git diff does, the edited file's hunk, the
// new file, the deleted one and a binary file named; --stat lists the
// paths with A/M/D; the workspace's own files are not in it.
func TestBranchDiffThroughCLI(t *testing.T) {
	m := newBranchMount(t, map[string]string{"a.txt": "one\ntwo\n", "gone.txt": "bye\n", "same.txt": "s\n"}, "")
	m.newBranch("b")
	m.mustInBranch("b", `set -e
cat a.txt gone.txt same.txt >/dev/null
sed -i s/two/TWO/ a.txt
rm gone.txt
echo new > new.txt
printf 'bin\000ary' > blob.bin`)
	out, err := runCLI(t, m.tmp, m.env, "branch", "diff", "--mount", m.mnt, "b")
	if err != nil {
		t.Fatalf("branch diff: %v\n%s", err, out)
	}
	for _, want := range []string{"diff --git a/a.txt b/a.txt", "-two\n+TWO\n", "deleted file mode 100644", "--- a/gone.txt",
		"new file mode 100644", "+new\n", "Binary files /dev/null and b/blob.bin differ"} {
		if !strings.Contains(out, want) {
			t.Errorf("branch diff lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "same.txt") {
		t.Errorf("branch diff shows same.txt, which the branch only read:\n%s", out)
	}
	stat, err := runCLI(t, m.tmp, m.env, "branch", "diff", "--stat", "--mount", m.mnt, "b")
	if err != nil {
		t.Fatalf("branch diff --stat: %v\n%s", err, stat)
	}
	for _, want := range []string{"M\ta.txt", "D\tgone.txt", "A\tnew.txt", "A\tblob.bin"} {
		if !strings.Contains(stat, want) {
			t.Errorf("branch diff --stat lacks %q:\n%s", want, stat)
		}
	}
	if got := m.readBackingFile(t, "a.txt"); got != "one\ntwo\n" {
		t.Errorf("workspace a.txt = %q", got)
	}
}

// readBackingFile reads rel from the workspace's backing directory.
func (m *branchMount) readBackingFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(m.backing(rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
