package tests

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// patchRefused reports whether an apply_patch output reports that Codex
// could not write or delete the file named name. Codex drops the errno
// from what the model receives: a refusal reads "Failed to write file
// PATH" (an update, an add over an existing file) or "Failed to delete
// file PATH", with no "Permission denied"; .rubino/guard/why says why.
func patchRefused(out, name string) bool {
	return (strings.Contains(out, "Failed to write file") || strings.Contains(out, "Failed to delete file")) &&
		strings.Contains(out, name)
}

// patchApplied reports whether an apply_patch output reports success.
func patchApplied(out string) bool {
	return strings.Contains(out, "Success. Updated the following files")
}

// TestCodexApplyPatchStaleRefused drives Codex through the mount: the model
// cats a file (a child's read, which counts), the file is then changed from
// outside, and the model's apply_patch (Codex reads the target itself, then
// rewrites it in place) is refused as stale: the tool output names the
// file, and .rubino/guard/why says why. After the model looks again the
// same patch applies.
func TestCodexApplyPatchStaleRefused(t *testing.T) {
	codexBin(t)
	m := newMount(t, map[string]string{"notes.txt": "alpha\nbeta\n"}, nil)
	patch := codexPatch("*** Update File: notes.txt\n@@\n alpha\n-beta\n+BETA\n")
	var afterRefusal string
	model := newCodexModel(t,
		codexExec("cat notes.txt"),
		patch.before(func() {
			mark := m.appliedMark()
			m.writeBacking("notes.txt", "alpha\nbeta\ngamma from outside\n")
			m.waitApplied(mark, "notes.txt")
		}),
		codexExec("cat .rubino/guard/why; cat notes.txt").before(func() {
			afterRefusal = m.readBacking("notes.txt")
		}),
		patch,
	)
	out := runCodex(t, m, "", model)

	if got, _ := model.mustStep(t, 0); !strings.Contains(got, "beta") {
		t.Errorf("cat notes.txt: want its bytes in the output; got\n%s", got)
	}
	if got, _ := model.mustStep(t, 1); !patchRefused(got, "notes.txt") {
		t.Errorf("apply_patch over a file changed outside since the model's cat: want it refused; got\n%s\nCodex:\n%s", got, out)
	}
	if afterRefusal != "alpha\nbeta\ngamma from outside\n" {
		t.Errorf("notes.txt after the refused patch = %q, want the outside edit intact", afterRefusal)
	}
	if got, _ := model.mustStep(t, 2); !strings.Contains(got, " stale: ") || !strings.Contains(got, "notes.txt") || !strings.Contains(got, "gamma from outside") {
		t.Errorf(".rubino/guard/why and a fresh cat: want a stale refusal naming notes.txt, then the new bytes; got\n%s", got)
	}
	if got, _ := model.mustStep(t, 3); !patchApplied(got) {
		t.Errorf("apply_patch after the model read the current bytes: want it applied; got\n%s", got)
	}
	if got := m.readBacking("notes.txt"); got != "alpha\nBETA\ngamma from outside\n" {
		t.Errorf("notes.txt after the second patch = %q, want the patch over the outside edit", got)
	}
}

// TestCodexApplyPatchDeleteNeverRead: an apply_patch deleting a file the
// model never saw is refused (Codex reads the file itself before it
// unlinks it; in harness mode that read is not the model's), and the file
// stays. Once the model has cat'ed it the same delete passes.
func TestCodexApplyPatchDeleteNeverRead(t *testing.T) {
	codexBin(t)
	m := newMount(t, map[string]string{"old.txt": "never shown to the model\n", "keep.txt": "x\n"}, nil)
	del := codexPatch("*** Delete File: old.txt\n")
	var existedAfterRefusal bool
	model := newCodexModel(t,
		del,
		codexExec("cat .rubino/guard/why; cat old.txt").before(func() {
			_, err := os.Stat(m.backing("old.txt"))
			existedAfterRefusal = err == nil
		}),
		del,
	)
	out := runCodex(t, m, "", model)

	if got, _ := model.mustStep(t, 0); !patchRefused(got, "old.txt") {
		t.Errorf("apply_patch deleting a never-read file: want it refused; got\n%s\nCodex:\n%s", got, out)
	}
	if !existedAfterRefusal {
		t.Errorf("old.txt was deleted by a patch the guard should have refused")
	}
	if got, _ := model.mustStep(t, 1); !strings.Contains(got, " unread: ") || !strings.Contains(got, "old.txt") || !strings.Contains(got, "never shown to the model") {
		t.Errorf(".rubino/guard/why and a cat: want an unread refusal naming old.txt, then its bytes; got\n%s", got)
	}
	if got, _ := model.mustStep(t, 2); !patchApplied(got) {
		t.Errorf("apply_patch deleting a file after the model's cat: want it applied; got\n%s", got)
	}
	if _, err := os.Stat(m.backing("old.txt")); !os.IsNotExist(err) {
		t.Errorf("old.txt still exists after an allowed delete (err %v)", err)
	}
	if got := m.readBacking("keep.txt"); got != "x\n" {
		t.Errorf("keep.txt = %q, want it untouched", got)
	}
}

