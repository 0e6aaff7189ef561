package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/journal"
)

// TestRequestLine: plain tokens go as they are; a token with white space,
// a quote, a backslash, a control byte or invalid UTF-8, or an empty one,
// goes Go-quoted, and strconv.Unquote gives it back.
func TestRequestLine(t *testing.T) {
	req := []string{"rewind", "--to", "cp000001", "--", "src/a.txt", "my notes.txt", `q"uote`, "tab\there", "bad\xffutf8", "", "ünïcode"}
	got := requestLine(req)
	want := `rewind --to cp000001 -- src/a.txt "my notes.txt" "q\"uote" "tab\there" "bad\xffutf8" "" ünïcode`
	if got != want {
		t.Errorf("requestLine = %s\nwant          %s", got, want)
	}
}

// TestWorkspacePaths: PATH arguments are checked against the mount and
// sent as the daemon resolves them, against the caller's current
// directory: relative to it inside the mount, absolute (from the mount
// root) outside it. A path outside the mount or in the control tree is an
// error, and "." means every path.
func TestWorkspacePaths(t *testing.T) {
	mnt, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(filepath.Join(mnt, "src", "deep"), 0o755)
	outside := t.TempDir()
	t.Chdir(filepath.Join(mnt, "src"))
	got, err := workspacePaths(mnt, []string{"a.go", "deep/b.go", "../top.txt", filepath.Join(mnt, "abs.txt"), "./deep/../c.go"})
	if err != nil || strings.Join(got, ",") != "a.go,deep/b.go,../top.txt,../abs.txt,c.go" {
		t.Errorf("inside src: %q, %v", got, err)
	}
	if got, err := workspacePaths(mnt, []string{"a.go", ".."}); err != nil || got != nil {
		t.Errorf("with the workspace root among them: %q, %v; want nil (every path)", got, err)
	}
	for _, bad := range []string{"../../x", filepath.Join(outside, "x"), "../.rubino/status"} {
		if got, err := workspacePaths(mnt, []string{bad}); err == nil {
			t.Errorf("%s: %q, want an error", bad, got)
		}
	}
	t.Chdir(outside)
	if got, err := workspacePaths(mnt, []string{"src/a.go"}); err != nil || strings.Join(got, ",") != filepath.Join(mnt, "src/a.go") {
		t.Errorf("from outside the mount: %q, %v; want the path from the mount root, absolute", got, err)
	}
	if got, err := workspacePaths(mnt, nil); err != nil || got != nil {
		t.Errorf("no arguments: %q, %v", got, err)
	}
}

// TestFormatChanges: one line a path, with the status letter, renames as
// OLD -> NEW, short hashes before..after and a mode change; a temporary
// file (absent then and now) is left out, and a file saved by renaming
// one over it shows as modified.
func TestFormatChanges(t *testing.T) {
	h1, h2 := strings.Repeat("1", 32), strings.Repeat("2", 32)
	file := func(mode uint32, hash string) journal.After {
		return journal.After{Kind: journal.KindFile, Mode: mode, Hash: hash}
	}
	absent := journal.After{Kind: journal.KindAbsent}
	got := formatChanges([]journal.PathChange{
		{Path: "a.txt", Ops: []string{"write"}, Before: file(0o100644, h1), After: file(0o100644, h2)},
		{Path: "new dir", Ops: []string{"mkdir"}, Before: absent, After: journal.After{Kind: journal.KindDir, Mode: 0o40755}},
		{Path: "gone.txt", Ops: []string{"unlink"}, Before: file(0o100644, h1), After: absent},
		{Path: "b.txt", Ops: []string{"rename"}, RenamedFrom: "a old.txt", Before: absent, After: file(0o100644, h1)},
		{Path: "run.sh", Ops: []string{"chmod"}, Before: file(0o100644, h1), After: file(0o100755, h1)},
		{Path: "tmp.swp", Ops: []string{"create", "unlink"}, Before: absent, After: absent},
		{Path: "same.txt", Ops: []string{"write"}, Before: file(0o100644, h1), After: file(0o100644, h1)},
		{Path: "saved.txt", Ops: []string{"rename"}, RenamedFrom: "sedX1", Before: file(0o100644, h1), After: file(0o100644, h2)},
		{Path: "sedX1", Ops: []string{"create", "write", "rename"}, Before: absent, After: absent},
	})
	want := `M  a.txt  11111111..22222222
A  "new dir"  -..dir/
D  gone.txt  11111111..-
R  "a old.txt" -> b.txt  -..11111111
M  run.sh  11111111..11111111  100644..100755
=  same.txt  11111111..11111111
M  saved.txt  11111111..22222222
`
	if got != want {
		t.Errorf("formatChanges:\n%s\nwant:\n%s", got, want)
	}
}

