package compact

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Import formats accepted by ImportTranscript.
const (
	FormatAuto   = ""
	FormatClaude = "claude" // Claude Code session files (~/.claude/projects/*/*.jsonl)
	FormatCodex  = "codex"  // Codex CLI rollout files (~/.codex/sessions/**/rollout-*.jsonl)
	FormatOpenAI = "openai" // JSON lines already in OpenAI chat-message form
)

// maxImportLine bounds one line of an imported file (16 MiB).
const maxImportLine = 16 << 20

// Imported is a converted transcript.
type Imported struct {
	Format   string
	Model    string // the model the file names, if any
	Messages []Message
	// Skipped counts lines that carry no conversation (metadata, reasoning,
	// snapshots, sidechains).
	Skipped int
}

// ImportTranscript converts a session file to OpenAI chat messages. format
// is FormatAuto (detected from the first lines), FormatClaude, FormatCodex
// or FormatOpenAI. Claude Code: user/assistant lines of the main chain;
// text, tool_use (-> tool_calls, input as JSON arguments) and tool_result
// blocks (-> tool messages); streamed assistant lines of one message id are
// merged; thinking blocks are dropped. Codex: response_item payloads
// (message, function_call, custom_tool_call, local_shell_call and their
// outputs); reasoning is dropped. Errors name the line. Every message is
// validated as ParseMessage would; Tokens are not set.
func ImportTranscript(r io.Reader, format string) (Imported, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		return Imported{}, fmt.Errorf("line %d: %w", len(lines)+1, err)
	}
	if format == FormatAuto {
		format = detectFormat(lines)
	}
	var im Imported
	var err error
	switch format {
	case FormatClaude:
		im, err = importClaude(lines)
	case FormatCodex:
		im, err = importCodex(lines)
	case FormatOpenAI:
		im, err = importOpenAI(lines)
	default:
		return Imported{}, fmt.Errorf("unknown format %q (want claude, codex or openai)", format)
	}
	if err != nil {
		return Imported{}, err
	}
	im.Format = format
	// Validate through the same parser the control file uses.
	for i := range im.Messages {
		b, err := json.Marshal(im.Messages[i])
		if err != nil {
			return Imported{}, err
		}
		if _, err := ParseMessage(b); err != nil {
			return Imported{}, fmt.Errorf("converted message %d: %v", i+1, err)
		}
	}
	return im, nil
}

func detectFormat(lines [][]byte) string {
	for i, l := range lines {
		if i == 50 {
			break
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(l, &probe) != nil {
			continue
		}
		var typ string
		json.Unmarshal(probe["type"], &typ)
		if _, ok := probe["payload"]; ok || typ == "session_meta" || typ == "response_item" {
			return FormatCodex
		}
		if _, ok := probe["message"]; ok && (typ == "user" || typ == "assistant") {
			return FormatClaude
		}
		if _, ok := probe["role"]; ok {
			if typ == "message" {
				return FormatCodex // the older Codex format: bare items
			}
			return FormatOpenAI
		}
	}
	return FormatOpenAI
}

func importOpenAI(lines [][]byte) (Imported, error) {
	var im Imported
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		m, err := ParseMessage(l)
		if err != nil {
			return Imported{}, fmt.Errorf("line %d: %v", i+1, err)
		}
		im.Messages = append(im.Messages, m)
	}
	return im, nil
}