// TestCodexApplyPatchAfterCat: the everyday path. The model cats a file
// through exec_command (a child of Codex: its read counts) and patches it;
// the patch applies and Codex reports no error.
func TestCodexApplyPatchAfterCat(t *testing.T) {
	codexBin(t)
	m := newMount(t, map[string]string{"src/app.txt": "func main() {\n\tprintln(\"hi\")\n}\n"}, nil)
	model := newCodexModel(t,
		codexExec("cat src/app.txt; echo cat-exit=$?; readlink .rubino/self; echo ppid=$PPID; cat .rubino/self/info"),
		codexPatch("*** Update File: src/app.txt\n@@\n func main() {\n-\tprintln(\"hi\")\n+\tprintln(\"hello\")\n }\n"),
		codexExec("cat src/app.txt"),
	)
	out := runCodex(t, m, "", model)

	// The shell Codex starts for exec_command resolves to Codex's session
	// (it is not daemonised away), and its parent is the session's root:
	// the process that runs apply_patch is the harness root, not a child
	// of a launcher.
	got, _ := model.mustStep(t, 0)
	if !strings.Contains(got, "cat-exit=0") || !strings.Contains(got, "sessions/codex") {
		t.Errorf("cat src/app.txt; readlink .rubino/self: want exit 0 and the session codex; got\n%s", got)
	}
	ppid := regexp.MustCompile(`ppid=(\d+)`).FindStringSubmatch(got)
	root := regexp.MustCompile(`"root_pid":\s*(\d+)`).FindStringSubmatch(got)
	if ppid == nil || root == nil || ppid[1] != root[1] {
		t.Errorf("the exec_command shell's parent is not the session root (want $PPID = root_pid); got\n%s", got)
	}
	if got, _ := model.mustStep(t, 1); !patchApplied(got) {
		t.Errorf("apply_patch after cat: want it applied; got\n%s\nCodex:\n%s", got, out)
	}
	if got := m.readBacking("src/app.txt"); got != "func main() {\n\tprintln(\"hello\")\n}\n" {
		t.Errorf("src/app.txt after the patch = %q", got)
	}
	if got, _ := model.mustStep(t, 2); !strings.Contains(got, "hello") {
		t.Errorf("cat after the patch: want the new bytes; got\n%s", got)
	}
}

// TestCodexRefusalReachesModel: what the model receives when the guard
// refuses Codex. An apply_patch "Add File" over an existing file the model
// never read (Codex reads it only to show a diff, then opens it with
// O_TRUNC) is refused and the tool output names the file; a shell
// redirection over another never-read file fails with Permission denied.
// After each, .rubino/guard/why (the session's last refusal) names the
// file and the reason.
func TestCodexRefusalReachesModel(t *testing.T) {
	codexBin(t)
	m := newMount(t, map[string]string{"added.txt": "tracked, never read\n", "other.txt": "also never read\n"}, nil)
	model := newCodexModel(t,
		codexPatch("*** Add File: added.txt\n+replaced blind\n"),
		codexExec("cat .rubino/guard/why"),
		codexExec("echo clobber > other.txt; echo write-exit=$?"),
		codexExec("cat .rubino/guard/why"),
	)
	out := runCodex(t, m, "", model)

	if got, _ := model.mustStep(t, 0); !patchRefused(got, "added.txt") {
		t.Errorf("apply_patch adding over a never-read file: want it refused; got\n%s\nCodex:\n%s", got, out)
	}
	if got, _ := model.mustStep(t, 1); !strings.Contains(got, " unread: ") || !strings.Contains(got, "added.txt") {
		t.Errorf(".rubino/guard/why after the refused patch: want an unread refusal naming added.txt; got\n%s", got)
	}
	if got, _ := model.mustStep(t, 2); !strings.Contains(got, "Permission denied") || strings.Contains(got, "write-exit=0") {
		t.Errorf("echo > a never-read file: want Permission denied and a failed write; got\n%s", got)
	}
	if got, _ := model.mustStep(t, 3); !strings.Contains(got, " unread: ") || !strings.Contains(got, "other.txt") {
		t.Errorf(".rubino/guard/why after the refused redirection: want an unread refusal naming other.txt; got\n%s", got)
	}
	if got := m.readBacking("added.txt"); got != "tracked, never read\n" {
		t.Errorf("added.txt after a refused patch = %q, want its bytes intact", got)
	}
	if got := m.readBacking("other.txt"); got != "also never read\n" {
		t.Errorf("other.txt after a refused write = %q, want its bytes intact", got)
	}
}

// codexDeveloperNotes returns the developer messages of a Responses API
// request body: where Codex puts a hook's additionalContext.
func codexDeveloperNotes(t *testing.T, body string) []string {
	t.Helper()
	var req struct {
		Input []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatalf("request body is not JSON: %v", err)
	}
	var out []string
	for _, it := range req.Input {
		if it.Type == "message" && it.Role == "developer" {
			for _, c := range it.Content {
				out = append(out, c.Text)
			}
		}
	}
	return out
}

