package compact

// Fuzz targets for every parser of control-file input in this package: the
// JSON lines appended to sessions/ID/messages (ParseMessage,
// ParseMessageLines), the options written to new (ParseSessionOptions), the
// commands written to sessions/ID/ctl (ParseCtlCommand) and the session
// files `rubinofs compact import` converts (ImportTranscript). Seeds are
// committed under testdata/fuzz/; search further with, e.g.:
//
//	go test -run='^$' -fuzz='^FuzzParseMessage$' -fuzztime=25s ./compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
)

var messageSeeds = []string{
	`{"role":"user","content":"hi"}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]}`,
	`{"role":"tool","tool_call_id":"c1","content":"out"}`,
	`{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}`,
	`{"role":"system","content":"s","name":"n"}`,
	`{"role":"tool","content":"no id"}`,
	`{"role":"user","tool_calls":[{"id":"x","function":{"name":"f"}}]}`,
	`{"role":"assistant","tool_calls":[{"id":"x","function":{"name":"f"}},{"id":"x","function":{"name":"g"}}]}`,
	`{"role":"wizard"}`, `{}`, `[]`, `{"role":"user"} {}`, `{"role":"user","content":"\ud800"}`,
	"{\"role\":\"user\",\"content\":\"\xff\"}", `{"role":"user","content":[{"text":"no type"}]}`,
	`{"role":"user","content":5}`, "", "not json",
}

// FuzzParseMessage: a parsed message is valid (role, tool calls, ids,
// UTF-8, bounded content) and its rendering is a fixed point: parsing what
// MarshalJSON renders gives a message that renders the same.
func FuzzParseMessage(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMessage(b)
		if err != nil {
			if err.Error() == "" || !utf8.ValidString(err.Error()) {
				t.Fatalf("unreadable reason %q", err.Error())
			}
			return
		}
		checkMessage(t, m)
		j, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("marshal %+v: %v", m, err)
		}
		m2, err := ParseMessage(j)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", j, err)
		}
		j2, _ := json.Marshal(m2)
		if !bytes.Equal(j, j2) || m2.Content != m.Content {
			t.Fatalf("not a fixed point:\n%s\n%s", j, j2)
		}
	})
}

// checkMessage asserts what ParseMessage promises of an accepted message.
func checkMessage(t *testing.T, m Message) {
	t.Helper()
	switch m.Role {
	case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
	default:
		t.Fatalf("role %q", m.Role)
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant || len(m.ToolCalls) > MaxToolCalls {
		t.Fatalf("%d tool calls on a %s message", len(m.ToolCalls), m.Role)
	}
	if (m.Role == RoleTool) != (m.ToolCallID != "") {
		t.Fatalf("tool_call_id %q on a %s message", m.ToolCallID, m.Role)
	}
	if len(m.Content) > MaxContentBytes || !utf8.ValidString(m.Content) || len(m.Name) > maxNameBytes {
		t.Fatalf("content of %d bytes / name %q", len(m.Content), m.Name)
	}
	for _, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" || tc.Type == "" {
			t.Fatalf("tool call %+v", tc)
		}
	}
}

// FuzzParseMessageLines: a batch is all or nothing; an error names the
// 1-based line; an accepted batch has one message per non-blank line, each
// with a token count.
func FuzzParseMessageLines(f *testing.F) {
	f.Add([]byte(strings.Join(messageSeeds[:3], "\n") + "\n"))
	f.Add([]byte("\n\n" + messageSeeds[0] + "\n   \n" + messageSeeds[2]))
	f.Add([]byte(messageSeeds[0] + "\n" + messageSeeds[8] + "\n"))
	f.Add([]byte("\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := ParseMessageLines(b, chars4Tokenizer{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") || !utf8.ValidString(err.Error()) {
				t.Fatalf("error %q does not name the line", err)
			}
			return
		}
		lines := 0
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if len(msgs) != lines {
			t.Fatalf("%d messages from %d lines", len(msgs), lines)
		}
		for _, m := range msgs {
			checkMessage(t, m)
			if m.Tokens <= 0 {
				t.Fatalf("message without tokens: %+v", m)
			}
		}
	})
}

// FuzzParseSessionOptions: accepted options validate and round-trip
// through JSON; refused ones carry a reason.
func FuzzParseSessionOptions(f *testing.F) {
	for _, s := range []string{
		"", "  \n", `{"model":"gpt-4o","context_window":128000}`, `{"tokenizer":"chars4"}`, `{"tokenizer":"../../etc/passwd"}`,
		`{"context_window":5}`, `{"title":"a\nb"}`, `{"bogus":1}`, `{} {}`, `{`, `{"model":"` + strings.Repeat("m", 300) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseSessionOptions(b)
		if err != nil {
			if err.Error() == "" || !utf8.ValidString(err.Error()) {
				t.Fatalf("reason %q", err)
			}
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("accepted invalid %+v: %v", o, err)
		}
		j, _ := json.Marshal(o)
		if o2, err := ParseSessionOptions(j); err != nil || o2 != o {
			t.Fatalf("round trip %s: %+v %v", j, o2, err)
		}
	})
}

// FuzzParseCtlCommand: only compact and force are accepted; anything else
// is EINVAL or EFBIG with a reason, never EIO.
func FuzzParseCtlCommand(f *testing.F) {
	for _, s := range []string{"compact", "force\n", " compact ", "Compact", "", "compact force", "\x00", strings.Repeat("x", 100)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		force, err := ParseCtlCommand(b)
		if err != nil {
			var ce *ctltree.Error
			if !errors.As(err, &ce) || (ce.Errno != syscall.EINVAL && ce.Errno != syscall.EFBIG) || !utf8.ValidString(ce.Msg) || len(ce.Msg) > 300 { // a 40-byte clip, quoted: at most 4 bytes per byte
				t.Fatalf("error %v", err)
			}
			return
		}
		if want := map[bool]string{false: "compact", true: "force"}[force]; strings.TrimSpace(string(b)) != want {
			t.Fatalf("%q parsed as force=%v", b, force)
		}
	})
}

// FuzzImportTranscript: whatever the file, the importer never panics, every
// message it returns is valid (as the messages file would accept it), the
// output is bounded by the input, and an error names where it failed.
func FuzzImportTranscript(f *testing.F) {
	formats := []string{FormatAuto, FormatClaude, FormatCodex, FormatOpenAI, "bogus"}
	for _, s := range []string{claudeSample, strings.Join(messageSeeds[:3], "\n"),
		`{"type":"session_meta","payload":{"model":"gpt-5"}}` + "\n" + `{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}`,
		`{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}}` + "\n" + `{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":{"content":"x"}}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}],"is_error":true}]}}`,
		"", "\n\n", "{", `{"type":"assistant","message":{"id":"a","content":[]}}`,
	} {
		for i := range formats {
			f.Add([]byte(s), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, format uint8) {
		im, err := ImportTranscript(bytes.NewReader(b), formats[int(format)%len(formats)])
		if err != nil {
			if msg := err.Error(); msg == "" || !utf8.ValidString(msg) && !strings.HasPrefix(msg, "line ") {
				t.Fatalf("reason %q", msg)
			}
			return
		}
		if len(im.Messages) > len(b) || im.Skipped > bytes.Count(b, []byte("\n"))+1 {
			t.Fatalf("%d messages, %d skipped from %d bytes", len(im.Messages), im.Skipped, len(b))
		}
		for _, m := range im.Messages {
			j, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := ParseMessage(j)
			if err != nil {
				t.Fatalf("imported message the messages file refuses: %s: %v", j, err)
			}
			checkMessage(t, m2)
		}
	})
}
