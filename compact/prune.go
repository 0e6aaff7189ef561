package compact

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
)

// The LLM-free pre-pass over the middle (docs/DESIGN.md#compact-prune-pass):
// identical tool outputs are deduplicated and old large ones replaced by a
// one-line stub before the summarizer sees them. The middle is summarised and
// then discarded, so a lossy copy is safe; saved_tokens is measured before
// this pass.

// diagRe matches diagnostic lines (compiler errors, test failures, shell
// errors, panics) as opposed to code that merely mentions errors.
// It runs on lower-cased lines (case folding in the regexp is slow).
var diagRe = regexp.MustCompile(`(^\s*(error|fatal|panic|exception|traceback)\b|\b(error|fatal|panic)(\[[^\]]*\])?:|^\s*(--- )?fail\b|\bfailed\b|permission denied|no such file|command not found|undefined:|exit status [1-9]|segmentation fault)`)

// diagKeywords prefilter lines cheaply (lower case) before diagRe runs:
// every diagRe match contains one of them.
var diagKeywords = []string{"error", "fatal", "panic", "exception", "traceback", "fail", "permission denied", "no such file", "command not found", "undefined:", "exit status", "segmentation fault"}

func hasDiagKeyword(lower string) bool {
	for _, k := range diagKeywords {
		if strings.Contains(lower, k) {
			return true
		}
	}
	return false
}

// diagLines returns up to limit diagnostic lines of text (trimmed), in
// order; limit <= 0 means all.
func diagLines(text string, limit int) []string {
	if !hasDiagKeyword(strings.ToLower(text)) {
		return nil
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if ll := strings.ToLower(l); hasDiagKeyword(ll) && diagRe.MatchString(ll) {
			out = append(out, strings.TrimSpace(l))
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

// PruneToolResults returns a copy of msgs with
//   - every tool output that is byte-identical to a later one replaced by
//     "[duplicate tool output: same as the later result of NAME (call ID)]";
//   - every other tool output of more than minTokens tokens, except the
//     keepRecent newest tool outputs, replaced by a one-line stub that keeps
//     its size, its first line and up to three error lines.
//
// Tool messages keep their tool_call_id, so pairs stay intact. Tokens of
// changed messages are recounted with tk. Pure function.
func PruneToolResults(msgs []Message, tk Tokenizer, minTokens, keepRecent int) []Message {
	out := make([]Message, len(msgs))
	copy(out, msgs)
	names := toolNames(out)
	seen := map[[32]byte]int{} // content hash -> index of the newest message with it
	recent := 0
	for j := len(out) - 1; j >= 0; j-- {
		m := &out[j]
		if m.Role != RoleTool || m.Content == "" || strings.HasPrefix(m.Content, "[duplicate tool output") {
			continue
		}
		h := sha256.Sum256([]byte(m.Content))
		if later, ok := seen[h]; ok {
			l := &out[later]
			m.Content = fmt.Sprintf("[duplicate tool output: same as the later result of %s (call %s)]", names.of(l), l.ToolCallID)
			m.RawContent = nil
			m.Tokens = MessageTokens(tk, m)
			continue
		}
		seen[h] = j
		recent++
		if recent <= keepRecent || m.Tokens <= minTokens {
			continue
		}
		m.Content = pruneStub(m, names.of(m))
		m.RawContent = nil
		m.Tokens = MessageTokens(tk, m)
	}
	return out
}

// pruneStub is the one-line replacement of an old large tool output.
func pruneStub(m *Message, name string) string {
	text := strings.TrimSpace(m.Content)
	first, _, _ := strings.Cut(text, "\n")
	first = strings.TrimSpace(first)
	nlines := strings.Count(text, "\n") + 1
	var errs []string
	for _, l := range diagLines(text, 3) {
		errs = append(errs, clip(l, 160))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[old tool output pruned: %s returned %d tokens in %d lines; first line: %q", name, m.Tokens, nlines, clip(first, 160))
	if len(errs) > 0 {
		fmt.Fprintf(&b, "; error lines: %q", strings.Join(errs, " | "))
	}
	b.WriteString("]")
	return b.String()
}

// callNames maps tool-call ids to the called function's name.
type callNames map[string]string

// toolNames collects the function names of the calls issued in msgs.
func toolNames(msgs []Message) callNames {
	names := callNames{}
	for i := range msgs {
		for _, tc := range msgs[i].ToolCalls {
			names[tc.ID] = tc.Function.Name
		}
	}
	return names
}

// of returns the tool name of a tool message: its own name, else its
// call's, else "a tool".
func (n callNames) of(m *Message) string {
	if m.Name != "" {
		return m.Name
	}
	if s := n[m.ToolCallID]; s != "" {
		return s
	}
	return "a tool"
}
