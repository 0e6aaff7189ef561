package compact

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// BuiltinSummarizer is the default backend: offline, deterministic and
// extractive (no model). From the middle it keeps the user's requests, the
// constraints they stated, the assistant's decisions, the files touched by
// tool calls or named in the conversation, diagnostic lines (errors,
// failures) and the assistant's last state, merged into the previous
// summary's sections (newest entries win when a section is full). The same
// input always gives the same summary. The zero value is ready; safe for
// concurrent use.
type BuiltinSummarizer struct{}

// Name returns "builtin".
func (BuiltinSummarizer) Name() string { return "builtin" }

// Caps on the entries of each section (the newest are kept).
var builtinCaps = map[string]int{
	"Goal": 3, "Constraints": 12, "Progress": 24, "Decisions": 12, "Files": 40, "Next steps": 8, "Critical context": 12,
}

var (
	constraintRe = regexp.MustCompile(`(?i)\b(must|never|always|don't|do not|should|shouldn't|avoid|make sure|required|prefer|no more than|at most|at least)\b`)
	decisionRe   = regexp.MustCompile(`(?i)\b(decided|decide to|chose|choose|going with|opted|instead of|will use|i'll use|we'll use|switch(ed)? to|the plan is|approach is)\b`)
	nextRe       = regexp.MustCompile(`(?i)^\s*([-*]\s*\[ \]|todo\b|next\b|next steps?:|then\b|remaining:|still to do)`)
	pathRe       = regexp.MustCompile(`(?:\.{0,2}/)?(?:[A-Za-z0-9_.@+-]+/)*[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*\.[A-Za-z][A-Za-z0-9]{0,7}\b|\b(?:Makefile|Dockerfile|Gemfile|Rakefile|Cargo\.toml|go\.mod)\b`)
	stubErrRe    = regexp.MustCompile(`error lines: ("(?:[^"\\]|\\.)*")`)
)

// pathArgKeys are tool-argument keys whose string values are file paths.
var pathArgKeys = []string{"path", "file", "filename", "file_path", "filepath", "notebook_path", "target", "paths", "files", "source", "destination", "dir", "directory"}

// fileExts are the extensions a path found in prose must have.
var fileExts = map[string]bool{}

func init() {
	for _, e := range strings.Fields("go mod sum py rs ts tsx js jsx mjs cjs md markdown json yaml yml toml rb java kt kts c h cc cpp hpp cs sh bash zsh sql txt html htm css scss proto lock ini cfg conf xml gradle swift php pl lua r ex exs erl hs ml vue svelte") {
		fileExts[e] = true
	}
}

// Summarize builds the summary; it never fails (the error is for the
// interface).
func (BuiltinSummarizer) Summarize(ctx context.Context, req SummaryRequest) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	prev := parseSections(req.Previous)
	fresh := map[string][]string{}
	add := func(sec, s string) {
		s = strings.TrimSpace(s)
		if s != "" {
			fresh[sec] = append(fresh[sec], "- "+s)
		}
	}
	var requests []string
	var lastState string
	var lastAssistant string
	toolCounts := map[string]int{}
	var files []string
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Kind == KindSummary {
			continue
		}
		text := strings.TrimSpace(m.Content)
		switch m.Role {
		case RoleUser:
			if text == "" {
				continue
			}
			requests = append(requests, oneLine(text, 300))
			for _, s := range sentences(text) {
				if constraintRe.MatchString(s) {
					add("Constraints", oneLine(s, 240))
				}
			}
			files = append(files, pathsIn(text)...)
		case RoleAssistant:
			if text != "" {
				lastAssistant = text
				lastState = oneLine(text, 500)
				for _, s := range sentences(text) {
					if decisionRe.MatchString(s) {
						add("Decisions", oneLine(s, 240))
					}
				}
				for _, l := range diagLines(text, 0) {
					add("Critical context", oneLine(l, 200))
				}
				files = append(files, pathsIn(text)...)
			}
			for _, tc := range m.ToolCalls {
				toolCounts[tc.Function.Name]++
				files = append(files, pathsInArgs(tc.Function.Arguments)...)
			}
		case RoleTool:
			if strings.HasPrefix(text, "[old tool output pruned") {
				if sm := stubErrRe.FindStringSubmatch(text); sm != nil {
					if s, err := strconv.Unquote(sm[1]); err == nil {
						for _, l := range strings.Split(s, " | ") {
							add("Critical context", oneLine(l, 200))
						}
					}
				}
				continue
			}
			for _, l := range diagLines(text, 0) {
				add("Critical context", oneLine(l, 200))
			}
		case RoleSystem, RoleDeveloper:
			for _, s := range sentences(text) {
				if constraintRe.MatchString(s) {
					add("Constraints", oneLine(s, 240))
				}
			}
		}
	}
	if len(prev["Goal"]) == 0 {
		goal := ""
		for i := range req.Head {
			if req.Head[i].realUser() && strings.TrimSpace(req.Head[i].Content) != "" {
				goal = oneLine(req.Head[i].Content, 300)
				break
			}
		}
		if goal == "" && len(requests) > 0 {
			goal, requests = requests[0], requests[1:]
		}
		add("Goal", goal)
	}
	for _, r := range requests {
		add("Progress", "User asked: "+r)
	}
	if len(toolCounts) > 0 {
		names := make([]string, 0, len(toolCounts))
		total := 0
		for n, c := range toolCounts {
			names = append(names, n)
			total += c
		}
		sort.Slice(names, func(i, j int) bool {
			if toolCounts[names[i]] != toolCounts[names[j]] {
				return toolCounts[names[i]] > toolCounts[names[j]]
			}
			return names[i] < names[j]
		})
		parts := make([]string, 0, len(names))
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s x%d", n, toolCounts[n]))
		}
		add("Progress", fmt.Sprintf("Ran %d tool calls: %s", total, strings.Join(parts, ", ")))
	}
	if lastState != "" {
		add("Progress", "Last state: "+lastState)
	}
	for _, f := range files {
		add("Files", f)
	}
	for _, l := range strings.Split(lastAssistant, "\n") {
		if nextRe.MatchString(l) {
			add("Next steps", oneLine(strings.TrimLeft(strings.TrimSpace(l), "-* "), 240))
		}
	}
	out := map[string][]string{}
	for _, sec := range Sections {
		old := prev[sec]
		switch sec {
		case "Progress":
			if lastState != "" { // the new last state supersedes the old
				old = dropPrefixed(old, "- Last state:")
			}
		case "Next steps":
			if len(fresh[sec]) > 0 { // the newest plan replaces the old one
				old = nil
			}
		}
		out[sec] = mergeBullets(old, fresh[sec], builtinCaps[sec])
	}
	if len(out["Next steps"]) == 0 {
		out["Next steps"] = []string{"- Continue from the latest user message after this summary."}
	}
	count := func(s string) int { return (len(s) + 3) / 4 }
	if req.Tokenizer != nil {
		count = req.Tokenizer.Count
	}
	return fitSummary(out, req.MaxTokens, count), nil
}