// TestFormatRewind: the plan's steps, conflicts with who made them, the
// unrecoverable paths and the counts line; a dry run counts from the plan
// (a conflicting step skipped; each path once, by its last step), an applied rewind from its result and
// names its undo checkpoint; failed says whether the tree is not all back.
func TestFormatRewind(t *testing.T) {
	plan := journal.Plan{Session: "agent1", To: "cp000000",
		Steps: []journal.Step{
			{Kind: journal.StepRename, Path: "a.txt", From: "b.txt"},
			{Kind: journal.StepRestore, Path: "c.txt", Pre: journal.PreImage{Kind: journal.KindFile, Mode: 0o100644, Size: 3}},
			{Kind: journal.StepRemove, Path: "new.txt"},
			{Kind: journal.StepRestore, Path: "theirs.txt", Pre: journal.PreImage{Kind: journal.KindFile, Mode: 0o100644, Size: 1}},
		},
		Conflicts:     []journal.Conflict{{Path: "theirs.txt", By: "other", Reason: "changed since"}, {Path: "ext.txt", Reason: "mtime differs"}},
		Unrecoverable: []journal.PreImage{{Path: "big.bin", Kind: journal.KindFile, Size: 1 << 20, Unrecoverable: "too large"}},
	}
	text, failed := formatRewind(rewindReply{DryRun: true, Plan: plan}, false, "rubinofs rewind --to ")
	for _, want := range []string{
		"rewind of session agent1 to cp000000 (dry run: nothing was changed):\n",
		"  rename    b.txt -> a.txt\n",
		"  restore   c.txt (file 100644, 3 bytes)\n",
		"  remove    new.txt\n",
		"  restore   theirs.txt (file 100644, 1 bytes)  (conflict: skipped)\n",
		"conflicts, skipped (--force applies them):\n  theirs.txt: changed by session other (changed since)\n  ext.txt: changed outside the mount (mtime differs)\n",
		"unrecoverable (the state at cp000000 was not kept):\n  big.bin: file 1048576 bytes, too large\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("dry run lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasSuffix(text, "restored 2, removed 1, conflicts 2, unrecoverable 1\n") || !failed || strings.Contains(text, "undo") {
		t.Errorf("dry run: failed %v, text:\n%s", failed, text)
	}
	res := &journal.Result{Checkpoint: "cp000004", Restored: 3, Removed: 1, Conflicts: 2}
	text, failed = formatRewind(rewindReply{Plan: journal.Plan{Session: "agent1", To: "cp000000", Steps: plan.Steps, Conflicts: plan.Conflicts}, Result: res}, true, "rubinofs rewind --session agent1 --to ")
	if !strings.Contains(text, "conflicts, applied anyway (--force)") || strings.Contains(text, "skipped") ||
		!strings.HasSuffix(text, "restored 3, removed 1, conflicts 2, unrecoverable 0\nundo with: rubinofs rewind --session agent1 --to cp000004\n") || failed {
		t.Errorf("forced rewind: failed %v, text:\n%s", failed, text)
	}
	// sed -i's plan: the file renamed back to the temporary name, its
	// pre-image restored, the temporary name removed. Each path counts
	// once, by its last step, as the applied rewind counts it.
	sed := journal.Plan{Session: "agent1", To: "cp000000", Steps: []journal.Step{
		{Kind: journal.StepRename, Path: "sedX1", From: "a.txt"},
		{Kind: journal.StepRestore, Path: "a.txt", Pre: journal.PreImage{Kind: journal.KindFile, Mode: 0o100644, Size: 3}},
		{Kind: journal.StepRemove, Path: "sedX1"},
	}}
	if text, _ = formatRewind(rewindReply{DryRun: true, Plan: sed}, false, "x "); !strings.HasSuffix(text, "restored 1, removed 1, conflicts 0, unrecoverable 0\n") {
		t.Errorf("a dry run of sed -i's plan counts each step, not each path:\n%s", text)
	}
	res.Errors = []string{"c.txt: EIO"}
	if text, failed = formatRewind(rewindReply{Plan: journal.Plan{Session: "s", To: "cp000001"}, Result: res}, true, "x "); !failed || !strings.Contains(text, "errors:\n  c.txt: EIO\n") || !strings.Contains(text, "nothing to do") {
		t.Errorf("a rewind with a step error: failed %v, text:\n%s", failed, text)
	}
}

// TestJournalRequestFile: a request is one line written to the journal
// file on a read-write handle, and the reply is read from offset 0 of the
// same handle (a plain file stands in for the clone-kind file: it reads
// back the request); a missing session is named as such.
func TestJournalRequestFile(t *testing.T) {
	mnt := fakeMount(t)
	p := filepath.Join(mnt, ctltree.DirName, "self/journal")
	os.WriteFile(p, nil, 0o644)
	out, err := journalRequest(mnt, "self/journal", "checkpoint", "before the refactor")
	if err != nil || string(out) != "checkpoint \"before the refactor\"\n" {
		t.Errorf("journalRequest = %q, %v", out, err)
	}
	_, err = journalRequest(mnt, "sessions/nobody/journal", "changes")
	if msg := journalError(err, "nobody"); !strings.Contains(msg, `no session "nobody"`) {
		t.Errorf("a missing session: %s", msg)
	}
	if _, err := journalFile("../x"); err == nil {
		t.Error("journalFile(../x): no error")
	}
}

// TestHookPromptCheckpoint: a UserPromptSubmit event checkpoints the
// caller's session through self/journal, labelled with the prompt's first
// 60 characters on one line, and prints nothing (Claude Code would give
// stdout to the model).
func TestHookPromptCheckpoint(t *testing.T) {
	mnt := fakeMount(t)
	p := filepath.Join(mnt, ctltree.DirName, "self/journal")
	os.WriteFile(p, nil, 0o644)
	prompt := "fix the failing test\n\nin   journal/rewind.go, then run " + strings.Repeat("x", 80)
	ev, _ := json.Marshal(map[string]string{"session_id": "s", "cwd": mnt, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
	var out bytes.Buffer
	if err := runClaudeHook(bytes.NewReader(ev), &out, ""); err != nil {
		t.Fatal(err)
	}
	label := "prompt: fix the failing test in journal/rewind.go, then run xxxxxxxx"
	if b, _ := os.ReadFile(p); string(b) != "checkpoint "+`"`+label+`"`+"\n" || out.Len() != 0 {
		t.Errorf("self/journal got %q, stdout %q; want the checkpoint labelled %q and no output", b, out.String(), label)
	}
	if got := promptLabel(strings.Repeat("é", 70)); got != "prompt: "+strings.Repeat("é", 60) {
		t.Errorf("promptLabel cuts by bytes: %q", got)
	}
}

// TestHookPromptCheckpointBounded: a mount that never answers holds the
// prompt hook no longer than its bound; the hook reports it on stderr's
// path (an error) and prints nothing on stdout.
func TestHookPromptCheckpointBounded(t *testing.T) {
	mnt := fakeMount(t)
	release := make(chan struct{})
	defer close(release)
	oldReq, oldTimeout := promptCheckpointRequest, promptCheckpointTimeout
	promptCheckpointRequest = func(string, string) error { <-release; return nil }
	promptCheckpointTimeout = 10 * time.Millisecond
	defer func() { promptCheckpointRequest, promptCheckpointTimeout = oldReq, oldTimeout }()
	ev := `{"session_id":"s","cwd":"` + mnt + `","hook_event_name":"UserPromptSubmit","prompt":"go"}`
	var out bytes.Buffer
	err := runClaudeHook(strings.NewReader(ev), &out, "")
	if err == nil || !strings.Contains(err.Error(), "did not answer") || out.Len() != 0 {
		t.Errorf("a hung mount: error %v, stdout %q; want the bound's error and no output", err, out.String())
	}
}

// TestCompleteCheckpoints: `rubinofs rewind --to <TAB>` (and diff --since) offers the
// session's checkpoint ids, newest first, from its checkpoints file.
func TestCompleteCheckpoints(t *testing.T) {
	mnt := fakeMount(t)
	os.WriteFile(filepath.Join(mnt, ctltree.DirName, "self/checkpoints"),
		[]byte(`{"id":"cp000000","label":"session start"}`+"\n"+`{"id":"cp000001","label":"prompt: x"}`+"\n"), 0o644)
	args := []string{"rubinofs", "rewind", "--mount", mnt, "--to", "--generate-bash-completion"}
	oldArgs := os.Args
	os.Args = args
	defer func() { os.Args = oldArgs }()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	app.Run(args)
	if got := out.String(); got != "cp000001\ncp000000\n" {
		t.Errorf("completion of --to: %q, want the ids newest first", got)
	}
	args = []string{"rubinofs", "diff", "--mount", mnt, "--since", "--generate-bash-completion"}
	os.Args = args
	out.Reset()
	app.Run(args)
	if got := out.String(); got != "cp000001\ncp000000\n" {
		t.Errorf("completion of diff --since: %q, want the ids newest first", got)
	}
}

// TestFormatCheckpoints: the checkpoints table, one row a checkpoint, the
// label on one line.
func TestFormatCheckpoints(t *testing.T) {
	local := func(s string) string {
		tm, _ := time.Parse(time.RFC3339, s)
		return tm.Local().Format("2006-01-02 15:04:05")
	}
	text, err := formatCheckpoints([]byte(`{"id":"cp000000","label":"session start","time":"2026-05-04T10:11:12Z","changes":3,"paths":2}
{"id":"cp000001","label":"prompt: fix\nit","time":"2026-05-04T10:12:00Z","changes":0,"paths":0}
`))
	want := "ID        TIME                 CHANGES  PATHS  LABEL\n" +
		"cp000000  " + local("2026-05-04T10:11:12Z") + "  3        2      session start\n" +
		"cp000001  " + local("2026-05-04T10:12:00Z") + "  0        0      prompt: fix ⏎ it\n"
	if err != nil || text != want {
		t.Errorf("formatCheckpoints = %q, %v\nwant %q", text, err, want)
	}
	if _, err := formatCheckpoints([]byte("{broken\n")); err == nil {
		t.Error("a line that is not JSON: no error")
	}
}
