package compact

import (
	"strings"
	"testing"
)

// claudeSample is a Claude Code session file in its on-disk shape: a
// summary line, user and assistant lines with content blocks, an assistant
// message streamed over two lines (same message id), a tool result, a
// sidechain line and a snapshot.
const claudeSample = `{"type":"summary","summary":"Fix status","leafUuid":"x"}
{"type":"file-history-snapshot","messageId":"m0","snapshot":{}}
{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"Add a --json flag to status"},"uuid":"u1","timestamp":"2025-01-01T00:00:00Z"}
{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"hmm","signature":"s"}]},"uuid":"a0"}
{"parentUuid":"a0","isSidechain":false,"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Let me read it."}]},"uuid":"a1"}
{"parentUuid":"a1","isSidechain":false,"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/repo/status.go"}}]},"uuid":"a2"}
{"parentUuid":"a2","isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"package main\n"}]},"uuid":"u2"}
{"parentUuid":"u2","isSidechain":true,"type":"user","message":{"role":"user","content":"sidechain prompt"},"uuid":"s1"}
{"parentUuid":"u2","isSidechain":false,"type":"assistant","message":{"id":"msg_2","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"go test ./..."}}]},"uuid":"a3"}
{"parentUuid":"a3","isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"FAIL"}],"is_error":true},{"type":"text","text":"fix it"}]},"uuid":"u3"}
`

// codexSample is a Codex CLI rollout file.
const codexSample = `{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s","cwd":"/repo","originator":"codex_cli_rs"}}
{"timestamp":"2025-01-01T00:00:00Z","type":"turn_context","payload":{"cwd":"/repo","model":"gpt-5-codex"}}
{"timestamp":"2025-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Add a --json flag"}]}}
{"timestamp":"2025-01-01T00:00:02Z","type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"x"}}
{"timestamp":"2025-01-01T00:00:03Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"cat\",\"status.go\"]}","call_id":"call_1"}}
{"timestamp":"2025-01-01T00:00:03Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_2"}}
{"timestamp":"2025-01-01T00:00:04Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"package main\"}"}}
{"timestamp":"2025-01-01T00:00:04Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_2","output":"status.go"}}
{"timestamp":"2025-01-01T00:00:05Z","type":"event_msg","payload":{"type":"token_count"}}
{"timestamp":"2025-01-01T00:00:06Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}}
`

func summarize(msgs []Message) string {
	var parts []string
	for _, m := range msgs {
		s := m.Role
		if m.Content != "" {
			s += ":" + m.Content
		}
		for _, tc := range m.ToolCalls {
			s += " call(" + tc.ID + " " + tc.Function.Name + " " + tc.Function.Arguments + ")"
		}
		if m.ToolCallID != "" {
			s += " for " + m.ToolCallID
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n")
}

func TestImportClaude(t *testing.T) {
	im, err := ImportTranscript(strings.NewReader(claudeSample), FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	want := `user:Add a --json flag to status
assistant:Let me read it. call(toolu_1 Read {"file_path":"/repo/status.go"})
tool:package main
 for toolu_1
assistant call(toolu_2 Bash {"command":"go test ./..."})
tool:Error: FAIL for toolu_2
user:fix it`
	if im.Format != FormatClaude || im.Model != "claude-sonnet-4-5" || summarize(im.Messages) != want {
		t.Fatalf("format %s model %s:\n%s\nwant\n%s", im.Format, im.Model, summarize(im.Messages), want)
	}
}

func TestImportCodex(t *testing.T) {
	im, err := ImportTranscript(strings.NewReader(codexSample), FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	want := `user:Add a --json flag
assistant call(call_1 shell {"command":["cat","status.go"]}) call(call_2 shell {"command":["ls"]})
tool:{"output":"package main"} for call_1
tool:status.go for call_2
assistant:Done.`
	if im.Format != FormatCodex || im.Model != "gpt-5-codex" || summarize(im.Messages) != want {
		t.Fatalf("format %s model %s:\n%s\nwant\n%s", im.Format, im.Model, summarize(im.Messages), want)
	}
}

func TestImportErrors(t *testing.T) {
	if _, err := ImportTranscript(strings.NewReader(`{"role":"user","content":"x"}`+"\nnope\n"), FormatAuto); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("openai format with a bad line: %v", err)
	}
	if _, err := ImportTranscript(strings.NewReader(claudeSample), "yaml"); err == nil {
		t.Fatal("unknown format accepted")
	}
	im, err := ImportTranscript(strings.NewReader(`{"role":"user","content":"x"}`+"\n"), FormatAuto)
	if err != nil || im.Format != FormatOpenAI || len(im.Messages) != 1 {
		t.Fatalf("openai format: %+v, %v", im, err)
	}
}
