package tests

// The change journal's safety through a real mount: conflicts with other
// sessions and with edits from outside the mount, a daemon killed with
// SIGKILL mid-session, files over the size limit, and the Claude Code
// prompt hook that checkpoints every prompt.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestJournalRewindConflict: after the session changed three files,
// another session changes one of them and an edit from outside the mount
// another; the rewind restores the third, reports the two as conflicts
// (naming the other session, and "outside the mount"), keeps their bytes
// and exits non-zero. --force then restores them too.
func TestJournalRewindConflict(t *testing.T) {
	m := journalMount(t)
	s := m.startSession("agent")
	s.must("cat notes.txt target.txt README.md >/dev/null && echo mine >> notes.txt && echo mine >> target.txt && echo mine >> README.md")
	other := m.startSession("other")
	other.must("cat target.txt >/dev/null && echo theirs >> target.txt")
	other.close()
	if err := os.WriteFile(filepath.Join(m.ws, "README.md"), []byte("edited outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out, code := s.run("rubinofs rewind --to cp000000")
	if code == 0 {
		t.Errorf("a rewind that skipped conflicts exited 0:\n%s", out)
	}
	if _, _, conflicts, _ := rewindCounts(t, out); conflicts != 2 {
		t.Errorf("conflicts = %d, want 2 (target.txt, README.md)\n%s", conflicts, out)
	}
	for _, want := range []string{"target.txt: changed by session other", "README.md: changed outside the mount"} {
		if !strings.Contains(out, want) {
			t.Errorf("the rewind's report lacks %q:\n%s", want, out)
		}
	}
	for path, want := range map[string]string{
		"notes.txt":  "alpha\n",
		"target.txt": "to be overwritten by cp\nmine\ntheirs\n",
		"README.md":  "edited outside\n",
	} {
		if b, _ := os.ReadFile(filepath.Join(m.ws, path)); string(b) != want {
			t.Errorf("%s after the rewind: %q, want %q", path, b, want)
		}
	}

	out, code = s.run("rubinofs rewind --force --to cp000000")
	if code != 0 {
		t.Errorf("a forced rewind: exit %d\n%s", code, out)
	}
	for path, want := range map[string]string{"notes.txt": "alpha\n", "target.txt": "to be overwritten by cp\n", "README.md": "# demo\n"} {
		if b, _ := os.ReadFile(filepath.Join(m.ws, path)); string(b) != want {
			t.Errorf("%s after the forced rewind: %q, want %q", path, b, want)
		}
		if b, _ := os.ReadFile(m.path(path)); string(b) != want {
			t.Errorf("%s through the mount after the forced rewind: %q, want %q", path, b, want)
		}
	}
}

// loopLines matches the numbered lines the write loop of
// TestJournalKillRemount appends.
var loopLines = regexp.MustCompile(`(?m)^[0-9]+$`)

// TestJournalKillRemount: the daemon is killed with SIGKILL while the
// session is writing; after a remount on the same state directory, a
// rewind of the session (named, from outside it) returns the tree to its
// state before the session, byte for byte: no acknowledged change lacks
// its pre-image. Only the file being written at the kill may be a conflict
// (its last after-state may not have been noted); --force takes it back
// too.
func TestJournalKillRemount(t *testing.T) {
	m := journalMount(t)
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	s.must(realToolsScript)
	loop := "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); echo $i >> loop.txt || exit 3; done"
	s.send(loop)
	waitFor(t, "the session's write loop to be under way", func() bool {
		b, _ := os.ReadFile(filepath.Join(m.ws, "loop.txt"))
		return len(loopLines.FindAll(b, 100)) >= 100
	})
	m.kill9()
	if out, code := s.result(loop); code == 0 {
		t.Fatalf("the write loop finished although its daemon was killed:\n%s", out)
	}
	s.close()
	m.mountDaemon()

	out, code := cliCode(t, m.tmp, "rewind", "--mount", m.mnt, "--session", "agent", "--to", "cp000000")
	restored, removed, conflicts, unrecoverable := rewindCounts(t, out)
	if restored+removed == 0 || unrecoverable != 0 {
		t.Errorf("rewind after the remount: restored %d, removed %d, unrecoverable %d (exit %d)\n%s", restored, removed, unrecoverable, code, out)
	}
	if conflicts > 1 || conflicts == 1 && !strings.Contains(out, "loop.txt:") {
		t.Errorf("rewind after the remount: conflicts other than the file written at the kill:\n%s", out)
	}
	if conflicts == 1 {
		out, code = cliCode(t, m.tmp, "rewind", "--mount", m.mnt, "--session", "agent", "--force", "--to", "cp000000")
		if code != 0 {
			t.Errorf("forced rewind after the remount: exit %d\n%s", code, out)
		}
	}
	sameManifest(t, "after the rewind following the kill and remount (backing)", before, manifest(t, m.ws, "build"))
	sameManifest(t, "after the rewind following the kill and remount (through the mount)", before, manifest(t, m.mnt, "build"))
}

// TestJournalUnrecoverable: with --journal-max-file-size below a file's
// size, the session's change of it is listed, and the rewind reports the
// file as unrecoverable (in its list and counts, exit status non-zero)
// and leaves its bytes as they are, while restoring the small file.
func TestJournalUnrecoverable(t *testing.T) {
	tmp := t.TempDir()
	ws := journalRepo(t, tmp)
	big := strings.Repeat("0123456789abcdef", 256) // 4096 bytes
	if err := os.WriteFile(filepath.Join(ws, "big.dat"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newCLIMount(t, tmp, ws, filepath.Join(tmp, "state"), "--journal-max-file-size", "1024")
	s := m.startSession("agent")
	s.must("cat big.dat notes.txt >/dev/null && echo tail >> big.dat && echo more >> notes.txt")
	if got := changeLines(t, s.must("rubinofs changes")); got["big.dat"] != "M" || got["notes.txt"] != "M" {
		t.Errorf("rubinofs changes: %v, want big.dat and notes.txt modified", got)
	}
	out, code := s.run("rubinofs rewind --to cp000000")
	if code == 0 {
		t.Errorf("a rewind with an unrecoverable path exited 0:\n%s", out)
	}
	if _, _, _, unrecoverable := rewindCounts(t, out); unrecoverable != 1 {
		t.Errorf("unrecoverable = %d, want 1 (big.dat)\n%s", unrecoverable, out)
	}
	if !regexp.MustCompile(`(?m)^unrecoverable .*:\n  big\.dat: `).MatchString(out) {
		t.Errorf("the rewind does not list big.dat as unrecoverable:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "alpha\n" {
		t.Errorf("notes.txt after the rewind: %q, want it restored", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "big.dat")); string(b) != big+"tail\n" {
		t.Errorf("big.dat after the rewind: %d bytes, want the session's bytes left as they were", len(b))
	}
}

// TestJournalPromptHook: `rubinofs setup claude-code` installs the prompt
// hook, and that hook command, given a UserPromptSubmit event in the
// agent's session, checkpoints the session labelled with the prompt and
// prints nothing (Claude Code would show stdout to the model); a rewind
// to that checkpoint undoes what the turn changed.
func TestJournalPromptHook(t *testing.T) {
	m := journalMount(t)
	out, err := cli(t, m.tmp, "setup", "claude-code", "--mount", m.mnt)
	if err != nil || !strings.Contains(out, "UserPromptSubmit") {
		t.Fatalf("setup claude-code: %v\n%s", err, out)
	}
	settings, err := os.ReadFile(filepath.Join(m.ws, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	hook := regexp.MustCompile(`"UserPromptSubmit": \[\s*\{\s*"hooks": \[\s*\{\s*"command": "([^"]+)"`).FindSubmatch(settings)
	if hook == nil {
		t.Fatalf("no UserPromptSubmit hook in the settings:\n%s", settings)
	}
	event := filepath.Join(m.tmp, "prompt.json")
	os.WriteFile(event, []byte(`{"session_id":"s1","cwd":"`+m.mnt+`","hook_event_name":"UserPromptSubmit","prompt":"rename the helper\nand fix its callers"}`), 0o644)
	s := m.startSession("agent")
	s.must("echo before > before.txt")
	if got := s.must(string(hook[1]) + " < " + shq(event)); got != "" {
		t.Errorf("the prompt hook printed %q, want nothing", got)
	}
	ids, labels := checkpointIDs(t, s.must("cat .rubino/self/checkpoints"))
	if len(ids) != 2 || labels[1] != "prompt: rename the helper and fix its callers" {
		t.Fatalf("checkpoints after the prompt hook: %v %q", ids, labels)
	}
	s.must("echo during > during.txt && cat before.txt >/dev/null && echo more >> before.txt")
	s.must("rubinofs rewind --to " + ids[1])
	if _, err := os.Stat(filepath.Join(m.ws, "during.txt")); !os.IsNotExist(err) {
		t.Errorf("during.txt after the rewind to the prompt's checkpoint: %v, want it removed", err)
	}
	if b, _ := os.ReadFile(filepath.Join(m.ws, "before.txt")); string(b) != "before\n" {
		t.Errorf("before.txt after the rewind to the prompt's checkpoint: %q, want its state at the prompt", b)
	}
}

// TestJournalSetupHook drives real Claude Code under `rubinofs run
// --harness` with the hooks `rubinofs setup claude-code` installs: the
// prompt makes a checkpoint in the agent's session, labelled with it, and
// a rewind to that checkpoint undoes what the turn's Bash command made.
func TestJournalSetupHook(t *testing.T) {
	claudeBin(t)
	cm := journalMount(t)
	m := &mount{t: t, tmp: cm.tmp, ws: cm.ws, mnt: cm.mnt} // the CLI mount as runClaude takes it
	rewind := shq(rubinofsBin(t)) + ` rewind --to "$(sed -n 's/.*"id":"\(cp[0-9]*\)","label":"prompt: work through.*/\1/p' .rubino/self/checkpoints | tail -1)"`
	model := newScriptedModel(t,
		bash("echo made by the turn > made.txt; cat .rubino/self/checkpoints"),
		bash(rewind+"; echo rewind-exit=$?; ls made.txt"),
	)
	runClaude(t, m, "", model, asHarness())
	if out, _ := model.mustStep(t, 0); !strings.Contains(out, `"label":"prompt: work through the script"`) {
		t.Errorf("the session's checkpoints after the prompt lack the prompt's:\n%s", out)
	}
	if out, _ := model.mustStep(t, 1); !strings.Contains(out, "rewind-exit=0") || !strings.Contains(out, "No such file") {
		t.Errorf("the rewind to the prompt's checkpoint: want exit 0 and made.txt gone; got\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(cm.ws, "made.txt")); !os.IsNotExist(err) {
		t.Errorf("made.txt after the rewind: %v, want it removed", err)
	}
}