// notesWith returns the notes that hold every one of subs, joined.
func notesWith(notes []string, subs ...string) string {
	var hit []string
	for _, n := range notes {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(n, s)
		}
		if ok {
			hit = append(hit, n)
		}
	}
	return strings.Join(hit, "\n---\n")
}

// TestCodexHookReportsRefusals: with the hook installed by `rubinofs setup
// codex`, the model is told why its writes were refused, as Codex
// developer messages. A shell redirection over a never-read file, in a
// command that still exits 0, is reported by that call's PostToolUse. A
// refused apply_patch gets no post event from Codex (it runs none after a
// failed tool call): its refusal is reported by the next call's
// PreToolUse, and so reaches the model in the request after that call.
// A call without a refusal adds no note.
func TestCodexHookReportsRefusals(t *testing.T) {
	codexBin(t)
	m := newMount(t, map[string]string{"added.txt": "tracked, never read\n", "other.txt": "also never read\n", "seen.txt": "x\n"}, nil)
	model := newCodexModel(t,
		codexExec("cat seen.txt"),
		codexPatch("*** Add File: added.txt\n+replaced blind\n"),
		codexExec("echo clobber > other.txt; echo write-exit=$?"),
		codexExec("true"),
	)
	out := runCodexHooked(t, m, "", model, true)

	if got, _ := model.mustStep(t, 1); !patchRefused(got, "added.txt") {
		t.Fatalf("apply_patch adding over a never-read file: want it refused; got\n%s\nCodex:\n%s", got, out)
	}
	if got, _ := model.mustStep(t, 2); !strings.Contains(got, "write-exit=1") {
		t.Fatalf("echo > a never-read file: want the write to fail and the command to go on; got\n%s", got)
	}
	reqs := model.requests()
	if len(reqs) < 4 {
		t.Fatalf("the model got %d tool-bearing requests, want at least 4; Codex:\n%s", len(reqs), out)
	}
	// reqs[i] carries the outputs of steps 0..i-1.
	if notes := codexDeveloperNotes(t, reqs[2]); notesWith(notes, "rubinofs refused") != "" {
		t.Errorf("the request after the refused apply_patch carries a rubinofs note, but Codex ran no hook after the failed call that could have added it: %q", notes)
	}
	notes := codexDeveloperNotes(t, reqs[3])
	if got := notesWith(notes, "during the previous tool call", "open-trunc unread", "added.txt"); got == "" {
		t.Errorf("the request after the next call: want the apply_patch refusal (from PreToolUse) naming added.txt; developer notes:\n%q\nCodex:\n%s", notes, out)
	}
	if got := notesWith(notes, "during this tool call", "open-trunc unread", "other.txt"); got == "" {
		t.Errorf("the request after the refused redirection (exit 0): want its refusal (from PostToolUse) naming other.txt; developer notes:\n%q", notes)
	}
	if got := notesWith(notes, "rubinofs refused"); strings.Count(got, "added.txt") != 1 {
		t.Errorf("the apply_patch refusal should be reported exactly once; notes:\n%s", got)
	}
	if len(reqs) > 4 {
		if got := notesWith(codexDeveloperNotes(t, reqs[4]), "rubinofs refused"); strings.Count(got, "rubinofs refused") != 2 {
			t.Errorf("a call without refusals (true) added a rubinofs note, or the earlier ones vanished:\n%s", got)
		}
	}
	if got := m.readBacking("added.txt"); got != "tracked, never read\n" {
		t.Errorf("added.txt after a refused patch = %q, want its bytes intact", got)
	}
}

// TestCodexHookReportsLastRefusalAtStop: when the model ends its turn right
// after a refused apply_patch (no later tool call whose PreToolUse could
// report it), the hook blocks the stop once with the refusal as the reason,
// and Codex sends the model one more request carrying it.
func TestCodexHookReportsLastRefusalAtStop(t *testing.T) {
	codexBin(t)
	m := newMount(t, map[string]string{"added.txt": "tracked, never read\n"}, nil)
	model := newCodexModel(t, codexPatch("*** Add File: added.txt\n+replaced blind\n"))
	out := runCodexHooked(t, m, "", model, true)

	if got, _ := model.mustStep(t, 0); !patchRefused(got, "added.txt") {
		t.Fatalf("apply_patch adding over a never-read file: want it refused; got\n%s\nCodex:\n%s", got, out)
	}
	reqs := model.requests()
	last := reqs[len(reqs)-1]
	if len(reqs) < 3 || !strings.Contains(last, "during your last tool call") || !strings.Contains(last, "open-trunc unread") ||
		!strings.Contains(last, "added.txt") {
		t.Errorf("want a request after the model stopped that carries the refusal of added.txt; %d requests, the last:\n%.3000s\nCodex:\n%s",
			len(reqs), last, out)
	}
	if n := strings.Count(last, "during your last tool call"); n != 1 {
		t.Errorf("the refusal reached the model %d times, want once (the stop is blocked once)", n)
	}
}