// renderSections writes the sections in order; an empty one reads "- none".
func renderSections(secs map[string][]string) string {
	var b strings.Builder
	for i, sec := range Sections {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "## %s\n", sec)
		if len(secs[sec]) == 0 {
			b.WriteString("- none\n")
		}
		for _, l := range secs[sec] {
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// fitSummary renders secs, dropping the oldest entry of the fullest section
// (never the last entry of a section) until it fits maxTokens, then cutting
// the text itself if it still does not fit.
func fitSummary(secs map[string][]string, maxTokens int, count func(string) int) string {
	s := renderSections(secs)
	for maxTokens > 0 && count(s) > maxTokens {
		best := ""
		for _, sec := range Sections {
			if len(secs[sec]) > 1 && (best == "" || len(secs[sec]) > len(secs[best])) {
				best = sec
			}
		}
		if best == "" {
			for count(s) > maxTokens && len(s) > 64 {
				s = clip(s, len(s)*9/10)
			}
			return s
		}
		secs[best] = secs[best][1:]
		s = renderSections(secs)
	}
	return s
}

// mergeBullets appends fresh to old, drops duplicates (keeping the newest
// occurrence) and "- none", and keeps the newest limit entries.
func mergeBullets(old, fresh []string, limit int) []string {
	all := append(append([]string(nil), old...), fresh...)
	seen := map[string]bool{}
	var rev []string
	for i := len(all) - 1; i >= 0; i-- {
		l := strings.TrimSpace(all[i])
		if !strings.HasPrefix(l, "- ") && !strings.HasPrefix(l, "* ") {
			l = "- " + l
		}
		key := strings.ToLower(l[2:])
		if key == "none" || seen[key] {
			continue
		}
		seen[key] = true
		rev = append(rev, l)
		if len(rev) == limit {
			break
		}
	}
	out := make([]string, len(rev))
	for i, l := range rev {
		out[len(rev)-1-i] = l
	}
	return out
}

func dropPrefixed(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), prefix) {
			out = append(out, l)
		}
	}
	return out
}

// oneLine collapses whitespace and clips to n bytes.
func oneLine(s string, n int) string {
	return clip(strings.Join(strings.Fields(s), " "), n)
}

// sentences splits text into lines and sentences.
func sentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for len(line) > 0 {
			i := strings.Index(line, ". ")
			if i < 0 {
				out = append(out, line)
				break
			}
			out = append(out, line[:i+1])
			line = line[i+2:]
		}
	}
	return out
}

// pathsIn returns path-like words of text that end in a known file
// extension (or are a well-known file name), excluding URLs.
func pathsIn(text string) []string {
	var out []string
	for _, p := range pathRe.FindAllString(text, 64) {
		if strings.Contains(p, "://") {
			continue
		}
		if i := strings.LastIndexByte(p, '.'); i >= 0 && !fileExts[strings.ToLower(p[i+1:])] && !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "./") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// pathsInArgs returns the file paths in a tool call's JSON arguments: string
// values under path-like keys, and path-like words of a "command" string.
func pathsInArgs(args string) []string {
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) != nil {
		return pathsIn(args)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		lk := strings.ToLower(k)
		isPath := false
		for _, pk := range pathArgKeys {
			if lk == pk {
				isPath = true
			}
		}
		switch v := obj[k].(type) {
		case string:
			if isPath && v != "" && len(v) < 512 && !strings.ContainsAny(v, "\n") {
				out = append(out, v)
			} else if lk == "command" || lk == "cmd" {
				out = append(out, pathsIn(v)...)
			}
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					if isPath && s != "" && len(s) < 512 {
						out = append(out, s)
					} else if lk == "command" || lk == "cmd" {
						out = append(out, pathsIn(s)...)
					}
				}
			}
		}
	}
	return out
}
