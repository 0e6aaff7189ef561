package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// readEvent is a PostToolUse event of the Read tool as Claude Code 2.1
// sends it (recorded from a real run), with input and response spliced in.
func readEvent(input, response string) string {
	return `{"session_id":"s-1","cwd":"/m","hook_event_name":"PostToolUse","tool_name":"Read",` +
		`"tool_input":` + input + `,"tool_response":` + response + `,"tool_use_id":"toolu_01"}`
}

func TestHookReadOf(t *testing.T) {
	cases := []struct {
		name, event string
		want        readOutcome
		ok          bool
	}{
		{"whole file", readEvent(`{"file_path":"/m/a.txt"}`,
			`{"type":"text","file":{"filePath":"/m/a.txt","content":"alpha\nbeta\n","numLines":3,"startLine":1,"totalLines":3}}`),
			readOutcome{Path: "/m/a.txt", Content: "alpha\nbeta\n", Whole: true}, true},
		{"empty file", readEvent(`{"file_path":"/m/e"}`,
			`{"type":"text","file":{"filePath":"/m/e","content":"","numLines":1,"startLine":1,"totalLines":1}}`),
			readOutcome{Path: "/m/e", Content: "", Whole: true}, true},
		{"offset and limit", readEvent(`{"file_path":"/m/big.txt","offset":2,"limit":1}`,
			`{"type":"text","file":{"filePath":"/m/big.txt","content":"l2","numLines":1,"startLine":2,"totalLines":5}}`),
			readOutcome{Path: "/m/big.txt", Content: "l2"}, true},
		{"first lines only", readEvent(`{"file_path":"/m/big.txt","limit":2}`,
			`{"type":"text","file":{"filePath":"/m/big.txt","content":"l1\nl2","numLines":2,"startLine":1,"totalLines":5}}`),
			readOutcome{Path: "/m/big.txt", Content: "l1\nl2"}, true},
		{"unchanged stub", readEvent(`{"file_path":"/m/a.txt"}`,
			`{"type":"file_unchanged","file":{"filePath":"/m/a.txt"}}`),
			readOutcome{Path: "/m/a.txt"}, true},
		{"image", readEvent(`{"file_path":"/m/p.png"}`,
			`{"type":"image","file":{"base64":"AAAA","type":"image/png"}}`),
			readOutcome{Path: "/m/p.png"}, true},
		{"Bash", `{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"cat a"},"tool_response":{"stdout":"x"}}`,
			readOutcome{}, false},
		{"PreToolUse of Read", `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/m/a"}}`,
			readOutcome{}, false},
	}
	for _, c := range cases {
		ev, err := parseHookEvent(strings.NewReader(c.event))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, ok := ev.readOf()
		if ok != c.ok || got != c.want {
			t.Errorf("%s: readOf = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	for _, bad := range []string{"", "not json", `{"tool_name":"Read"}`} {
		if _, err := parseHookEvent(strings.NewReader(bad)); err == nil {
			t.Errorf("parseHookEvent(%q): no error", bad)
		}
	}
}

// TestHookShownHashes: the content Claude Code shows for a file written
// with CRLF line ends, or with a byte-order mark, still matches the file's
// hash on disk, as the guard computes it.
func TestHookShownHashes(t *testing.T) {
	shown := "a\nb\n" // as Claude Code reports each file below
	for _, disk := range []string{"a\nb\n", "a\r\nb\r\n", "\ufeffa\nb\n", "\ufeffa\r\nb\r\n"} {
		if h := guard.HashBytes([]byte(disk)).String(); !slices.Contains(shownHashes(shown), h) {
			t.Errorf("shownHashes(%q) lacks the hash of %q", shown, disk)
		}
	}
	if got := shownHashes(shown)[0]; got != guard.HashBytes([]byte(shown)).String() {
		t.Errorf("shownHashes[0] = %s, want the hash of the content itself", got)
	}
	if h := guard.HashBytes([]byte("a\nb\nc\n")).String(); slices.Contains(shownHashes(shown), h) {
		t.Error("shownHashes matches different content")
	}
}

func TestHookDenialContext(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := guard.Denial{Time: t0, Op: guard.OpOpenTrunc, Code: guard.CodeUnread, Path: "old.txt", Message: "refusing to overwrite old.txt: read it first"}
	nw := guard.Denial{Time: t0.Add(time.Nanosecond), Op: guard.OpOpenTrunc, Code: guard.CodeStale, Path: "f.txt", Message: "f.txt changed on disk since this session read it: read it again before you overwrite it"}
	snap := snapshotOf([]guard.Denial{old})
	if got := newSince([]guard.Denial{old}, snap); len(got) != 0 {
		t.Errorf("newSince with no new denial = %v", got)
	}
	got := newSince([]guard.Denial{old, nw}, snap)
	if len(got) != 1 || got[0].Path != "f.txt" {
		t.Fatalf("newSince = %v, want the f.txt denial", got)
	}
	if got := newSince([]guard.Denial{old}, snapshotOf(nil)); len(got) != 1 {
		t.Errorf("newSince from an empty log's snapshot = %v, want every denial", got)
	}
	ctx := denialContext(got)
	for _, want := range []string{"refused 1 write", ".rubino/guard/why", string(guard.CodeStale), nw.Message, "Read the file first"} {
		if !strings.Contains(ctx, want) {
			t.Errorf("denialContext lacks %q:\n%s", want, ctx)
		}
	}
	if denialContext(nil) != "" {
		t.Error("denialContext(nil) is not empty")
	}
	var out struct {
		HookSpecificOutput struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(hookOutput("PostToolUseFailure", ctx), &out); err != nil {
		t.Fatal(err)
	}
	if out.HookSpecificOutput.HookEventName != "PostToolUseFailure" || out.HookSpecificOutput.AdditionalContext != ctx {
		t.Errorf("hookOutput = %+v", out)
	}
}

// fakeMount lays out the control files the hook uses as plain files under
// a temporary directory: enough for findMount, readCtl and writeCtl.
func fakeMount(t *testing.T) string {
	t.Helper()
	mnt := t.TempDir()
	for name, content := range map[string]string{"status": "{}\n", "self/denials": "", "self/ctl": "", "self/tracked": ""} {
		p := filepath.Join(mnt, ctltree.DirName, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("RUBINO_MOUNT", "")
	return mnt
}

// TestHookDenialDuringCall: a denial logged between PreToolUse and
// PostToolUse reaches the model as additionalContext, for a tool call that
// succeeded as for one that failed; a call without one adds nothing, and
// the PreToolUse state is cleaned up.
func TestHookDenialDuringCall(t *testing.T) {
	mnt := fakeMount(t)
	denials := filepath.Join(mnt, ctltree.DirName, "self/denials")
	logDenial := func(path string) {
		b, _ := json.Marshal(guard.Denial{Time: time.Now(), Op: guard.OpOpenTrunc, Code: guard.CodeUnread, Path: path,
			Message: "refusing to overwrite " + path + ": read it first"})
		f, _ := os.OpenFile(denials, os.O_APPEND|os.O_WRONLY, 0)
		f.Write(append(b, '\n'))
		f.Close()
	}
	logDenial("before.txt") // an earlier call's: never reported again
	call := func(event, id string) string {
		ev := `{"session_id":"sess/../x","cwd":"` + mnt + `","hook_event_name":"` + event + `","tool_name":"Bash",` +
			`"tool_input":{"command":"echo x > f; true"},"tool_response":{"stdout":""},"tool_use_id":"` + id + `"}`
		var out bytes.Buffer
		if err := runClaudeHook(strings.NewReader(ev), &out, mnt); err != nil {
			t.Fatalf("%s %s: %v", event, id, err)
		}
		return out.String()
	}
	if out := call("PreToolUse", "t1"); out != "" {
		t.Errorf("PreToolUse printed %q", out)
	}
	logDenial("f.txt")
	out := call("PostToolUse", "t1")
	if !strings.Contains(out, `"additionalContext"`) || !strings.Contains(out, "f.txt") || strings.Contains(out, "before.txt") {
		t.Errorf("PostToolUse after a denial printed %q, want the f.txt denial only", out)
	}
	call("PreToolUse", "t2")
	logDenial("g.txt")
	if out := call("PostToolUseFailure", "t2"); !strings.Contains(out, `"hookEventName":"PostToolUseFailure"`) || !strings.Contains(out, "g.txt") {
		t.Errorf("PostToolUseFailure after a denial printed %q", out)
	}
	call("PreToolUse", "t3")
	if out := call("PostToolUse", "t3"); out != "" {
		t.Errorf("a call without a denial printed %q", out)
	}
	if left, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "rubinofs-hooks", "*", "*")); len(left) != 0 {
		t.Errorf("state left after PostToolUse: %v", left)
	}
}

// TestHookDeclaresRead: a whole-file Read is declared through self/ctl;
// when the bytes the guard recorded are not the ones the model was shown,
// the hook declares the shown bytes' hash; a partial read declares nothing.
func TestHookDeclaresRead(t *testing.T) {
	mnt := fakeMount(t)
	ctl := filepath.Join(mnt, ctltree.DirName, "self/ctl")
	tracked := filepath.Join(mnt, ctltree.DirName, "self/tracked")
	file := filepath.Join(mnt, "src", "a.txt")
	post := func(content string, start, num, total int) string {
		os.WriteFile(ctl, nil, 0o644)
		resp, _ := json.Marshal(map[string]any{"type": "text", "file": map[string]any{
			"filePath": file, "content": content, "numLines": num, "startLine": start, "totalLines": total}})
		ev := `{"session_id":"s","cwd":"` + mnt + `","hook_event_name":"PostToolUse","tool_name":"Read",` +
			`"tool_input":{"file_path":"` + file + `"},"tool_response":` + string(resp) + `,"tool_use_id":"r"}`
		// No PreToolUse snapshot: the denial report says so, the read is
		// declared regardless.
		runClaudeHook(strings.NewReader(ev), &bytes.Buffer{}, mnt)
		b, _ := os.ReadFile(ctl)
		return string(b)
	}
	crlf := guard.HashBytes([]byte("x\r\ny\r\n")).String()
	os.WriteFile(tracked, []byte("fresh\t"+crlf+"\tsrc/a.txt\n"), 0o644)
	if got := post("x\ny\n", 1, 3, 3); got != "read "+file+"\n" {
		t.Errorf("whole read of a CRLF file: self/ctl got %q, want the plain declaration", got)
	}
	other := guard.HashBytes([]byte("changed since\n")).String()
	os.WriteFile(tracked, []byte("fresh\t"+other+"\tsrc/a.txt\n"), 0o644)
	want := "read " + file + " " + guard.HashBytes([]byte("x\ny\n")).String() + "\n"
	if got := post("x\ny\n", 1, 3, 3); got != want {
		t.Errorf("whole read of a file that changed since: self/ctl got %q, want %q", got, want)
	}
	if got := post("y", 2, 1, 3); got != "" {
		t.Errorf("partial read: self/ctl got %q, want nothing", got)
	}
	file = filepath.Join(mnt, "my notes.txt")
	os.WriteFile(tracked, []byte("fresh\t"+crlf+"\tmy notes.txt\n"), 0o644)
	if got, want := post("x\ny\n", 1, 3, 3), "read \""+file+"\"\n"; got != want {
		t.Errorf("whole read of a path with a space: self/ctl got %q, want %q", got, want)
	}
}

// TestHookFailedEdit: a failed Edit is declared as `edit-failed PATH`; a
// failed Bash call or a successful Edit declares nothing.
func TestHookFailedEdit(t *testing.T) {
	mnt := fakeMount(t)
	ctl := filepath.Join(mnt, ctltree.DirName, "self/ctl")
	file := filepath.Join(mnt, "a.txt")
	for _, c := range []struct{ event, tool, want string }{
		{"PostToolUseFailure", "Edit", "edit-failed " + file + "\n"},
		{"PostToolUseFailure", "Write", "edit-failed " + file + "\n"},
		{"PostToolUse", "Edit", ""},
		{"PostToolUseFailure", "Bash", ""},
	} {
		os.WriteFile(ctl, nil, 0o644)
		ev := `{"session_id":"s","hook_event_name":"` + c.event + `","tool_name":"` + c.tool + `",` +
			`"tool_input":{"file_path":"` + file + `","old_string":"x","new_string":"y"},"error":"String to replace not found","tool_use_id":"e"}`
		runClaudeHook(strings.NewReader(ev), &bytes.Buffer{}, mnt)
		if b, _ := os.ReadFile(ctl); string(b) != c.want {
			t.Errorf("%s of %s: self/ctl got %q, want %q", c.event, c.tool, b, c.want)
		}
	}
}

// TestHookOnAnOlderMount: on a mount without .rubino/self/ctl the hook
// says so, names the file, and still reports denials.
func TestHookOnAnOlderMount(t *testing.T) {
	mnt := fakeMount(t)
	os.Remove(filepath.Join(mnt, ctltree.DirName, "self/ctl"))
	file := filepath.Join(mnt, "a.txt")
	ev := readEvent(`{"file_path":"`+file+`"}`,
		`{"type":"text","file":{"filePath":"`+file+`","content":"x\n","numLines":2,"startLine":1,"totalLines":2}}`)
	err := runClaudeHook(strings.NewReader(ev), &bytes.Buffer{}, mnt)
	if err == nil || !strings.Contains(err.Error(), "self/ctl") || !strings.Contains(err.Error(), "older") {
		t.Errorf("a Read on a mount without self/ctl: error %v, want one naming self/ctl and the older mount", err)
	}
}

// TestHookMountFromEventCwd: without --mount or $RUBINO_MOUNT, the hook
// finds the mount around the event's cwd.
func TestHookMountFromEventCwd(t *testing.T) {
	mnt := fakeMount(t)
	sub := filepath.Join(mnt, "src", "deep")
	os.MkdirAll(sub, 0o755)
	got, err := hookMount("", sub)
	if err != nil || got != mnt {
		t.Errorf("hookMount from %s = %q, %v; want %s", sub, got, err, mnt)
	}
	if _, err := hookMount("", t.TempDir()); err == nil {
		t.Error("hookMount outside any mount: no error")
	}
}

// TestTrackedHashQuotedPaths: trackedHash finds a record whose path
// tracked prints Go-quoted, and a name holding a newline and tabs cannot
// pass for another file's record.
func TestTrackedHashQuotedPaths(t *testing.T) {
	tracked := []byte("fresh\tAAA\t\"x\\nfresh\\tBBB\\tvictim.go\"\nfresh\tCCC\tplain.go\n")
	if got := trackedHash(tracked, "x\nfresh\tBBB\tvictim.go"); got != "AAA" {
		t.Errorf("the quoted path's hash: %q", got)
	}
	if got := trackedHash(tracked, "victim.go"); got != "" {
		t.Errorf("victim.go has no record, got %q", got)
	}
	if got := trackedHash(tracked, "plain.go"); got != "CCC" {
		t.Errorf("plain.go: %q", got)
	}
}
