package tests

// Merging branches back (docs/DESIGN.md#branch-merge): `rubinofs branch
// merge NAME` replays what sed, rm and python did in a branch onto the
// workspace through the guard; a text file changed on both sides in
// disjoint hunks merges 3-way, the same line changed twice is a conflict
// that changes nothing, and `rubinofs rewind` undoes a merge.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// lines is n numbered lines "line 1\n" ... "line n\n".
func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// merge runs `rubinofs branch merge ARGS... NAME` and returns its output
// and exit status.
func (m *branchMount) merge(name string, args ...string) (string, int) {
	m.t.Helper()
	out, err := runCLI(m.t, m.tmp, m.env, append(append([]string{"branch", "merge", "--mount", m.mnt}, args...), name)...)
	return out, exitCode(err)
}

// mergeUndoRe finds a merge's undo command in its output.
var mergeUndoRe = regexp.MustCompile(`undo: rubinofs rewind --session (\S+) --to (\S+)`)

// TestBranchMergeTwoBranches: three branches made from one workspace. The
// first (sed on one line, a new file, an rm, a python write) merges; the
// second, which sed'ed a line far from the first's, merges 3-way over it;
// the third changed the first's line too: its merge is a conflict and
// leaves the workspace byte for byte, --partial applies the rest, and
// rewind undoes that merge.
func TestBranchMergeTwoBranches(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": lines(20), "del.txt": "doomed\n", "p.txt": "py\n", "bin.dat": "a\x00b\n", "x.sh": "echo\n"},
		"ln -s f.txt old.lnk && ln -s p.txt re.lnk")
	for _, b := range []string{"b1", "b2", "b3"} {
		m.newBranch(b)
	}
	m.mustInBranch("b1", `set -e
sed -i 's/^line 2$/line two/' f.txt
echo new > new1.txt
cat del.txt >/dev/null && rm del.txt
python3 -c "p='p.txt'; s=open(p).read(); open(p,'w').write(s+'thon\n')"
cat bin.dat >/dev/null && printf 'x\000y\n' > bin.dat`)
	m.mustInBranch("b2", `set -e
sed -i 's/^line 18$/line eighteen/' f.txt
mkdir -p sub/dir && echo deep > sub/dir/deep.txt
ln -s sub/dir/deep.txt new.lnk && rm old.lnk && ln -sfn del.txt re.lnk
cat x.sh >/dev/null && chmod 755 x.sh`)
	m.mustInBranch("b3", `sed -i 's/^line 2$/line TWO/' f.txt && echo ok > ok3.txt && cat bin.dat >/dev/null && printf 'q\000\n' > bin.dat`)

	out, code := m.merge("b1")
	if code != 0 || !strings.Contains(out, "applying as session ") {
		t.Fatalf("merge b1: exit %d, want it merged, naming its undo before applying\n%s", code, out)
	}
	want1 := strings.Replace(lines(20), "line 2\n", "line two\n", 1)
	for rel, want := range map[string]string{"f.txt": want1, "new1.txt": "new\n", "p.txt": "py\nthon\n", "bin.dat": "x\x00y\n"} {
		if got, err := os.ReadFile(m.backing(rel)); string(got) != want {
			t.Errorf("after merging b1, %s = %q (%v), want %q", rel, got, err, want)
		}
	}
	if _, err := os.Stat(m.backing("del.txt")); !os.IsNotExist(err) {
		t.Errorf("after merging b1, del.txt: %v, want it removed", err)
	}

	out, code = m.merge("b2")
	if code != 0 || !strings.Contains(out, "merge    f.txt: changed on both sides in disjoint hunks") {
		t.Fatalf("merge b2: exit %d, want a 3-way merge of f.txt\n%s", code, out)
	}
	want2 := strings.Replace(want1, "line 18\n", "line eighteen\n", 1)
	if got, _ := os.ReadFile(m.backing("f.txt")); string(got) != want2 {
		t.Fatalf("after merging b2, f.txt = %q, want %q", got, want2)
	}
	if got, _ := os.ReadFile(m.backing("sub/dir/deep.txt")); string(got) != "deep\n" {
		t.Fatalf("after merging b2, sub/dir/deep.txt = %q", got)
	}
	for lnk, want := range map[string]string{"new.lnk": "sub/dir/deep.txt", "re.lnk": "del.txt", "old.lnk": ""} {
		if got, _ := os.Readlink(m.backing(lnk)); got != want {
			t.Errorf("after merging b2, %s -> %q, want %q", lnk, got, want)
		}
	}
	if st, err := os.Stat(m.backing("x.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("after merging b2, x.sh: %v %v, want mode 0755", st, err)
	}

	before := treeHash(t, m.ws)
	out, code = m.merge("b3")
	if code != 1 || !strings.Contains(out, "conflict f.txt: changed on both sides: 1 overlapping hunk") ||
		!strings.Contains(out, "conflict bin.dat: changed on both sides (binary)") || !strings.Contains(out, "nothing merged") {
		t.Fatalf("merge b3: exit %d, want conflicts on f.txt and bin.dat and nothing merged\n%s", code, out)
	}
	if after := treeHash(t, m.ws); after != before {
		t.Fatalf("a merge with conflicts changed the workspace (tree hash %s -> %s)\n%s", before, after, out)
	}
	if out, code = m.merge("b3", "--dry-run", "--partial"); code != 1 || !strings.Contains(out, "dry run, nothing changed") || treeHash(t, m.ws) != before {
		t.Fatalf("merge --dry-run b3: exit %d, or the workspace changed\n%s", code, out)
	}

	out, code = m.merge("b3", "--partial")
	sm := mergeUndoRe.FindStringSubmatch(out)
	if code != 1 || sm == nil || !strings.Contains(out, "2 left in conflict") {
		t.Fatalf("merge --partial b3: exit %d, want ok3.txt merged, 2 conflicts left and an undo line\n%s", code, out)
	}
	if got, _ := os.ReadFile(m.backing("ok3.txt")); string(got) != "ok\n" {
		t.Fatalf("after merge --partial, ok3.txt = %q", got)
	}
	if got, _ := os.ReadFile(m.backing("f.txt")); string(got) != want2 {
		t.Fatalf("merge --partial changed the conflicting f.txt: %q", got)
	}
	if out, err := runCLI(t, m.tmp, m.env, "rewind", "--mount", m.mnt, "--session", sm[1], "--to", sm[2]); err != nil {
		t.Fatalf("rewind of the merge: %v\n%s", err, out)
	}
	if after := treeHash(t, m.ws); after != before {
		t.Fatalf("rewind did not undo the merge (tree hash %s -> %s)", before, after)
	}
}

