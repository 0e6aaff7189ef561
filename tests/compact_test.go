package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/daemon"
)

// agentTranscript builds an agent transcript whose tool results are real
// files of this repository (read_file calls on them), as JSON lines.
func agentTranscript(t *testing.T, files int) []byte {
	t.Helper()
	paths, err := filepath.Glob("../*/*.go")
	if err != nil || len(paths) < files {
		t.Fatalf("repository files: %d, %v", len(paths), err)
	}
	sort.Strings(paths)
	msgs := []compact.Message{
		{Role: compact.RoleSystem, Content: "You are a coding agent working on rubinofs. Never push to main."},
		{Role: compact.RoleUser, Content: "Review the packages and find dead code. You must keep the public API."},
	}
	for i, p := range paths[:files] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 8000 {
			b = b[:8000]
		}
		id := fmt.Sprintf("call_%d", i)
		args, _ := json.Marshal(map[string]string{"path": strings.TrimPrefix(p, "../")})
		msgs = append(msgs,
			compact.Message{Role: compact.RoleAssistant, Content: "Reading " + p, ToolCalls: []compact.ToolCall{{ID: id, Type: "function", Function: compact.FunctionCall{Name: "read_file", Arguments: string(args)}}}},
			compact.Message{Role: compact.RoleTool, ToolCallID: id, Content: string(b)},
			compact.Message{Role: compact.RoleUser, Content: fmt.Sprintf("ok, next file (%d)", i)},
		)
	}
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // as the messages file renders them
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	return []byte(out.String())
}

// writeTmp writes data to a file outside the mount and returns its path.
func (m *mount) writeTmp(name string, data []byte) string {
	m.t.Helper()
	p := filepath.Join(m.tmp, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		m.t.Fatal(err)
	}
	return p
}

// jsonFile reads a control file through the mount with cat and decodes it.
func (m *mount) jsonFile(rel string, v any) {
	m.t.Helper()
	out := m.mustSh("cat " + shq(rel))
	if err := json.Unmarshal([]byte(out), v); err != nil {
		m.t.Fatalf("%s: %v\n%s", rel, err, out)
	}
}

