package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
)

// runBranchDiff runs `rubinofs branch diff ARGS...` in an app holding only
// that command; it returns the output and the exit status (0 on success).
func runBranchDiff(t *testing.T, args ...string) (string, int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "rubinofs", Writer: &out, ErrWriter: &errOut,
		ExitErrHandler: func(*cli.Context, error) {}, // no os.Exit in a test
		Commands:       []*cli.Command{{Name: "branch", Subcommands: []*cli.Command{branchDiffCommand()}}}}
	err := app.Run(append([]string{"rubinofs", "branch", "diff"}, args...))
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return out.String(), 0, ""
	case errors.As(err, &ec):
		return out.String(), ec.ExitCode(), err.Error()
	}
	return out.String(), -1, err.Error()
}

// branchFixture makes a fake mount (its .rubino/status a plain file naming
// the state directory), a workspace, and branch "b1" in the state
// directory whose upper directory edits a.txt, deletes gone.txt (a 0/0
// whiteout), adds sub/new.bin (binary) and copies keep.txt up unchanged.
func branchFixture(t *testing.T) (mnt, ws string) {
	t.Helper()
	mnt, ws, state := fakeMount(t), t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(mnt, ctltree.DirName, "status"), `{"workspace":"`+ws+`","state":{"dir":"`+state+`"}}`)
	write(filepath.Join(ws, "a.txt"), "one\ntwo\n")
	write(filepath.Join(ws, "gone.txt"), "gone\n")
	write(filepath.Join(ws, "keep.txt"), "keep\n")
	write(filepath.Join(ws, "sub/old.txt"), "old\n")
	dir := filepath.Join(state, "branches", "b1")
	upper := filepath.Join(dir, "upper")
	write(filepath.Join(dir, "meta.json"), `{"name":"b1","workspace":"`+ws+`","mount":"`+mnt+`"}`)
	write(filepath.Join(upper, "a.txt"), "one\nTWO\n")
	write(filepath.Join(upper, "keep.txt"), "keep\n")
	write(filepath.Join(upper, "sub/new.bin"), "\x00bin")
	if err := unix.Mknod(filepath.Join(upper, "gone.txt"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	return mnt, ws
}

// TestBranchDiffCommand: `branch diff NAME` prints the branch's changes as
// git diff, --stat as --name-status, PATHs (relative to the current
// directory inside the mount, or absolute) limit them; a copy-up that
// changed nothing is not shown.
func TestBranchDiffCommand(t *testing.T) {
	mnt, _ := branchFixture(t)
	out, code, msg := runBranchDiff(t, "--mount", mnt, "b1")
	want := `diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
 one
-two
+TWO
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/sub/new.bin b/sub/new.bin
new file mode 100644
Binary files /dev/null and b/sub/new.bin differ
`
	if code != 0 || out != want {
		t.Errorf("branch diff b1: exit %d %s\n%s\nwant:\n%s", code, msg, out, want)
	}
	out, code, msg = runBranchDiff(t, "--mount", mnt, "--stat", "b1")
	if want := "M\ta.txt\nD\tgone.txt\nA\tsub/new.bin\n"; code != 0 || out != want {
		t.Errorf("branch diff --stat b1: exit %d %s\n%q\nwant %q", code, msg, out, want)
	}
	os.MkdirAll(filepath.Join(mnt, "sub"), 0o755)
	t.Chdir(filepath.Join(mnt, "sub"))
	out, code, msg = runBranchDiff(t, "--mount", mnt, "--stat", "b1", ".", filepath.Join(mnt, "a.txt"))
	if want := "M\ta.txt\nA\tsub/new.bin\n"; code != 0 || out != want {
		t.Errorf("branch diff --stat b1 . MNT/a.txt from sub/: exit %d %s\n%q\nwant %q", code, msg, out, want)
	}
	out, code, msg = runBranchDiff(t, "--mount", mnt, "--stat", "b1", "../gone.txt")
	if want := "D\tgone.txt\n"; code != 0 || out != want {
		t.Errorf("branch diff --stat b1 ../gone.txt from sub/: exit %d %s\n%q\nwant %q", code, msg, out, want)
	}
}

// TestBranchDiffErrors: a missing branch, an unreadable meta.json, a PATH
// outside the workspace and a bad name each end the command with one line
// and exit 1 or 2.
func TestBranchDiffErrors(t *testing.T) {
	mnt, ws := branchFixture(t)
	var state string
	if b, err := os.ReadFile(filepath.Join(mnt, ctltree.DirName, "status")); err == nil {
		state = strings.TrimSuffix(strings.SplitAfter(string(b), `"dir":"`)[1], `"}}`)
	}
	os.MkdirAll(filepath.Join(state, "branches", "broken"), 0o755)
	os.WriteFile(filepath.Join(state, "branches", "broken", "meta.json"), []byte("{not json"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"nosuch"}, 1, "no branch nosuch"},
		{[]string{"broken"}, 1, "meta.json"},
		{[]string{"b1", "/etc/passwd"}, 2, "outside the workspace"},
		{[]string{"b1", "../../x"}, 2, "outside the workspace"},
		{[]string{"b1", filepath.Join(ws, ctltree.DirName, "status")}, 2, "control tree"},
		{[]string{"../b1"}, 2, "bad branch name"},
		{nil, 2, "usage"},
	} {
		out, code, msg := runBranchDiff(t, append([]string{"--mount", mnt}, tc.args...)...)
		if code != tc.code || !strings.Contains(msg, tc.says) || strings.Contains(msg, "\n") || out != "" {
			t.Errorf("branch diff %q: exit %d, %q, output %q; want exit %d saying %q in one line", tc.args, code, msg, out, tc.code, tc.says)
		}
	}
}
