package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// gitRepoBacking makes the backing workspace a git repository with two
// branches, before the mount sees it (so no session has read anything):
// main, and feature, which changes changed.txt, deletes gone.txt and adds
// new.txt. main is checked out.
func gitRepoBacking(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"README.md":   "# demo\n",
		"src/app.txt": "a line with the needle in it\n",
		"changed.txt": "main version\n",
		"gone.txt":    "only on main\n",
		"notes.txt":   "alpha\n",
		"other.txt":   "tracked, never read\n",
	}
	for name, content := range files {
		p := dir + "/" + name
		os.MkdirAll(p[:strings.LastIndex(p, "/")], 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `set -e
git init -q -b main
git add -A && git commit -qm base
git checkout -qb feature
echo "feature version" > changed.txt
git rm -q gone.txt
echo "only on feature" > new.txt
git add -A && git commit -qm feature
git checkout -q main`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = testEnv(dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("making the repository: %v\n%s", err, out)
	}
}

// TestClaudeCodeEverydayWorkflow drives Claude Code through the mount root
// as an agent works on day one: a recursive grep from the root, git status,
// a branch switch over files the session never read, the Read and Edit
// tools, and, after an edit from outside the mount, an overwrite through
// Bash of the changed file, which the guard refuses as stale. An
// access-log reader stays attached throughout, so every request also goes
// through the access-log path (where a caller's exec once deadlocked).
func TestClaudeCodeEverydayWorkflow(t *testing.T) {
	claudeBin(t)
	m := newMount(t, nil, nil)
	gitRepoBacking(t, m.ws)

	alog, err := os.Open(m.path(".rubino/accesslog"))
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 1<<16)
		for {
			if _, err := alog.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { alog.Close(); <-drained })

	notes := m.path("notes.txt")
	model := newScriptedModel(t,
		bash("grep -rn needle . ; echo grep-exit=$?"),
		bash("git status --porcelain ; echo status-exit=$?"),
		bash("git checkout -q feature ; echo checkout-exit=$? ; git status --porcelain"),
		toolCall{Name: "Read", Input: map[string]any{"file_path": notes}},
		toolCall{Name: "Edit", Input: map[string]any{"file_path": notes, "old_string": "alpha", "new_string": "beta"}},
		toolCall{Name: "Bash", Input: map[string]any{"command": "echo clobber > other.txt ; echo write-exit=$?"},
			Before: func() {
				mark := m.appliedMark()
				m.writeBacking("other.txt", "edited outside the mount\n")
				m.waitApplied(mark, "other.txt")
			}},
		bash("cat .rubino/guard/why"),
	)
	runClaude(t, m, "", model)

	if out, _ := model.mustStep(t, 0); !strings.Contains(out, "grep-exit=0") || !strings.Contains(out, "src/app.txt") || strings.Contains(out, ".rubino") {
		t.Errorf("grep -rn from the mount root: want a match in src/app.txt, exit 0 and nothing of .rubino; got\n%s", out)
	}
	if out, _ := model.mustStep(t, 1); strings.TrimSpace(out) != "status-exit=0" {
		t.Errorf("git status --porcelain in a clean repository: want no entries; got\n%s", out)
	}
	if out, _ := model.mustStep(t, 2); strings.TrimSpace(out) != "checkout-exit=0" {
		t.Errorf("git checkout feature: want exit 0 and a clean tree; got\n%s", out)
	}
	if got := m.readBacking("changed.txt"); got != "feature version\n" {
		t.Errorf("changed.txt after the branch switch = %q, want the feature branch's bytes", got)
	}
	if _, err := os.Stat(m.backing("gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt still exists after switching to a branch that deletes it (err %v)", err)
	}
	if got := m.readBacking("new.txt"); got != "only on feature\n" {
		t.Errorf("new.txt = %q, want the feature branch's file", got)
	}
	if out, isErr := model.mustStep(t, 4); isErr {
		t.Errorf("Edit after Read was refused: %s", out)
	}
	if got := m.readBacking("notes.txt"); got != "beta\n" {
		t.Errorf("notes.txt after Edit = %q, want %q", got, "beta\n")
	}
	if out, _ := model.mustStep(t, 5); !strings.Contains(out, "Permission denied") {
		t.Errorf("an overwrite through Bash of a file changed outside since: want Permission denied; got\n%s", out)
	}
	if got := m.readBacking("other.txt"); got != "edited outside the mount\n" {
		t.Errorf("other.txt after a refused overwrite = %q, want its bytes intact", got)
	}
	if out, _ := model.mustStep(t, 6); !strings.Contains(out, "other.txt") {
		t.Errorf(".rubino/guard/why after the refusal does not name other.txt:\n%s", out)
	}
}
