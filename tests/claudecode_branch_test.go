package tests

// Claude Code in a branch (docs/DESIGN.md#branches, #branch-merge): the
// real agent, driven by the scripted model, works in `rubinofs run
// --branch`; the workspace stays byte for byte until `branch merge`
// replays what its Read, Edit and Bash tools did.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClaudeCodeInBranch: Claude Code runs in branch "agent" from the
// workspace's own path. Its Edit after a Read passes the branch's guard, a
// blind Bash overwrite is refused there too, a Bash rm of a file it read
// and a new file go through; the workspace is untouched, `branch diff
// --stat` names the three changes, and `branch merge` applies them.
func TestClaudeCodeInBranch(t *testing.T) {
	bin := claudeBin(t)
	m := newBranchMount(t, map[string]string{"notes.txt": "alpha\n", "old.txt": "old\n", "keep.txt": "never read\n"}, "")
	m.newBranch("agent")
	before := treeHash(t, m.ws)
	notes := m.path("notes.txt")
	model := newScriptedModel(t,
		toolCall{Name: "Read", Input: map[string]any{"file_path": notes}},
		toolCall{Name: "Edit", Input: map[string]any{"file_path": notes, "old_string": "alpha", "new_string": "beta"}},
		bash("echo clobber > keep.txt ; echo write-exit=$?"),
		bash("cat old.txt >/dev/null && rm old.txt && echo added > added.txt && ls"),
	)
	home := filepath.Join(m.tmp, "claude-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := fmt.Sprintf("cd %s && exec %s run --branch agent --mount %s -- %s -p 'work through the script' --dangerously-skip-permissions --output-format json </dev/null",
		shq(m.mnt), shq(rubinofsBin(t)), shq(m.mnt), shq(bin))
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Dir, cmd.Env, cmd.WaitDelay = m.tmp, claudeEnv(home, model), 10*time.Second
	if out, err := cmd.CombinedOutput(); err != nil || ctx.Err() != nil {
		t.Fatalf("Claude Code in the branch: %v\n%s", err, out)
	}
	if out, isErr := model.mustStep(t, 1); isErr {
		t.Errorf("Edit after Read in the branch was refused: %s", out)
	}
	if out, _ := model.mustStep(t, 2); !strings.Contains(out, "Permission denied") {
		t.Errorf("a blind Bash overwrite in the branch: want Permission denied; got\n%s", out)
	}
	if out, _ := model.mustStep(t, 3); !strings.Contains(out, "added.txt") || strings.Contains(out, "old.txt") {
		t.Errorf("rm and a new file through Bash in the branch:\n%s", out)
	}
	if after := treeHash(t, m.ws); after != before {
		t.Fatalf("Claude Code in the branch changed the workspace")
	}
	out, err := runCLI(t, m.tmp, m.env, "branch", "diff", "--stat", "--mount", m.mnt, "agent")
	if want := "A\tadded.txt\nM\tnotes.txt\nD\told.txt\n"; err != nil || out != want {
		t.Fatalf("branch diff --stat: %v %q, want %q", err, out, want)
	}
	if out, code := m.merge("agent"); code != 0 {
		t.Fatalf("branch merge: exit %d\n%s", code, out)
	}
	for rel, want := range map[string]string{"notes.txt": "beta\n", "added.txt": "added\n", "keep.txt": "never read\n"} {
		if got, _ := os.ReadFile(m.backing(rel)); string(got) != want {
			t.Errorf("after the merge %s = %q, want %q", rel, got, want)
		}
	}
	if _, err := os.Stat(m.backing("old.txt")); !os.IsNotExist(err) {
		t.Errorf("after the merge old.txt: %v, want it removed", err)
	}
}
