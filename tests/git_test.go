package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The git-safe policy (docs/DESIGN.md#git-safe) through a real mount with
// real git: every git command runs in a fresh guard session (`rubinofs
// run`), which has read nothing, so each replacement of a tracked file it
// makes is one the plain read-before-write policy would refuse.

// inSession runs script with /bin/sh in the mount root as a new guard
// session: a session that has read nothing. It returns the combined output
// and the error of the session's command.
//
// First the tracked files' mtimes are set in the past and the index
// refreshed (as the default session): git then trusts its index's stat data
// and reads no file to see whether it changed. A file modified within the
// index's own timestamp tick is "racily clean" to git, which reads it to
// compare, and that read would register it for the session and hide what
// the test is about.
func (m *mount) inSession(script string) (string, error) {
	m.t.Helper()
	if _, err := os.Stat(m.path(".git")); err == nil {
		m.mustSh("git ls-files -z | xargs -0 touch -c -h -d @1000000000 && git update-index -q --refresh; true")
	}
	cmd := exec.Command(rubinofsBin(m.t), "run", "--mount", m.mnt, "--", "/bin/sh", "-c", "cd "+shq(m.mnt)+" && "+script)
	cmd.Dir = m.tmp
	cmd.Env = testEnv(m.tmp)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// mustSession runs script as a new session and fails the test when it
// fails or when anything was refused.
func (m *mount) mustSession(script string) string {
	m.t.Helper()
	out, err := m.inSession(script)
	if err != nil {
		m.t.Fatalf("%s: %v\n%s\ndenials: %v", script, err, out, m.denials())
	}
	if ds := m.denials(); len(ds) != 0 {
		m.t.Fatalf("%s: %d denials: %v\n%s", script, len(ds), ds, out)
	}
	return out
}

// gitRepo makes a repository at the mount root (through the mount, as the
// default session) with branch main and branch feature, where feature
// changes, deletes and adds files, in the root and in subdirectories.
// main is checked out.
func gitRepo(t *testing.T) *mount {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (Debian package git)")
	}
	m := newMount(t, nil, nil)
	// The exclude keeps the control tree out of the repository however the
	// mount lists it.
	m.mustSh(`git init -q -b main . && echo /.rubino >> .git/info/exclude &&
		printf 'keep\n' > keep.txt && printf 'main version\n' > change.txt &&
		printf 'gone\n' > gone.txt && mkdir -p dir && printf 'sub main\n' > dir/sub.txt &&
		printf '#!/bin/sh\necho main\n' > run.sh && chmod +x run.sh &&
		printf 'clean\n' > clean.txt && printf 'committed\n' > dirty.txt &&
		git add -A && git commit -qm main &&
		git checkout -q -b feature &&
		printf 'feature version\n' > change.txt && git rm -q gone.txt &&
		printf 'sub feature\n' > dir/sub.txt && printf '#!/bin/sh\necho feature\n' > run.sh &&
		printf 'new\n' > new.txt && mkdir -p dir2 && printf 'added\n' > dir2/added.txt &&
		git add -A && git commit -qm feature &&
		git checkout -q main`)
	return m
}

// assertTree fails unless the working tree and the index equal branch:
// `git status --porcelain` and `git diff BRANCH --stat` are empty, and want
// (path -> bytes, "" for absent) holds in the backing directory.
func assertTree(t *testing.T, m *mount, branch string, want map[string]string) {
	t.Helper()
	if st := m.mustSh("git status --porcelain"); st != "" {
		t.Errorf("git status after switching to %s:\n%s", branch, st)
	}
	if d := m.mustSh("git diff " + branch + " --stat"); d != "" {
		t.Errorf("git diff %s:\n%s", branch, d)
	}
	for rel, content := range want {
		b, err := os.ReadFile(m.backing(rel))
		switch {
		case content == "" && !os.IsNotExist(err):
			t.Errorf("%s: still present on %s (err %v)", rel, branch, err)
		case content != "" && string(b) != content:
			t.Errorf("%s on %s: %q, want %q (err %v)", rel, branch, b, content, err)
		}
	}
}

var (
	mainTree = map[string]string{
		"keep.txt": "keep\n", "change.txt": "main version\n", "gone.txt": "gone\n",
		"dir/sub.txt": "sub main\n", "run.sh": "#!/bin/sh\necho main\n", "new.txt": "", "dir2/added.txt": "",
	}
	featureTree = map[string]string{
		"keep.txt": "keep\n", "change.txt": "feature version\n", "gone.txt": "",
		"dir/sub.txt": "sub feature\n", "run.sh": "#!/bin/sh\necho feature\n", "new.txt": "new\n", "dir2/added.txt": "added\n",
	}
)

// TestGitCheckoutBranchFreshSession: a fresh session switches to a branch
// that changes, deletes and adds files it never read, and back: git exits
// 0, the tree equals the branch, nothing is refused.
func TestGitCheckoutBranchFreshSession(t *testing.T) {
	m := gitRepo(t)
	m.mustSession("git checkout -q feature")
	assertTree(t, m, "feature", featureTree)
	if b := m.mustSh("./run.sh"); b != "feature\n" {
		t.Errorf("run.sh on feature prints %q", b)
	}
	m.mustSession("git checkout -q main")
	assertTree(t, m, "main", mainTree)
	m.mustSession("git switch -q feature && git switch -q main")
	assertTree(t, m, "main", mainTree)
}

// TestGitCheckoutDirtyUnreadRefused: a change made outside the mount and
// never read by the session is neither in the index nor in HEAD, so git
// may not throw it away: `git checkout -- dirty.txt` and `git reset --hard`
// are refused on it and its bytes are kept. `git stash` passes, and must:
// it reads the file (so the session has seen it) and saves it in the stash
// before it resets the tree.
func TestGitCheckoutDirtyUnreadRefused(t *testing.T) {
	m := gitRepo(t)
	const dirty = "uncommitted work nobody read\n"
	mark := m.appliedMark()
	m.writeBacking("dirty.txt", dirty)
	m.waitApplied(mark, "dirty.txt")
	for _, cmd := range []string{"git checkout -- dirty.txt", "git reset -q --hard", "git checkout -q -f feature"} {
		out, err := m.inSession(cmd)
		if got := m.readBacking("dirty.txt"); got != dirty {
			t.Fatalf("%s (err %v) replaced the unread change: %q\n%s", cmd, err, got, out)
		}
		ds := m.denials()
		if len(ds) == 0 {
			t.Fatalf("%s (err %v): no denial logged\n%s", cmd, err, out)
		}
		if last := ds[len(ds)-1]; last["path"] != "dirty.txt" || last["comm"] != "git" || last["code"] != "unread" {
			t.Errorf("%s: denial %v, want git refused on dirty.txt as unread", cmd, last)
		}
	}
	// The refused operations may have moved HEAD (checkout -f) and left the
	// rest of the tree on feature: go back, keeping dirty.txt's bytes.
	before := len(m.denials())
	m.mustSh("git checkout -q main && git reset -q")
	if out, err := m.inSession("git stash -q"); err != nil || len(m.denials()) != before {
		t.Fatalf("git stash: %v (denials %v)\n%s", err, m.denials()[before:], out)
	}
	if got := m.mustSh("git show stash@{0}:dirty.txt"); got != dirty {
		t.Fatalf("the stash holds %q, want the unread change", got)
	}
	m.mustSh("git stash pop -q")
	if got := m.readBacking("dirty.txt"); got != dirty {
		t.Fatalf("after stash pop: %q", got)
	}
	// A session that has read the change may discard it.
	if out, err := m.inSession("cat dirty.txt >/dev/null && git checkout -- dirty.txt"); err != nil {
		t.Fatalf("checkout after a read: %v\n%s", err, out)
	}
	if got := m.readBacking("dirty.txt"); got != "committed\n" || len(m.denials()) != before {
		t.Fatalf("after a read, git checkout left %q (denials %v)", got, m.denials()[before:])
	}
}

// TestGitSafeNotForOtherTools: the policy trusts git only. A blind
// overwrite of a clean tracked file by the shell, cp or rm is still
// refused, although git holds the bytes it would destroy.
func TestGitSafeNotForOtherTools(t *testing.T) {
	m := gitRepo(t)
	for _, cmd := range []string{"echo x > clean.txt", "cp keep.txt clean.txt", "rm -f clean.txt"} {
		out, err := m.inSession(cmd)
		if err == nil {
			t.Fatalf("%s succeeded on an unread tracked file\n%s", cmd, out)
		}
		if got := m.readBacking("clean.txt"); got != "clean\n" {
			t.Fatalf("%s changed clean.txt: %q", cmd, got)
		}
	}
	if n := len(m.denials()); n != 3 {
		t.Fatalf("%d denials, want 3: %v", n, m.denials())
	}
}

// TestGitOperationsFreshSession: merge and pull (fast-forward), stash and
// stash pop of the session's own change, reset --hard and rebase, each in
// a fresh session: all pass with no denial and leave the tree clean.
func TestGitOperationsFreshSession(t *testing.T) {
	m := gitRepo(t)
	steps := []struct {
		name, script, rev string
		tree              map[string]string
	}{
		{"merge fast-forward", "git merge -q --ff-only feature", "feature", featureTree},
		{"reset --hard", "git reset -q --hard HEAD~1", "feature~1", mainTree},
		{"pull fast-forward", "git pull -q --ff-only . feature", "feature", featureTree},
		{"reset --hard again", "git reset -q --hard HEAD~1", "feature~1", mainTree},
	}
	for _, s := range steps {
		m.mustSession(s.script)
		assertTree(t, m, s.rev, s.tree)
	}
	// The session's own edit, stashed and popped: the edit comes back.
	m.mustSession(`cat keep.txt >/dev/null && printf 'edited\n' >> keep.txt && git stash -q &&
		test "$(cat keep.txt)" = keep && git stash pop -q && git commit -qam edited`)
	if got := m.readBacking("keep.txt"); got != "keep\nedited\n" {
		t.Fatalf("after stash pop: %q", got)
	}
	// Rebase feature onto main (which now has the edit): the files of both
	// branches are replaced by a session that read none of them.
	m.mustSession("git checkout -q feature && git rebase -q main")
	if st := m.mustSh("git status --porcelain; git log --format=%s main..feature"); st != "feature\n" {
		t.Fatalf("after rebase: %q", st)
	}
	want := map[string]string{}
	for k, v := range featureTree {
		want[k] = v
	}
	want["keep.txt"] = "keep\nedited\n"
	assertTree(t, m, "feature", want)
	if !strings.Contains(m.mustSh("git log --format=%s -3"), "edited") {
		t.Fatal("the rebased branch does not contain main's commit")
	}
}
