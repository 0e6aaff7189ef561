package tests

// Branches made from a checkpoint (docs/DESIGN.md#branch-from): `rubinofs
// branch new NAME --from CP --session S` shows the workspace as it was at
// S's checkpoint CP, and `branch diff` compares against that branch point.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/guard"
)

// TestBranchFromCheckpoint: after a session changed, created, deleted and
// renamed files and directories (one whose name is not valid UTF-8
// among them) since its checkpoint, a branch from the
// checkpoint shows them as they were then (the workspace keeps its
// state); its diff is empty until the branch changes something, then
// shows only that. A bad checkpoint and a pre-image the journal did not
// keep are refused with a reason, leaving nothing behind.
func TestBranchFromCheckpoint(t *testing.T) {
	cm := cliDirs(t, map[string]string{"a.txt": "one\n", "gone.txt": "bye\n", "keep.txt": "keep\n", "big.bin": strings.Repeat("b", 2048), "odd\xff.txt": "odd\n"})
	for rel, body := range map[string]string{"d/x": "x\n", "dir2/y": "y\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(cm.ws, rel)), 0o755)
		if err := os.WriteFile(filepath.Join(cm.ws, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cm.mountDaemon("--journal-max-file-size", "1024") // big.bin's pre-image is not kept
	m := &branchMount{cliMount: cm, env: testEnv(filepath.Join(cm.tmp, "home"))}
	env := append(append([]string{}, m.env...), "PATH="+filepath.Dir(rubinofsBin(t))+":"+os.Getenv("PATH"))
	out, err := runCLI(t, m.mnt, env, "run", "--session", "s", "--", "sh", "-c", `set -e
cat a.txt gone.txt d/x dir2/y odd*.txt >/dev/null
echo before-cp > a.txt
echo "cp=$(rubinofs checkpoint mark)"
echo after-cp > a.txt
rm gone.txt odd*.txt
echo new > new.txt
mkdir nd && echo n > nd/f
rm -rf d
mv dir2 dir3`)
	cp := regexp.MustCompile(`cp=(cp[0-9]+)`).FindStringSubmatch(out)
	if err != nil || cp == nil {
		t.Fatalf("the session's changes: %v\n%s", err, out)
	}
	if out, err := runCLI(t, m.mnt, env, "run", "--session", "t", "--", "sh", "-c", `cat big.bin >/dev/null && echo more >> big.bin`); err != nil {
		t.Fatalf("session t: %v\n%s", err, out)
	}
	before := treeHash(t, m.ws)

	ownMounts.add(filepath.Join(m.branchDir("b"), "mnt"))
	out, err = runCLI(t, m.tmp, m.env, "branch", "new", "--mount", m.mnt, "--from", cp[1], "--session", "s", "b")
	if err != nil {
		t.Fatalf("branch new --from %s: %v\n%s", cp[1], err, out)
	}
	t.Cleanup(func() { runCLI(t, m.tmp, m.env, "branch", "discard", "--force", "--mount", m.mnt, "b") })
	got := m.mustInBranch("b", `cat a.txt gone.txt d/x dir2/y keep.txt "$(printf 'odd\377.txt')"; ls | grep -v odd; test -e new.txt && echo new-there; test -e nd && echo nd-there; test -e dir3 && echo dir3-there; true`)
	if want := "before-cp\nbye\nx\ny\nkeep\nodd\na.txt\nbig.bin\nd\ndir2\ngone.txt\nkeep.txt\n"; got != want {
		t.Fatalf("the branch from %s shows %q, want %q", cp[1], got, want)
	}
	if after := treeHash(t, m.ws); after != before {
		t.Fatal("making the branch changed the workspace")
	}
	if got := m.readBackingFile(t, "a.txt"); got != "after-cp\n" {
		t.Fatalf("workspace a.txt = %q", got)
	}
	meta, err := os.ReadFile(filepath.Join(m.branchDir("b"), "meta.json"))
	if err != nil || !strings.Contains(string(meta), `"from": "`+cp[1]+`"`) || !strings.Contains(string(meta), `"session": "s"`) {
		t.Fatalf("meta.json does not name the checkpoint and session: %v\n%s", err, meta)
	}
	stat := func() string {
		t.Helper()
		out, err := runCLI(t, m.tmp, m.env, "branch", "diff", "--stat", "--mount", m.mnt, "b")
		if err != nil {
			t.Fatalf("branch diff: %v\n%s", err, out)
		}
		return out
	}
	if s := stat(); s != "" {
		t.Fatalf("branch diff right after branch new --from = %q, want nothing", s)
	}
	m.mustInBranch("b", `cat a.txt >/dev/null && echo mine > a.txt && echo z > z.txt`)
	if s := stat(); s != "M\ta.txt\nA\tz.txt\n" {
		t.Fatalf("branch diff --stat after the branch's edits = %q, want a.txt and z.txt only", s)
	}
	out, err = runCLI(t, m.tmp, m.env, "branch", "diff", "--mount", m.mnt, "b", "a.txt")
	if err != nil || !strings.Contains(out, "-before-cp\n+mine\n") {
		t.Fatalf("branch diff a.txt: %v\n%s", err, out)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--from", "cp000099", "--session", "s"}, 1, `no checkpoint "cp000099"`},
		{[]string{"--from", "later", "--session", "s"}, 2, "not a checkpoint id"},
		{[]string{"--session", "s"}, 2, "give --from too"},
		{[]string{"--from", "cp000000", "--session", "t"}, 1, "big.bin (too large)"},
	} {
		args := append(append([]string{"branch", "new", "--mount", m.mnt}, c.args...), "c")
		out, err := runCLI(t, m.tmp, m.env, args...)
		line := strings.TrimSpace(out)
		if exitCode(err) != c.code || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
			t.Errorf("rubinofs %v: exit %d %q, want exit %d and one line with %q", args, exitCode(err), out, c.code, c.want)
		}
		if _, err := os.Stat(m.branchDir("c")); err == nil {
			t.Errorf("rubinofs %v left %s behind", args, m.branchDir("c"))
		}
	}
}

// TestBranchControlPaths: inside `run --branch`, control files that take
// a caller's path resolve the workspace's paths (the names the branch is
// seen at) in the branch: `rubinofs read FILE` shows the branch's file
// and declares the read, and a `read PATH HASH` declaration through
// .rubino/self/ctl lets a guarded write through, by a relative and by an
// absolute path; the workspace's file is untouched.
func TestBranchControlPaths(t *testing.T) {
	m := newBranchMount(t, map[string]string{"u.txt": "unread\n", "v.txt": "vee\n", "w.txt": "double-u\n", "gone.txt": "bye\n"}, "")
	m.newBranch("b")
	bin := rubinofsBin(t)
	hashV := guard.HashBytes([]byte("vee\n")).String()
	hashW := guard.HashBytes([]byte("double-u\n")).String()
	out, err := m.inBranch("b", shq(bin)+` read u.txt && echo mine > u.txt
echo "read v.txt `+hashV+`" > .rubino/self/ctl && echo mine > v.txt
echo "read `+filepath.Join(m.mnt, "w.txt")+` `+hashW+`" > .rubino/self/ctl && echo mine > w.txt
cat u.txt v.txt w.txt`)
	if err != nil || !strings.Contains(out, "1\tunread") || !strings.HasSuffix(out, "mine\nmine\nmine\n") {
		t.Fatalf("read and declarations in the branch: %v\n%s", err, out)
	}
	for _, rel := range []string{"u.txt", "v.txt", "w.txt"} {
		if got := m.readBackingFile(t, rel); got == "mine\n" {
			t.Errorf("the workspace's %s was written", rel)
		}
	}
	// From outside the branch's namespace, a workspace path written to
	// the branch daemon's control file names the branch's file, never the
	// workspace's: gone.txt, deleted in the branch only, is not found.
	m.mustInBranch("b", `cat gone.txt >/dev/null && rm gone.txt`)
	ctl := filepath.Join(m.branchDir("b"), "mnt", ".rubino", "self", "ctl")
	cmd := exec.Command("sh", "-c", `exec 3<>`+shq(ctl)+`; /bin/echo "read gone.txt" >&3; echo "rc=$?"; cat <&3`)
	cmd.Dir = m.mnt
	out, _ = runCombined(t, cmd)
	if !strings.Contains(out, "rc=1") || !strings.Contains(out, "gone.txt: no such file") {
		t.Errorf("a declaration of the workspace's gone.txt through the branch daemon: %q, want a refusal for a file the branch lacks (not for a path outside the mount)", out)
	}
	cmd = exec.Command("sh", "-c", `echo "read `+filepath.Join(m.mnt, "v.txt")+`" > `+shq(ctl))
	if out, err := runCombined(t, cmd); err != nil {
		t.Errorf("a declaration of v.txt, in the branch too, through the branch daemon: %v %s", err, out)
	}
}
