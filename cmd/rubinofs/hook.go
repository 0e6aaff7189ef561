package main

// `rubinofs hook claude-code`: Claude Code's command hook for a rubinofs
// mount. Claude Code runs it on PreToolUse, PostToolUse,
// PostToolUseFailure and UserPromptSubmit with one JSON event on stdin
// (docs/agents.md). At a prompt it checkpoints the session's change
// journal (hookprompt.go). Around tool calls it tells the guard what the
// model read (a whole-file Read) through .rubino/self/ctl, and tells the model why a write was refused during a
// tool call, as the event's additionalContext. It runs as a descendant of
// the agent, so it resolves to the agent's session; it never opens a
// workspace file itself (a read by it would count as the model's).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/guard"
)

// maxHookEvent bounds the event read from stdin, in bytes: a Read of a
// large file carries its whole content. A longer event is cut, fails to
// parse and the hook does nothing.
const maxHookEvent = 256 << 20

// hookEvent is the part of a Claude Code hook event the hook uses; the
// field names are Claude Code's.
type hookEvent struct {
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"` // PreToolUse, PostToolUse, PostToolUseFailure, UserPromptSubmit
	Prompt        string          `json:"prompt"`          // UserPromptSubmit only
	ToolName      string          `json:"tool_name"`
	ToolUseID     string          `json:"tool_use_id"`
	Cwd           string          `json:"cwd"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolResponse  json.RawMessage `json:"tool_response"` // PostToolUse only
}

// parseHookEvent decodes one event from r (at most maxHookEvent bytes).
func parseHookEvent(r io.Reader) (*hookEvent, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxHookEvent))
	if err != nil {
		return nil, err
	}
	var ev hookEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, fmt.Errorf("the event on stdin is not JSON: %w", err)
	}
	if ev.HookEventName == "" {
		return nil, errors.New("the event on stdin has no hook_event_name")
	}
	return &ev, nil
}

// readOutcome is what a Read tool call showed the model, from its
// PostToolUse event.
type readOutcome struct {
	Path    string // the file, absolute, as the tool was given it
	Content string // the text the model was shown (whole when Whole)
	// Whole is true when the model was shown every line of a text file:
	// no offset/limit cut, no truncation, no "unchanged since last read"
	// stub, no image or notebook rendering. Only then may the hook
	// declare the content as read.
	Whole bool
}

// readOf returns what a successful Read call showed the model; ok is
// false for any other event or a response it does not recognise.
// Claude Code reports a text read as {"type":"text","file":{"filePath",
// "content","numLines","startLine","totalLines"}}, the content without
// line numbers, CRLF line ends as LF and without a byte-order mark.
func (ev *hookEvent) readOf() (readOutcome, bool) {
	if ev.HookEventName != "PostToolUse" || ev.ToolName != "Read" {
		return readOutcome{}, false
	}
	var in struct {
		FilePath string `json:"file_path"`
	}
	var resp struct {
		Type string `json:"type"`
		File *struct {
			FilePath   string  `json:"filePath"`
			Content    *string `json:"content"`
			NumLines   int     `json:"numLines"`
			StartLine  int     `json:"startLine"`
			TotalLines int     `json:"totalLines"`
		} `json:"file"`
	}
	if json.Unmarshal(ev.ToolInput, &in) != nil || json.Unmarshal(ev.ToolResponse, &resp) != nil {
		return readOutcome{}, false
	}
	out := readOutcome{Path: in.FilePath}
	if resp.File != nil && resp.File.FilePath != "" {
		out.Path = resp.File.FilePath
	}
	if out.Path == "" {
		return readOutcome{}, false
	}
	if resp.Type != "text" || resp.File == nil || resp.File.Content == nil {
		return out, true // a stub, an image, a notebook: not the file's bytes
	}
	f := resp.File
	out.Content = *f.Content
	out.Whole = f.StartLine <= 1 && f.TotalLines > 0 && f.NumLines >= f.TotalLines
	return out, true
}

// failedEdit returns the file of a failed Edit, MultiEdit, Write or
// NotebookEdit call (a PostToolUseFailure event); "" for any other event.
// The guard is told (`edit-failed PATH`) so that the model's next read of
// the file counts in full, as it was after an edit that did not apply.
func (ev *hookEvent) failedEdit() string {
	if ev.HookEventName != "PostToolUseFailure" {
		return ""
	}
	switch ev.ToolName {
	case "Edit", "MultiEdit", "Write", "NotebookEdit":
	default:
		return ""
	}
	var in struct {
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	if json.Unmarshal(ev.ToolInput, &in) != nil {
		return ""
	}
	if in.FilePath != "" {
		return in.FilePath
	}
	return in.NotebookPath
}

// shownHashes are the hashes (guard.Hash.String) the file's bytes may have
// when the model was shown content as Claude Code renders a whole file:
// the content itself, with LF line ends turned back into CRLF, and either
// with a UTF-8 byte-order mark in front.
func shownHashes(content string) []string {
	variants := []string{content}
	if !strings.Contains(content, "\r") && strings.Contains(content, "\n") {
		variants = append(variants, strings.ReplaceAll(content, "\n", "\r\n"))
	}
	for _, v := range variants[:len(variants):len(variants)] {
		variants = append(variants, "\ufeff"+v)
	}
	out := make([]string, len(variants))
	for i, v := range variants {
		out[i] = guard.HashBytes([]byte(v)).String()
	}
	return out
}

// denialSnapshot is what PreToolUse saw of the session's denial log: the
// time of its newest entry (zero when it had none).
type denialSnapshot struct {
	Last time.Time `json:"last"`
}

// parseDenials parses .rubino/self/denials (JSON lines, oldest first),
// skipping lines it cannot parse.
func parseDenials(b []byte) []guard.Denial {
	var out []guard.Denial
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var d guard.Denial
		if json.Unmarshal(sc.Bytes(), &d) == nil {
			out = append(out, d)
		}
	}
	return out
}

// snapshotOf is the snapshot of the denial log ds.
func snapshotOf(ds []guard.Denial) denialSnapshot {
	if len(ds) == 0 {
		return denialSnapshot{}
	}
	return denialSnapshot{Last: ds[len(ds)-1].Time}
}

// newSince returns the denials of ds logged after snapshot s. The daemon
// stamps each denial with its own clock (nanoseconds), so "after" compares
// the daemon's times only; the log is bounded, and an entry evicted since
// the snapshot does not matter.
func newSince(ds []guard.Denial, s denialSnapshot) []guard.Denial {
	var out []guard.Denial
	for _, d := range ds {
		if d.Time.After(s.Last) {
			out = append(out, d)
		}
	}
	return out
}

// maxReportedDenials bounds the denials quoted to the model for one tool
// call; the rest are counted.
const maxReportedDenials = 5

// denialContext is the text given to the model for the denials ds of one
// tool call, each line as .rubino/guard/why shows it; "" for none.
func denialContext(ds []guard.Denial) string {
	return denialContextFor(ds, "this tool call")
}

// denialContextFor is denialContext for the denials ds logged during call
// ("this tool call", "the previous tool call").
func denialContextFor(ds []guard.Denial, call string) string {
	if len(ds) == 0 {
		return ""
	}
	var b strings.Builder
	refused := 0
	for _, d := range ds {
		if !d.Warned {
			refused++
		}
	}
	fmt.Fprintf(&b, "rubinofs refused %d write(s) during %s", refused, call)
	if warned := len(ds) - refused; warned > 0 {
		fmt.Fprintf(&b, " and would have refused %d more (warn mode: those went through)", warned)
	}
	b.WriteString(" (.rubino/guard/why):\n")
	for i, d := range ds {
		if i == maxReportedDenials {
			fmt.Fprintf(&b, "... and %d more (.rubino/guard/denials)\n", len(ds)-i)
			break
		}
		fmt.Fprintf(&b, "%s %s %s: %s\n", d.Time.UTC().Format(time.RFC3339), d.Op, d.Code, d.Message)
	}
	b.WriteString("A refused write left the file as it was. Read the file first (the Read tool, or cat), " +
		"then make the change again against what you read.")
	return b.String()
}

// hookOutput is the JSON Claude Code takes from a hook on stdout to add
// context for the model after a tool call (hookSpecificOutput with the
// event's name and additionalContext).
func hookOutput(event, context string) []byte {
	b, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName":     event,
		"additionalContext": context,
	}})
	return append(b, '\n')
}

// hookStateDir is where PreToolUse leaves its denial snapshot for the
// matching PostToolUse: $XDG_RUNTIME_DIR/rubinofs-hooks/SESSION, else
// the temporary directory's rubinofs-hooks-UID/SESSION.
func hookStateDir(session string) string {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base != "" {
		base = filepath.Join(base, "rubinofs-hooks")
	} else {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("rubinofs-hooks-%d", os.Getuid()))
	}
	return filepath.Join(base, safeName(session))
}

// safeName keeps the letters, digits, '-' and '_' of an id from the event
// (a file name must not climb out of the state directory); "none" when
// nothing is left.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return -1
	}, s)
	if s == "" || len(s) > 128 {
		return "none"
	}
	return s
}