// TestCompactFilesEndToEnd feeds a transcript through .rubino/compact with
// shell tools, sees needs_compaction, compacts it, and reads the result,
// the summary and the lineage; malformed input and no-ops are checked on
// the way.
func TestCompactFilesEndToEnd(t *testing.T) {
	m := newMount(t, nil, nil)
	const dir = ".rubino/compact"

	// Bad options are refused with the reason on the same handle.
	out, _ := m.sh(`exec 3<>` + dir + `/new; printf '{"context_window":3}\n' >&3 || cat <&3`)
	if !strings.Contains(out, "error: context_window 3 out of range") {
		t.Fatalf("bad options: %q", out)
	}
	id := strings.TrimSpace(m.mustSh(`exec 3<>` + dir + `/new; printf '{"model":"gpt-4o","context_window":4000}\n' >&3; cat <&3`))
	if len(id) != compact.IDLen {
		t.Fatalf("new returned %q", id)
	}
	sdir := dir + "/sessions/" + id
	if ls := m.mustSh("ls " + sdir); ls != "ctl\nlineage\nmessages\nresult\nstatus\nsummary\n" {
		t.Fatalf("session directory:\n%s", ls)
	}

	transcript := agentTranscript(t, 10)
	lines := strings.Count(string(transcript), "\n")
	src := m.writeTmp("transcript.jsonl", transcript)
	m.mustSh("cat " + shq(src) + " >> " + sdir + "/messages")

	// A batch with a malformed line: EINVAL naming it, nothing stored.
	bad := m.writeTmp("bad.jsonl", []byte(`{"role":"user","content":"fine"}`+"\n"+`{"role":"robot","content":"x"}`+"\n"))
	out, err := m.sh("cat " + shq(bad) + " >> " + sdir + "/messages")
	if err == nil || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("malformed batch: %v %q", err, out)
	}
	out, _ = m.sh(`exec 3<>` + sdir + `/messages; cat ` + shq(bad) + ` >&3 || head -n1 <&3`)
	if !strings.Contains(out, "error: line 2: unknown role") {
		t.Fatalf("reason of the malformed batch: %q", out)
	}

	var st compact.Status
	m.jsonFile(sdir+"/status", &st)
	if st.SessionID != id || st.Messages != lines || !st.NeedsCompaction || st.Thrashing || st.Tokenizer != "o200k_base" || st.ThresholdTokens != 2000 {
		t.Fatalf("status after feeding %d lines: %+v", lines, st)
	}
	if got := m.mustSh("cat " + sdir + "/messages"); got != string(transcript) {
		t.Fatalf("the transcript reads back differently (%d bytes, want %d)", len(got), len(transcript))
	}

	// A unique prefix names the session; an unknown one is ENOENT.
	var st2 compact.Status
	m.jsonFile(dir+"/sessions/"+id[:8]+"/status", &st2)
	if st2.SessionID != id {
		t.Fatalf("status by prefix: %+v", st2)
	}
	if out, err := m.sh("cat " + dir + "/sessions/ffffffff/status"); err == nil || !strings.Contains(out, "No such file") {
		t.Fatalf("unknown session: %v %q", err, out)
	}
	// (dash's echo reports any write error as "I/O error": read the reason
	// from the handle.)
	if out, _ := m.sh(`exec 3<>` + sdir + `/ctl; echo explode >&3 || cat <&3`); !strings.Contains(out, `error: unknown command "explode"`) {
		t.Fatalf("bad ctl command: %q", out)
	}
	if errs := m.mustSh("cat .rubino/errors"); !strings.Contains(errs, `"errno":"EINVAL","message":"unknown command`) {
		t.Fatalf(".rubino/errors:\n%s", errs)
	}

	m.mustSh("echo compact > " + dir + "/sessions/" + id[:8] + "/ctl")
	var res compact.Result
	m.jsonFile(sdir+"/result", &res)
	if !res.Compacted || res.SourceSessionID != id || res.OriginalMessages != lines || res.SavedTokens <= 0 || res.CompactedTokens >= res.OriginalTokens {
		t.Fatalf("result %+v", res)
	}
	child := dir + "/sessions/" + res.TargetSessionID
	var cst compact.Status
	m.jsonFile(child+"/status", &cst)
	if cst.ParentSessionID != id || cst.Messages != res.CompactedMessages || cst.Tokens != res.CompactedTokens {
		t.Fatalf("child status %+v for result %+v", cst, res)
	}
	sum := m.mustSh("cat " + child + "/summary")
	for _, want := range []string{"## Goal", "Review the packages and find dead code", "## Files", "## Critical context"} {
		if !strings.Contains(sum, want) {
			t.Fatalf("summary lacks %q:\n%s", want, sum)
		}
	}
	if first := m.mustSh("grep -c 'CONTEXT COMPACTION: REFERENCE ONLY' " + child + "/messages"); strings.TrimSpace(first) != "1" {
		t.Fatalf("the child holds %s summary messages", first)
	}
	lin := strings.Split(strings.TrimSpace(m.mustSh("cat "+child+"/lineage")), "\n")
	if len(lin) != 2 || !strings.Contains(lin[0], id) || !strings.Contains(lin[1], `"relation":"self"`) || !strings.Contains(lin[1], res.SummaryID) {
		t.Fatalf("lineage:\n%s", strings.Join(lin, "\n"))
	}

	// Compacting the source again is a no-op pointing at the child.
	m.mustSh("echo compact > " + sdir + "/ctl")
	m.jsonFile(sdir+"/result", &res)
	if res.Compacted || res.Reason != compact.ReasonAlreadyCompacted {
		t.Fatalf("second compaction: %+v", res)
	}

	// Below the threshold, force is the same no-op: no new session.
	small := strings.TrimSpace(m.mustSh(`exec 3<>` + dir + `/new; echo >&3; cat <&3`))
	var few strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&few, `{"role":"user","content":"question %d"}`+"\n"+`{"role":"assistant","content":"answer %d"}`+"\n", i, i)
	}
	m.mustSh("cat " + shq(m.writeTmp("few.jsonl", []byte(few.String()))) + " >> " + dir + "/sessions/" + small + "/messages")
	before := m.mustSh("ls " + dir + "/sessions | wc -l")
	m.mustSh("echo force > " + dir + "/sessions/" + small + "/ctl")
	m.jsonFile(dir+"/sessions/"+small+"/result", &res)
	if res.Compacted || res.Reason != compact.ReasonBelowThreshold || res.SavedTokens != 0 || res.OriginalMessages != 20 {
		t.Fatalf("below the threshold: %+v", res)
	}
	if after := m.mustSh("ls " + dir + "/sessions | wc -l"); after != before {
		t.Fatalf("a no-op forked: %s -> %s sessions", before, after)
	}
}

