package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on one message, in bytes. A message over a limit is refused as
// malformed (EINVAL through the control files).
const (
	// MaxContentBytes bounds a message's content (text or raw parts JSON).
	// It equals the control tree's write limit, so any message that fits
	// one write(2) fits here.
	MaxContentBytes = 1 << 20
	// MaxToolCalls bounds the tool calls of one assistant message.
	MaxToolCalls = 256
	// maxNameBytes bounds names, roles, tool-call ids and model names.
	maxNameBytes = 256
)

// Roles accepted in a transcript, as the OpenAI chat-completions API names
// them.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// KindSummary marks the message a compaction inserts between head and tail
// (Message.Kind). It is never a "real user message" for the tail rule, and
// summarizers skip it because its content reaches them as the previous
// summary instead.
const KindSummary = "summary"

// ToolCall is one tool invocation of an assistant message, in OpenAI form:
// {"id":"call_1","type":"function","function":{"name":"bash","arguments":"{...}"}}.
// Arguments is the JSON-encoded argument object as a string, as the API
// sends it.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a ToolCall.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one chat message in the OpenAI chat-completions form, plus the
// store's bookkeeping. It is a plain value, safe to copy; nothing in it is
// shared.
//
// Content holds the text: the content string, or the concatenated "text"
// parts of an array content. RawContent, when non-nil, is the content as it
// arrived when it was not a plain string (an array of parts, or null); it is
// what the transcript gives back, so a message reads back as it was written.
type Message struct {
	Role       string
	Content    string
	RawContent json.RawMessage
	Name       string
	ToolCalls  []ToolCall
	ToolCallID string

	// Seq is the message's position in its session, from 1 (0 before it is
	// stored).
	Seq int64
	// Tokens is the message's token count (content, tool calls and the
	// per-message overhead; see MessageTokens), set when it is stored.
	Tokens int
	// Kind is "" for an ordinary message and KindSummary for a compaction
	// summary.
	Kind string
}

// wireMessage is the JSON shape of a Message.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// MarshalJSON renders the message in OpenAI chat form. Content is the raw
// content when there is one, else the text as a JSON string.
// HTML characters are not escaped.
func (m Message) MarshalJSON() ([]byte, error) {
	w := wireMessage{Role: m.Role, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	if m.RawContent != nil {
		w.Content = m.RawContent
	} else {
		b, err := marshalNoEscape(m.Content)
		if err != nil {
			return nil, err
		}
		w.Content = b
	}
	return marshalNoEscape(w)
}

// marshalNoEscape is json.Marshal without HTML escaping.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON parses and validates one message (see ParseMessage).
func (m *Message) UnmarshalJSON(b []byte) error {
	msg, err := ParseMessage(b)
	if err != nil {
		return err
	}
	*m = msg
	return nil
}

// ParseMessage parses one JSON object in OpenAI chat-message form and
// validates it:
//   - role is one of system, developer, user, assistant, tool;
//   - content is a string, null, or an array of parts (objects with a
//     "type"; the text of "text" parts becomes Content);
//   - tool_calls appear only on assistant messages, at most MaxToolCalls,
//     each with a unique non-empty id and a function name; arguments is a
//     string;
//   - a tool message has a tool_call_id and no tool_calls;
//   - content is at most MaxContentBytes, and all text is valid UTF-8.
//
// Fields outside that form are ignored. The error describes the first
// problem found; callers of the control files see it as EINVAL with the
// line number. It never panics, whatever the input.
func ParseMessage(b []byte) (Message, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return Message{}, errors.New("not a JSON object")
	}
	var w wireMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return Message{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return Message{}, errors.New("invalid JSON: trailing data after the object")
	}
	m := Message{Role: w.Role, Name: w.Name, ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID}
	switch m.Role {
	case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
	case "":
		return Message{}, errors.New(`missing "role"`)
	default:
		return Message{}, fmt.Errorf("unknown role %q (want system, developer, user, assistant or tool)", clip(m.Role, 40))
	}
	if len(w.Content) > MaxContentBytes {
		return Message{}, fmt.Errorf("content of %d bytes exceeds the limit of %d", len(w.Content), MaxContentBytes)
	}
	text, raw, err := parseContent(w.Content)
	if err != nil {
		return Message{}, err
	}
	m.Content, m.RawContent = text, raw
	if len(m.Name) > maxNameBytes || !utf8.ValidString(m.Name) {
		return Message{}, errors.New(`"name" is too long or not UTF-8`)
	}
	if len(m.ToolCallID) > maxNameBytes || !utf8.ValidString(m.ToolCallID) {
		return Message{}, errors.New(`"tool_call_id" is too long or not UTF-8`)
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return Message{}, fmt.Errorf(`"tool_calls" on a %s message (only assistant messages call tools)`, m.Role)
	}
	if len(m.ToolCalls) > MaxToolCalls {
		return Message{}, fmt.Errorf("%d tool calls exceed the limit of %d", len(m.ToolCalls), MaxToolCalls)
	}
	seen := make(map[string]bool, len(m.ToolCalls))
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		if tc.ID == "" {
			return Message{}, fmt.Errorf("tool_calls[%d] has no id", i)
		}
		if seen[tc.ID] {
			return Message{}, fmt.Errorf("tool_calls[%d]: duplicate id %q", i, clip(tc.ID, 40))
		}
		seen[tc.ID] = true
		if tc.Function.Name == "" {
			return Message{}, fmt.Errorf("tool_calls[%d] has no function name", i)
		}
		if tc.Type == "" {
			tc.Type = "function"
		}
		if len(tc.ID) > maxNameBytes || len(tc.Function.Name) > maxNameBytes || len(tc.Type) > maxNameBytes {
			return Message{}, fmt.Errorf("tool_calls[%d]: id, type or name too long", i)
		}
		if !utf8.ValidString(tc.ID) || !utf8.ValidString(tc.Function.Name) || !utf8.ValidString(tc.Function.Arguments) {
			return Message{}, fmt.Errorf("tool_calls[%d]: not UTF-8", i)
		}
	}
	if m.Role == RoleTool {
		if m.ToolCallID == "" {
			return Message{}, errors.New(`a tool message needs "tool_call_id"`)
		}
	} else if m.ToolCallID != "" {
		return Message{}, fmt.Errorf(`"tool_call_id" on a %s message (only tool messages answer calls)`, m.Role)
	}
	return m, nil
}