// TestBranchMergeStale: each way the workspace can have moved since the
// branch read a path is a conflict, and nothing is applied: a file both
// changed (no base line in common), one the branch deleted and the
// workspace changed, one made on both sides, one the branch changed and
// the workspace deleted, and a directory the branch removed that the
// workspace added a file to.
func TestBranchMergeStale(t *testing.T) {
	m := newBranchMount(t, map[string]string{"a.txt": "one\n", "gone.txt": "keep me\n", "fresh.txt": "f\n", "mod.txt": "m\n"}, "mkdir dd && echo a > dd/a")
	m.newBranch("s")
	m.mustInBranch("s", `set -e
cat a.txt gone.txt fresh.txt mod.txt dd/a >/dev/null
echo branch > a.txt && rm gone.txt && echo branch > fresh.txt
echo mine > both.txt && echo branch > mod.txt && rm -rf dd`)
	for rel, data := range map[string]string{"a.txt": "outside\n", "gone.txt": "changed\n", "both.txt": "theirs\n", "dd/extra": "new\n"} {
		if err := os.WriteFile(m.backing(rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(m.backing("mod.txt")); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, m.ws)
	out, code := m.merge("s")
	for _, want := range []string{
		"conflict a.txt: changed on both sides",
		"conflict gone.txt: changed in the workspace since the branch read it; the branch deleted it",
		"conflict both.txt: created on both sides",
		"conflict mod.txt: deleted in the workspace since the branch read it",
		"conflict dd/extra: the branch deleted it but never saw this one",
		"conflict dd: the branch deleted the directory; the workspace's dd/extra stays",
		"remove   dd/a",
		"replace  fresh.txt",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("merge s: no %q", want)
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("merge s: exit %d\n%s", code, out)
	}
	if after := treeHash(t, m.ws); after != before {
		t.Fatalf("the refused merge changed the workspace")
	}
	// Inside the branch the merge is refused: there the mount is the branch.
	if out, err := m.inBranch("s", "rubinofs branch merge s"); err == nil {
		t.Fatalf("a merge from inside the branch succeeded\n%s", out)
	}
}

// TestBranchMergeRefusedMidway: the guard decides a conflict that comes
// after the plan. With --confirm the merge stops between its plan and its
// apply; a file it is about to replace changes outside the mount meanwhile;
// the guard refuses that write (the merge declared the branch's base, not
// what is there now), and the change already applied before it is undone:
// nothing of the merge stays.
func TestBranchMergeRefusedMidway(t *testing.T) {
	m := newBranchMount(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, "")
	m.newBranch("r")
	m.mustInBranch("r", `cat a.txt b.txt >/dev/null && echo A > a.txt && echo B > b.txt`)
	cmd := cliCommand(t, m.tmp, m.env, "branch", "merge", "--confirm", "--mount", m.mnt, "r")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var asked []byte
	buf := make([]byte, 512)
	for !strings.Contains(string(asked), "[y/N] ") {
		n, err := stderr.Read(buf)
		asked = append(asked, buf[:n]...)
		if err != nil {
			cmd.Wait()
			t.Fatalf("the merge never asked (%v): %q\n%s", err, asked, stdout.String())
		}
	}
	if err := os.WriteFile(m.backing("b.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("y\n"))
	stdin.Close()
	rest, _ := io.ReadAll(stderr)
	err = cmd.Wait()
	out := stdout.String() + string(asked) + string(rest)
	if exitCode(err) != 1 || !strings.Contains(out, "refused  b.txt") || !strings.Contains(out, "the 1 applied were undone, nothing merged") {
		t.Fatalf("merge: %v, want b.txt refused and a.txt undone\n%s", err, out)
	}
	for rel, want := range map[string]string{"a.txt": "a\n", "b.txt": "outside\n"} {
		if got, _ := os.ReadFile(m.backing(rel)); string(got) != want {
			t.Errorf("%s = %q after the refused merge, want %q", rel, got, want)
		}
	}
}

// TestBranchMergeBadInput: usage errors exit 2, a missing branch 1, each
// with one line naming what is wrong; uid 65534 is told it needs root.
func TestBranchMergeBadInput(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "x\n"}, "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"branch", "merge", "--mount", m.mnt}, 2, "usage"},
		{[]string{"branch", "merge", "--mount", m.mnt, "../x"}, 2, "bad branch name"},
		{[]string{"branch", "merge", "--mount", m.mnt, "nope"}, 1, "no branch nope"},
	} {
		out, err := runCLI(t, m.tmp, m.env, c.args...)
		line := strings.TrimSpace(out)
		if exitCode(err) != c.code || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
			t.Errorf("rubinofs %v: exit %d %q, want exit %d and one line with %q", c.args, exitCode(err), out, c.code, c.want)
		}
	}
	cmd := exec.Command("sh", "-c", asNobody+shq(sharedBin(t))+" branch merge --mount "+shq(m.mnt)+" b")
	cmd.Dir = "/"
	out, err := runCombined(t, cmd)
	if exitCode(err) != 1 || !strings.Contains(out, "needs root") || strings.Contains(strings.TrimSpace(out), "\n") {
		t.Errorf("branch merge as uid 65534: exit %d %q, want exit 1 and one line saying it needs root", exitCode(err), out)
	}
}

// TestBranchMergeNoSymlinkEscape: a directory the branch made is a
// symlink out of the workspace by the time of the merge (another session
// made it); the branch's file below it is a conflict, even with
// --partial, and nothing is written where the symlink points.
func TestBranchMergeNoSymlinkEscape(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": "x\n"}, "")
	outside := t.TempDir()
	m.newBranch("e")
	m.mustInBranch("e", `mkdir evil && echo pwned > evil/pwn.txt`)
	if err := os.Symlink(outside, m.path("evil")); err != nil {
		t.Fatal(err)
	}
	out, code := m.merge("e", "--partial")
	if code != 1 || !strings.Contains(out, "conflict evil/pwn.txt: a directory on its path is a symlink in the workspace") {
		t.Errorf("merge --partial: exit %d, want evil/pwn.txt in conflict\n%s", code, out)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the merge wrote through the workspace's symlink: %v\n%s", ents, out)
	}
}

// TestBranchMergeFromCheckpoint: a branch made from a session's checkpoint
// merges against its branch point: a file the session changed since the
// checkpoint (line 18) and the branch changed too (line 2) merges 3-way;
// one both rewrote is a conflict; --partial applies the rest.
func TestBranchMergeFromCheckpoint(t *testing.T) {
	m := newBranchMount(t, map[string]string{"f.txt": lines(20), "g.txt": "g\n"}, "")
	env := append(append([]string{}, m.env...), "PATH="+filepath.Dir(rubinofsBin(t))+":"+os.Getenv("PATH"))
	out, err := runCLI(t, m.mnt, env, "run", "--session", "s", "--", "sh", "-c", `set -e
cat f.txt g.txt >/dev/null
echo "cp=$(rubinofs checkpoint mark)"
sed -i 's/^line 18$/line eighteen/' f.txt
echo G > g.txt`)
	cp := regexp.MustCompile(`cp=(cp[0-9]+)`).FindStringSubmatch(out)
	if err != nil || cp == nil {
		t.Fatalf("the session's changes: %v\n%s", err, out)
	}
	ownMounts.add(filepath.Join(m.branchDir("b"), "mnt"))
	if out, err := runCLI(t, m.tmp, m.env, "branch", "new", "--mount", m.mnt, "--from", cp[1], "--session", "s", "b"); err != nil {
		t.Fatalf("branch new --from: %v\n%s", err, out)
	}
	t.Cleanup(func() { runCLI(t, m.tmp, m.env, "branch", "discard", "--force", "--mount", m.mnt, "b") })
	m.mustInBranch("b", `set -e
grep -q '^line 18$' f.txt && sed -i 's/^line 2$/line two/' f.txt
cat g.txt >/dev/null && echo branch > g.txt && echo n > n.txt`)
	out, code := m.merge("b", "--partial")
	if code != 1 || !strings.Contains(out, "merge    f.txt: changed on both sides in disjoint hunks") || !strings.Contains(out, "conflict g.txt: changed on both sides") {
		t.Fatalf("merge --partial: exit %d, want f.txt merged and g.txt in conflict\n%s", code, out)
	}
	want := strings.Replace(strings.Replace(lines(20), "line 2\n", "line two\n", 1), "line 18\n", "line eighteen\n", 1)
	for rel, w := range map[string]string{"f.txt": want, "g.txt": "G\n", "n.txt": "n\n"} {
		if got, _ := os.ReadFile(m.backing(rel)); string(got) != w {
			t.Errorf("after the merge %s = %q, want %q", rel, got, w)
		}
	}
}