// TestCompactCommandBackendOnMount configures the command summarizer in the
// state directory's compact.json and compacts through the mount.
func TestCompactCommandBackendOnMount(t *testing.T) {
	m := newMount(t, nil, func(cfg *daemon.Config) {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			t.Fatal(err)
		}
		conf := `{"context_window": 4000, "summarizer": {"backend": "command", "timeout_seconds": 30,
			"command": ["/bin/sh", "-c", "n=$(grep -c '^\\[tool result' ); printf '## Goal\\n- summarised %s tool results by command\\n' \"$n\""]}}`
		if err := os.WriteFile(filepath.Join(cfg.StateDir, compact.ConfigFileName), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	const dir = ".rubino/compact"
	if cfg := m.mustSh("cat " + dir + "/config"); !strings.Contains(cfg, `"backend": "command"`) || !strings.Contains(cfg, `"context_window": 4000`) {
		t.Fatalf("config:\n%s", cfg)
	}
	if out, err := m.sh("echo '{}' > " + dir + "/config"); err == nil {
		t.Fatalf("the config is writable from the mount: %s", out)
	}
	id := strings.TrimSpace(m.mustSh(`exec 3<>` + dir + `/new; echo >&3; cat <&3`))
	m.mustSh("cat " + shq(m.writeTmp("t.jsonl", agentTranscript(t, 10))) + " >> " + dir + "/sessions/" + id + "/messages")
	m.mustSh("echo compact > " + dir + "/sessions/" + id + "/ctl")
	var res compact.Result
	m.jsonFile(dir+"/sessions/"+id+"/result", &res)
	if !res.Compacted || res.Summarizer != "command" {
		t.Fatalf("result %+v", res)
	}
	sum := m.mustSh("cat " + dir + "/sessions/" + id + "/summary")
	if !strings.HasPrefix(sum, "## Goal\n- summarised ") || !strings.Contains(sum, "tool results by command") || strings.Contains(sum, "summarised 0 ") {
		t.Fatalf("summary %q", sum)
	}
}

// TestCompactCLI drives `rubinofs compact` against a mount: new, append,
// status, run (by prefix), show, ls and import.
func TestCompactCLI(t *testing.T) {
	m := newMount(t, nil, nil)
	run := func(args ...string) string {
		t.Helper()
		out, err := cli(t, m.tmp, append([]string{"compact"}, args...)...)
		if err != nil {
			t.Fatalf("rubinofs compact %v: %v\n%s", args, err, out)
		}
		return out
	}
	mnt := "--mount=" + m.mnt
	id := strings.TrimSpace(run("new", mnt, "--window", "4000", "--model", "gpt-4"))
	if len(id) != compact.IDLen {
		t.Fatalf("new printed %q", id)
	}
	transcript := agentTranscript(t, 12)
	src := m.writeTmp("t.jsonl", transcript)
	if out := run("append", mnt, id[:6], src); !strings.Contains(out, fmt.Sprintf("appended %d messages", strings.Count(string(transcript), "\n"))) {
		t.Fatalf("append: %s", out)
	}
	bad := m.writeTmp("bad.jsonl", append(append([]byte{}, transcript[:strings.Index(string(transcript), "\n")+1]...), "{broken\n"...))
	out, err := cli(t, m.tmp, "compact", "append", mnt, id, bad)
	if err == nil || !strings.Contains(out, "line 2:") || !strings.Contains(out, "appended 0 messages") {
		t.Fatalf("append of a bad file: %v\n%s", err, out)
	}
	if out := run("status", mnt, id[:8]); !strings.Contains(out, "needs_compaction=true") || !strings.Contains(out, "cl100k_base") {
		t.Fatalf("status:\n%s", out)
	}
	out = run("run", mnt, id[:8])
	if !strings.HasPrefix(out, "compacted "+id[:8]+" -> ") || strings.Contains(out, "saved 0 tokens") {
		t.Fatalf("run:\n%s", out)
	}
	out = run("run", mnt, "--force", id[:8])
	if !strings.HasPrefix(out, "not compacted (already_compacted)") {
		t.Fatalf("second run:\n%s", out)
	}
	ls := run("ls", mnt)
	if strings.Count(ls, "\n") != 3 || !strings.Contains(ls, id[:8]) {
		t.Fatalf("ls:\n%s", ls)
	}
	show := run("show", mnt, id[:8])
	for _, want := range []string{"session:    " + id, "lineage:", "self", "child", "summary:", "## Goal"} {
		if !strings.Contains(show, want) {
			t.Fatalf("show lacks %q:\n%s", want, show)
		}
	}
	if out, err := cli(t, m.tmp, "compact", "run", mnt, "ffffffff"); err == nil || !strings.Contains(out, "no such session") || strings.Contains(out, "compacted") {
		t.Fatalf("run on an unknown id: %v\n%s", err, out)
	}

	// A below-threshold session never reads as a success.
	small := strings.TrimSpace(run("new", mnt))
	few := m.writeTmp("few.jsonl", []byte(strings.Repeat(`{"role":"user","content":"hi"}`+"\n"+`{"role":"assistant","content":"hello"}`+"\n", 5)))
	run("append", mnt, small, few)
	if out := run("run", mnt, "--force", small[:8]); !strings.HasPrefix(out, "not compacted (below_threshold)") {
		t.Fatalf("run below the threshold:\n%s", out)
	}

	// Import a Claude Code session file.
	claude := `{"type":"user","message":{"role":"user","content":"Add a flag"},"uuid":"u1"}
{"type":"assistant","message":{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/r/a.go"}}]},"uuid":"a1"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"package a"}]},"uuid":"u2"}
`
	out = run("import", mnt, m.writeTmp("claude.jsonl", []byte(claude)))
	if !strings.Contains(out, "imported 3 messages (claude format") {
		t.Fatalf("import:\n%s", out)
	}
	imported := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
	if got := run("show", mnt, "--messages", imported); strings.Count(got, "\n") != 3 || !strings.Contains(got, `"tool_call_id":"t1"`) {
		t.Fatalf("imported transcript:\n%s", got)
	}
}

// TestCompactCompactedSessionIsNoOpOnMount compacts a session through
// .rubino/compact, then compacts its child, which still needs compaction
// by its token count but whose middle is only the previous summary: the
// same summary would replace it. The second request (and a forced one)
// is a no-op that says why in the result, the status and the CLI output,
// and forks no session: lineage has no new child.
func TestCompactCompactedSessionIsNoOpOnMount(t *testing.T) {
	m := newMount(t, nil, func(cfg *daemon.Config) {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			t.Fatal(err)
		}
		// A fixed summary, whatever the input: re-summarising a summary
		// gives the same text, as an idempotent model would.
		conf := `{"context_window": 4000, "minimum_messages": 5, "summarizer": {"backend": "command", "timeout_seconds": 30,
			"command": ["/bin/sh", "-c", "cat >/dev/null; printf '## Goal\\n'; i=0; while [ $i -lt 100 ]; do printf -- '- decision %s: keep the parser strict\\n' $i; i=$((i+1)); done"]}}`
		if err := os.WriteFile(filepath.Join(cfg.StateDir, compact.ConfigFileName), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	const dir = ".rubino/compact"
	id := strings.TrimSpace(m.mustSh(`exec 3<>` + dir + `/new; echo >&3; cat <&3`))
	m.mustSh("cat " + shq(m.writeTmp("t.jsonl", agentTranscript(t, 10))) + " >> " + dir + "/sessions/" + id + "/messages")
	m.mustSh("echo compact > " + dir + "/sessions/" + id + "/ctl")
	var first compact.Result
	m.jsonFile(dir+"/sessions/"+id+"/result", &first)
	if !first.Compacted || first.SavedTokens != first.OriginalTokens-first.CompactedTokens || first.RemovedTokens <= first.SavedTokens {
		t.Fatalf("first compaction %+v: want saved = before - after, below the middle removed", first)
	}
	child := dir + "/sessions/" + first.TargetSessionID
	var st compact.Status
	m.jsonFile(child+"/status", &st)
	if !st.NeedsCompaction || st.Tokens != first.CompactedTokens {
		t.Fatalf("the child must still need compaction for this test: %+v", st)
	}
	lineage := m.mustSh("cat " + child + "/lineage")
	sessions := m.mustSh("ls " + dir + "/sessions")

	want := fmt.Sprintf("no-op: compaction would not shrink the session (before %d, after %d tokens)", st.Tokens, st.Tokens)
	noop := func(how string, forced bool) {
		t.Helper()
		var res compact.Result
		m.jsonFile(child+"/result", &res)
		if res.Compacted || res.Reason != compact.ReasonWouldNotShrink || res.Forced != forced || res.TargetSessionID != "" ||
			res.SavedTokens != 0 || !strings.HasPrefix(res.Detail, want) {
			t.Fatalf("%s of the compacted session: %+v; want the detail %q", how, res, want)
		}
		if got := m.mustSh("cat " + child + "/lineage"); got != lineage {
			t.Fatalf("%s changed the lineage:\n%s\nwas:\n%s", how, got, lineage)
		}
		if got := m.mustSh("ls " + dir + "/sessions"); got != sessions {
			t.Fatalf("%s forked a session:\n%s\nwas:\n%s", how, got, sessions)
		}
	}
	m.mustSh("echo compact > " + child + "/ctl")
	noop("compact", false)
	m.jsonFile(child+"/status", &st)
	if st.NeedsCompaction || st.Reason != compact.ReasonWouldNotShrink || !strings.HasPrefix(st.Detail, want) || st.Thrashing {
		t.Fatalf("status after the no-op: %+v", st)
	}
	out, err := cli(t, m.tmp, "compact", "run", "--mount="+m.mnt, first.TargetSessionID[:8])
	if err != nil || !strings.HasPrefix(out, "not compacted (would_not_shrink)") || !strings.Contains(out, want) {
		t.Fatalf("rubinofs compact run: %v\n%s", err, out)
	}
	noop("rubinofs compact run", false)
	m.mustSh("echo force > " + child + "/ctl")
	noop("force", true)

	// Two ineffective runs in a row: the automatic path now backs off.
	m.jsonFile(child+"/status", &st)
	if !st.Thrashing {
		t.Fatalf("status after two ineffective runs: %+v; want thrashing", st)
	}
	m.mustSh("echo compact > " + child + "/ctl")
	var res compact.Result
	m.jsonFile(child+"/result", &res)
	if res.Compacted || res.Reason != compact.ReasonThrashing {
		t.Fatalf("compact while thrashing: %+v", res)
	}
}