// claudeBlock is one content block of a Claude message.
type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// claudeText returns the text of a content value: a string, or the text of
// its text blocks.
func claudeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []claudeBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func importClaude(lines [][]byte) (Imported, error) {
	var im Imported
	var lastAssistantID string
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var rec struct {
			Type        string `json:"type"`
			IsSidechain bool   `json:"isSidechain"`
			IsMeta      bool   `json:"isMeta"`
			Message     *struct {
				ID      string          `json:"id"`
				Role    string          `json:"role"`
				Model   string          `json:"model"`
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal(l, &rec); err != nil {
			return Imported{}, fmt.Errorf("line %d: invalid JSON: %v", i+1, err)
		}
		if rec.Message == nil || rec.IsSidechain || rec.IsMeta || (rec.Type != "user" && rec.Type != "assistant") {
			im.Skipped++
			continue
		}
		msg := rec.Message
		if msg.Model != "" && msg.Model != "<synthetic>" {
			im.Model = msg.Model
		}
		var blocks []claudeBlock
		var text string
		if json.Unmarshal(msg.Content, &text) != nil {
			if err := json.Unmarshal(msg.Content, &blocks); err != nil {
				return Imported{}, fmt.Errorf("line %d: message.content: %v", i+1, err)
			}
		}
		switch rec.Type {
		case "assistant":
			var texts []string
			var calls []ToolCall
			if text != "" {
				texts = append(texts, text)
			}
			for _, b := range blocks {
				switch b.Type {
				case "text":
					if b.Text != "" {
						texts = append(texts, b.Text)
					}
				case "tool_use":
					args := string(b.Input)
					if args == "" {
						args = "{}"
					}
					calls = append(calls, ToolCall{ID: b.ID, Type: "function", Function: FunctionCall{Name: b.Name, Arguments: args}})
				}
			}
			if len(texts) == 0 && len(calls) == 0 {
				im.Skipped++
				continue
			}
			n := len(im.Messages)
			// Claude Code writes one line per content block of a streamed
			// message: merge lines of the same message id.
			if msg.ID != "" && msg.ID == lastAssistantID && n > 0 && im.Messages[n-1].Role == RoleAssistant {
				last := &im.Messages[n-1]
				if len(texts) > 0 {
					last.Content = strings.TrimPrefix(last.Content+"\n"+strings.Join(texts, "\n"), "\n")
				}
				last.ToolCalls = append(last.ToolCalls, calls...)
				continue
			}
			im.Messages = append(im.Messages, Message{Role: RoleAssistant, Content: strings.Join(texts, "\n"), ToolCalls: calls})
			lastAssistantID = msg.ID
		case "user":
			lastAssistantID = ""
			if text != "" {
				im.Messages = append(im.Messages, Message{Role: RoleUser, Content: text})
				continue
			}
			var texts []string
			for _, b := range blocks {
				switch b.Type {
				case "tool_result":
					c := claudeText(b.Content)
					if b.IsError && !strings.HasPrefix(c, "Error") {
						c = "Error: " + c
					}
					im.Messages = append(im.Messages, Message{Role: RoleTool, ToolCallID: b.ToolUseID, Content: c})
				case "text":
					if b.Text != "" {
						texts = append(texts, b.Text)
					}
				}
			}
			if len(texts) > 0 {
				im.Messages = append(im.Messages, Message{Role: RoleUser, Content: strings.Join(texts, "\n")})
			}
		}
	}
	return im, nil
}

func importCodex(lines [][]byte) (Imported, error) {
	var im Imported
	// lastCalls is true while the last message is an assistant message that
	// may take more function calls (no output or other message since).
	lastCalls := false
	addCall := func(tc ToolCall) {
		n := len(im.Messages)
		if lastCalls && n > 0 && im.Messages[n-1].Role == RoleAssistant {
			im.Messages[n-1].ToolCalls = append(im.Messages[n-1].ToolCalls, tc)
			return
		}
		im.Messages = append(im.Messages, Message{Role: RoleAssistant, ToolCalls: []ToolCall{tc}})
		lastCalls = true
	}
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(l, &rec); err != nil {
			return Imported{}, fmt.Errorf("line %d: invalid JSON: %v", i+1, err)
		}
		var typ string
		json.Unmarshal(rec["type"], &typ)
		item := rec
		if p, ok := rec["payload"]; ok {
			var payload map[string]json.RawMessage
			if err := json.Unmarshal(p, &payload); err != nil {
				im.Skipped++
				continue
			}
			if typ == "session_meta" || typ == "turn_context" {
				var meta struct {
					Model string `json:"model"`
				}
				json.Unmarshal(p, &meta)
				if meta.Model != "" {
					im.Model = meta.Model
				}
				im.Skipped++
				continue
			}
			if typ != "response_item" {
				im.Skipped++
				continue
			}
			item = payload
			json.Unmarshal(item["type"], &typ)
		}
		str := func(k string) string {
			var s string
			json.Unmarshal(item[k], &s)
			if s == "" && k == "call_id" { // older files name it "id"
				json.Unmarshal(item["id"], &s)
			}
			return s
		}
		switch typ {
		case "message":
			role := str("role")
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			json.Unmarshal(item["content"], &parts)
			var texts []string
			for _, p := range parts {
				if p.Text != "" {
					texts = append(texts, p.Text)
				}
			}
			switch role {
			case "user", "assistant", "system", "developer":
			default:
				im.Skipped++
				continue
			}
			im.Messages = append(im.Messages, Message{Role: role, Content: strings.Join(texts, "\n")})
			lastCalls = role == RoleAssistant
		case "function_call":
			addCall(ToolCall{ID: str("call_id"), Type: "function", Function: FunctionCall{Name: str("name"), Arguments: str("arguments")}})
		case "custom_tool_call":
			args, _ := json.Marshal(map[string]string{"input": str("input")})
			addCall(ToolCall{ID: str("call_id"), Type: "function", Function: FunctionCall{Name: str("name"), Arguments: string(args)}})
		case "local_shell_call":
			args := string(item["action"])
			if args == "" {
				args = "{}"
			}
			addCall(ToolCall{ID: str("call_id"), Type: "function", Function: FunctionCall{Name: "local_shell", Arguments: args}})
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			out := str("output")
			if out == "" && len(item["output"]) > 0 {
				var o struct {
					Content string `json:"content"`
				}
				if json.Unmarshal(item["output"], &o) == nil {
					out = o.Content
				}
			}
			im.Messages = append(im.Messages, Message{Role: RoleTool, ToolCallID: str("call_id"), Content: out})
			lastCalls = false
		default:
			im.Skipped++
		}
	}
	if len(im.Messages) == 0 && len(lines) > 0 {
		return im, errors.New("no conversation found in the file")
	}
	return im, nil
}
