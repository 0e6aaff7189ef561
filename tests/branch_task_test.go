package tests

// Tasks in a branch (docs/DESIGN.md#branch-tasks): `rubinofs agents spawn
// --branch NAME` and `--isolation branch` run the subagent in a branch, as
// `rubinofs run --branch` runs a command; a spawner that is not root is
// refused with the reason.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// spawnIn spawns prompt (sh) with the CLI and the flags, waits for it and
// returns its id and what `agents wait` printed.
func (m *branchMount) spawnIn(prompt string, flags ...string) (string, string) {
	t := m.t
	t.Helper()
	args := append(append([]string{"agents", "spawn", "--mount", m.mnt}, flags...), "--", prompt)
	out, err := runCLI(t, m.tmp, m.env, args...)
	if err != nil {
		t.Fatalf("agents spawn %v: %v\n%s", flags, err, out)
	}
	id := strings.TrimSpace(out)
	out, err = runCLI(t, m.tmp, m.env, "agents", "wait", "--mount", m.mnt, id)
	if err != nil {
		t.Fatalf("agents wait %s: %v\n%s", id, err, out)
	}
	return id, out
}

// mergeNote is the line a finished task's result ends with for branch.
func mergeNote(name string) string {
	return "branch " + name + ": review with `rubinofs branch diff " + name + "`, merge with `rubinofs branch merge " + name +
		"`, drop with `rubinofs branch discard " + name + "`\n"
}

// TestTaskInBranch: a task spawned with --branch edits, deletes and makes
// files with sh from the workspace's own paths (its working directory, the
// mountpoint, the backing path); the workspace stays byte for byte, `branch
// diff` shows the changes, and the task's result, `branch` file and `agents
// show` name the branch and the merge command. In the branch,
// RUBINO_BRANCH names it and `rubinofs ask` says why it cannot reach the
// task's files.
func TestTaskInBranch(t *testing.T) {
	m := newBranchMount(t, map[string]string{"e.txt": "old\n", "d.txt": "gone\n", "k.txt": "kept\n"}, "")
	m.newBranch("tb")
	before := treeHash(t, m.ws)
	id, out := m.spawnIn(`set -e
cat e.txt d.txt >/dev/null
echo new > e.txt
rm `+shq(m.path("d.txt"))+`
echo made > `+shq(m.backing("n.txt"))+`
echo "in $(pwd) $RUBINO_BRANCH"
`+shq(rubinofsBin(t))+` ask hello 2>&1 | grep -o "runs in branch tb"`, "--branch", "tb")
	if want := "in " + m.mnt + " tb\nruns in branch tb\n" + mergeNote("tb"); out != want {
		t.Fatalf("agents wait %s printed\n%s\nwant\n%s", id, out, want)
	}
	if after := treeHash(t, m.ws); after != before {
		t.Fatalf("the workspace changed: tree hash %s before, %s after", before, after)
	}
	stat, err := runCLI(t, m.tmp, m.env, "branch", "diff", "--stat", "--mount", m.mnt, "tb")
	if err != nil || stat != "D\td.txt\nM\te.txt\nA\tn.txt\n" {
		t.Fatalf("branch diff --stat: %v\n%s", err, stat)
	}
	if b, err := os.ReadFile(m.path(".rubino/agents/" + id + "/branch")); err != nil || string(b) != "tb\n" {
		t.Fatalf("agents/%s/branch = %q %v", id, b, err)
	}
	show, err := runCLI(t, m.tmp, m.env, "agents", "show", "--mount", m.mnt, id)
	if err != nil || !strings.Contains(show, "branch:    tb\n") || !strings.Contains(show, "rubinofs branch merge tb") {
		t.Fatalf("agents show %s: %v\n%s", id, err, show)
	}
}