// parseContent returns the text of a content value and, when it is not a
// plain string, its raw JSON.
func parseContent(raw json.RawMessage) (string, json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", nil, nil // absent: same as ""
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, fmt.Errorf("content: %v", err)
		}
		if !utf8.ValidString(s) {
			return "", nil, errors.New("content is not valid UTF-8")
		}
		return s, nil, nil
	case 'n':
		return "", json.RawMessage("null"), nil
	case '[':
		var parts []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", nil, fmt.Errorf("content: want a string, null or an array of parts: %v", err)
		}
		var texts []string
		for i, p := range parts {
			var typ string
			if err := json.Unmarshal(p["type"], &typ); err != nil || typ == "" {
				return "", nil, fmt.Errorf("content[%d] has no \"type\"", i)
			}
			if t, ok := p["text"]; ok {
				var s string
				if err := json.Unmarshal(t, &s); err != nil {
					return "", nil, fmt.Errorf("content[%d].text: want a string", i)
				}
				texts = append(texts, s)
			}
		}
		text := strings.Join(texts, "\n")
		if !utf8.ValidString(text) {
			return "", nil, errors.New("content is not valid UTF-8")
		}
		return text, append(json.RawMessage(nil), raw...), nil
	default:
		return "", nil, errors.New("content: want a string, null or an array of parts")
	}
}

// toolCallsJSON renders tool calls for the store ("" when there are none).
func toolCallsJSON(tcs []ToolCall) (string, error) {
	if len(tcs) == 0 {
		return "", nil
	}
	b, err := json.Marshal(tcs)
	return string(b), err
}

// realUser reports whether m is a message the user wrote (not a compaction
// summary).
func (m *Message) realUser() bool { return m.Role == RoleUser && m.Kind != KindSummary }

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ParseMessageLines parses a batch of JSON lines (blank lines are skipped)
// and counts their tokens with tk. The first malformed line fails the whole
// batch with an error naming its 1-based line number.
func ParseMessageLines(data []byte, tk Tokenizer) ([]Message, error) {
	var msgs []Message
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := ParseMessage(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		m.Tokens = MessageTokens(tk, &m)
		msgs = append(msgs, m)
	}
	return msgs, nil
}