// TestTaskIsolationBranch: --isolation branch makes a new branch named
// after the task (as `branch new` would) and runs the task in it; the
// workspace is untouched and the branch holds the change.
func TestTaskIsolationBranch(t *testing.T) {
	m := newBranchMount(t, map[string]string{"e.txt": "old\n"}, "")
	before := treeHash(t, m.ws)
	m.cleanBranch("task-1", 0)
	id, out := m.spawnIn(`cat e.txt >/dev/null && echo iso > e.txt && cat e.txt`, "--isolation", "branch")
	name := "task-" + id
	if id != "1" || out != "iso\n"+mergeNote(name) {
		t.Fatalf("task %s printed %q, want iso and the note for %s", id, out, name)
	}
	if !isMounted(t, filepath.Join(m.branchDir(name), "mnt")) {
		t.Fatalf("branch %s is not mounted", name)
	}
	if after := treeHash(t, m.ws); after != before {
		t.Fatal("the workspace changed")
	}
	if got := m.mustInBranch(name, `cat e.txt`); got != "iso\n" {
		t.Fatalf("e.txt in branch %s = %q", name, got)
	}
}

// TestTaskInBranchRefusedNotRoot: uid 65534 spawning with --isolation
// branch or --branch gets a one-line refusal (EPERM) naming isolation=branch
// and root; nothing is spawned and no branch made. A missing branch is
// refused for root too.
func TestTaskInBranchRefusedNotRoot(t *testing.T) {
	cm := cliDirs(t, map[string]string{"e.txt": "old\n"})
	openUp(t, cm.tmp)
	cm.mountDaemon("-o", "allow_other")
	m := &branchMount{cliMount: cm, env: testEnv(filepath.Join(cm.tmp, "home"))}
	m.newBranch("tb")
	bin := sharedBin(t)
	for _, flags := range []string{"--isolation branch", "--branch tb"} {
		cmd := exec.Command("sh", "-c", asNobody+shq(bin)+" agents spawn --mount "+shq(m.mnt)+" "+flags+" -- true")
		cmd.Dir = "/"
		out, err := runCombined(t, cmd)
		line := strings.TrimSpace(out)
		if exitCode(err) != 1 || !strings.Contains(line, "isolation=branch") || !strings.Contains(line, "root spawner") ||
			!strings.Contains(line, "uid 65534") || strings.Contains(line, "\n") {
			t.Errorf("agents spawn %s as uid 65534: exit %d %q; want exit 1 and one line naming isolation=branch and root", flags, exitCode(err), out)
		}
	}
	out, err := runCLI(t, m.tmp, m.env, "agents", "spawn", "--mount", m.mnt, "--branch", "nope", "--", "true")
	if exitCode(err) != 1 || !strings.Contains(out, "rubinofs branch new nope") {
		t.Errorf("agents spawn --branch nope: exit %d %q", exitCode(err), out)
	}
	if out, _ := runCLI(t, m.tmp, m.env, "agents", "ls", "--mount", m.mnt); strings.TrimSpace(out) != "no tasks" {
		t.Fatalf("tasks after the refusals:\n%s", out)
	}
	if ents, _ := os.ReadDir(filepath.Join(m.state, "branches")); len(ents) != 1 {
		t.Fatalf("branches after the refusals: %v", ents)
	}
}

// TestMCPBranchTools: through the MCP server (the SDK's client over
// stdio), branch_new makes a branch, task_spawn with it runs a task there,
// branch_ls lists it, branch_diff shows the change (and with stat the
// path), branch_discard removes it; bad names and unknown branches are
// tool errors with the reason; --tools serves the branch tools alone.
func TestMCPBranchTools(t *testing.T) {
	m := newBranchMount(t, map[string]string{"e.txt": "old\n"}, "")
	cs := mcpClientAt(t, m.mnt, m.tmp, nil, nil)
	m.cleanBranch("mb", 0)
	if out := mustTool(t, cs, "branch_new", map[string]any{"name": "mb"}); out != filepath.Join(m.branchDir("mb"), "mnt")+"\n" {
		t.Fatalf("branch_new printed %q", out)
	}
	id := strings.TrimSpace(mustTool(t, cs, "task_spawn", map[string]any{"prompt": "cat e.txt >/dev/null && echo mcp > e.txt", "branch": "mb"}))
	if out := mustTool(t, cs, "task_wait", map[string]any{"id": id}); !strings.Contains(out, "rubinofs branch merge mb") {
		t.Fatalf("task_wait %s lacks the merge command:\n%s", id, out)
	}
	if ls := mustTool(t, cs, "branch_ls", nil); !strings.Contains(ls, "mb ") || !strings.Contains(ls, "true") {
		t.Fatalf("branch_ls:\n%s", ls)
	}
	if d := mustTool(t, cs, "branch_diff", map[string]any{"name": "mb"}); !strings.Contains(d, "-old\n+mcp\n") {
		t.Fatalf("branch_diff:\n%s", d)
	}
	if d := mustTool(t, cs, "branch_diff", map[string]any{"name": "mb", "stat": true, "paths": []string{"e.txt"}}); d != "M\te.txt\n" {
		t.Fatalf("branch_diff stat of e.txt: %q", d)
	}
	if b, _ := os.ReadFile(m.backing("e.txt")); string(b) != "old\n" {
		t.Fatalf("the workspace's e.txt = %q", b)
	}
	mustToolError(t, cs, "branch_new", map[string]any{"name": "../x"}, `bad branch name`)
	mustToolError(t, cs, "branch_diff", map[string]any{"name": "nope"}, `no branch nope`)
	mustToolError(t, cs, "branch_discard", map[string]any{"name": ""}, `give the branch name`)
	if out := mustTool(t, cs, "branch_discard", map[string]any{"name": "mb"}); out != "discarded branch mb\n" {
		t.Fatalf("branch_discard printed %q", out)
	}
	if _, err := os.Stat(m.branchDir("mb")); err == nil {
		t.Fatal("branch mb still there after branch_discard")
	}

	only := mcpClientAt(t, m.mnt, m.tmp, nil, nil, "--tools", "branch_ls,branch_diff")
	tools, err := only.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "branch_diff,branch_ls" {
		t.Fatalf("--tools branch_ls,branch_diff serves %v", names)
	}
}

// TestTaskBranchMerged: the whole round through the MCP server: a task
// under isolation=branch changes, deletes and makes files; branch_merge
// with dry_run changes nothing, then branch_merge puts the three changes
// into the workspace. Skipped only by a binary without `branch merge`.
func TestTaskBranchMerged(t *testing.T) {
	if out, err := runCLI(t, "/", nil, "branch", "merge", "--help"); err != nil {
		t.Skipf("this rubinofs has no branch merge: %s", strings.TrimSpace(out))
	}
	m := newBranchMount(t, map[string]string{"e.txt": "old\n", "d.txt": "gone\n"}, "")
	m.cleanBranch("task-1", 0)
	cs := mcpClientAt(t, m.mnt, m.tmp, nil, nil)
	id := strings.TrimSpace(mustTool(t, cs, "task_spawn", map[string]any{"isolation": "branch",
		"prompt": "cat e.txt d.txt >/dev/null && echo new > e.txt && rm d.txt && echo n > n.txt"}))
	if out := mustTool(t, cs, "task_wait", map[string]any{"id": id}); id != "1" || !strings.Contains(out, "rubinofs branch merge task-1") {
		t.Fatalf("task %s: %s", id, out)
	}
	before := treeHash(t, m.ws)
	if out := mustTool(t, cs, "branch_merge", map[string]any{"name": "task-1", "dry_run": true}); !strings.Contains(out, "dry run") {
		t.Fatalf("branch_merge dry_run: %s", out)
	}
	if treeHash(t, m.ws) != before {
		t.Fatal("a dry run changed the workspace")
	}
	mustTool(t, cs, "branch_merge", map[string]any{"name": "task-1"})
	for rel, want := range map[string]string{"e.txt": "new\n", "n.txt": "n\n", "d.txt": ""} {
		if b, _ := os.ReadFile(m.backing(rel)); string(b) != want {
			t.Errorf("workspace %s = %q after the merge, want %q", rel, b, want)
		}
	}
	if _, err := os.Stat(m.backing("d.txt")); err == nil {
		t.Error("d.txt still in the workspace after the merge")
	}
}
