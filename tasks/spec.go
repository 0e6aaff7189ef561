package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/branch"
)

// Input limits of the control files, in bytes. A larger input is refused
// whole (ErrTooLarge, EFBIG for control-file callers) before parsing.
const (
	MaxSpec     = 64 << 10 // a clone spec
	MaxPrompt   = 64 << 10 // a prompt, after parsing
	MaxCtl      = 16 << 10 // one ctl command (steer / reply text included)
	MaxQuestion = 16 << 10 // an ask or approval request
	MaxResult   = 64 << 10 // a result a task writes
)

// MaxQueuedNotes bounds a task's steer queue (steer notes and probes not yet
// drained through its inbox), in entries. A steer or probe beyond it fails
// with EAGAIN ("Resource temporarily unavailable") until the task drains
// its inbox. The check runs before the note is queued, so concurrent
// writers may overshoot it by the number of FUSE requests in flight.
const MaxQueuedNotes = 256

// ErrTooLarge is returned by the parsers for input over its limit.
// Control-file callers see EFBIG.
var ErrTooLarge = errors.New("input too large")

// ErrBadInput wraps every other parse error. Control-file callers see
// EINVAL and the message.
var ErrBadInput = errors.New("bad input")

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// subagentRE is the shape of a subagent type name.
var subagentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Spec is what a clone write asks for.
type Spec struct {
	// Subagent is a configured type name ("sh" is built in).
	Subagent string `json:"subagent"`
	// Prompt is the task's instruction: a shell command for "sh", passed
	// to other types as an argument or on stdin.
	Prompt string `json:"prompt"`
	// Branch runs the task in the existing branch of that name (`rubinofs
	// branch new`): a branch name's shape, or "" (docs/DESIGN.md#branch-tasks).
	Branch string `json:"branch,omitempty"`
	// Isolation is "" or "none" (the task works in the workspace) or
	// IsolationBranch (it works in a new branch named after it). Not with
	// Branch.
	Isolation string `json:"isolation,omitempty"`
}

// IsolationBranch is the isolation that runs a task in a new branch of
// its own (docs/DESIGN.md#branch-tasks).
const IsolationBranch = "branch"

// InBranch reports whether the spec asks for a branch, existing or new.
func (s Spec) InBranch() bool { return s.Branch != "" || s.Isolation == IsolationBranch }

// ParseSpec parses a clone write: either one JSON object
// {"subagent":"sh","prompt":"..."} (unknown fields are errors, nothing may
// follow it), or key=value lines with the keys subagent, prompt, and the
// optional branch and isolation (blank lines and lines starting with # are
// ignored; a key may appear once; the value is trimmed). They may share
// one line, subagent first and prompt last ("subagent=sh
// isolation=branch prompt=make test"): it survives shells whose echo
// writes a multi-line string line by line (bash), while a clone takes one
// write. subagent and prompt are required; branch is a branch name,
// isolation "", "none" or "branch", and not both (Validate). The subagent must match
// [A-Za-z0-9][A-Za-z0-9_.-]{0,63}; the prompt must be non-empty, valid
// UTF-8 without NUL bytes, at most MaxPrompt bytes. Errors wrap ErrTooLarge
// or ErrBadInput with a readable reason.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	if len(b) > MaxSpec {
		return s, fmt.Errorf("%w: spec of %d bytes exceeds %d", ErrTooLarge, len(b), MaxSpec)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return s, badf(`empty spec: write {"subagent":"sh","prompt":"..."} or the lines subagent=sh and prompt=...`)
	}
	if b[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return Spec{}, badf(`spec: want one JSON object like {"subagent":"sh","prompt":"echo hi"}: %v`, err)
		}
		if dec.More() {
			return Spec{}, badf("spec: trailing data after the JSON object")
		}
		if _, err := dec.Token(); err == nil {
			return Spec{}, badf("spec: trailing data after the JSON object")
		}
	} else {
		seen := map[string]bool{}
		set := func(n int, k, v string) error {
			if seen[k] {
				return badf("spec line %d: %s given twice", n, clip(k, 40))
			}
			seen[k] = true
			switch k {
			case "subagent":
				s.Subagent = strings.TrimSpace(v)
			case "prompt":
				s.Prompt = strings.TrimSpace(v)
			case "branch":
				s.Branch = strings.TrimSpace(v)
			case "isolation":
				s.Isolation = strings.TrimSpace(v)
			default:
				return badf("spec line %d: unknown key %q (want subagent, prompt, branch or isolation)", n, clip(k, 40))
			}
			return nil
		}
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			k = strings.TrimSpace(k)
			if !ok {
				return Spec{}, badf("spec line %d: want key=value (subagent=..., prompt=...), got %q", i+1, clip(line, 60))
			}
			if k == "subagent" { // the one-line form: subagent=sh [KEY=VALUE...] prompt=make test
				if j := strings.Index(v, " prompt="); j >= 0 {
					if err := set(i+1, "prompt", v[j+len(" prompt="):]); err != nil {
						return Spec{}, err
					}
					v = v[:j]
				}
				words := strings.Fields(v)
				for _, w := range words[min(1, len(words)):] {
					wk, wv, ok := strings.Cut(w, "=")
					if !ok || wk == "subagent" || wk == "prompt" {
						return Spec{}, badf("spec line %d: want subagent=TYPE [branch=NAME] [isolation=branch] prompt=..., got %q", i+1, clip(w, 60))
					}
					if err := set(i+1, wk, wv); err != nil {
						return Spec{}, err
					}
				}
				if len(words) > 0 {
					v = words[0]
				}
			}
			if err := set(i+1, k, v); err != nil {
				return Spec{}, err
			}
		}
	}
	return s, s.Validate()
}

// Validate checks a spec's fields (see ParseSpec).
func (s Spec) Validate() error {
	if s.Subagent == "" {
		return badf("spec: subagent is required (sh, or a configured type)")
	}
	if !subagentRE.MatchString(s.Subagent) {
		return badf("spec: malformed subagent name %q", clip(s.Subagent, 70))
	}
	if strings.TrimSpace(s.Prompt) == "" {
		return badf("spec: prompt is required")
	}
	if len(s.Prompt) > MaxPrompt {
		return fmt.Errorf("%w: prompt of %d bytes exceeds %d", ErrTooLarge, len(s.Prompt), MaxPrompt)
	}
	switch s.Isolation {
	case "", "none", IsolationBranch:
	default:
		return badf("spec: isolation %q: want branch (a new branch for the task) or none", clip(s.Isolation, 40))
	}
	if s.Branch != "" && !branch.ValidName(s.Branch) {
		return badf("spec: bad branch name %q: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit (`rubinofs branch ls` lists them)", clip(s.Branch, 70))
	}
	if s.Branch != "" && s.Isolation == IsolationBranch {
		return badf("spec: give branch=NAME (run in that existing branch) or isolation=branch (run in a new branch of its own), not both")
	}
	return checkText("prompt", s.Prompt)
}

// checkText refuses invalid UTF-8 and NUL bytes.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return badf("%s is not valid UTF-8", what)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return badf("%s contains a NUL byte", what)
	}
	return nil
}

// clip shortens s to n bytes (on a rune boundary) for messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Verb is a ctl command.
type Verb string

// The ctl verbs.
const (
	VerbStop    Verb = "stop"
	VerbSteer   Verb = "steer"
	VerbReply   Verb = "reply"
	VerbApprove Verb = "approve"
	VerbProbe   Verb = "probe"
)

// Command is one parsed ctl write.
type Command struct {
	Verb Verb // one of the Verb constants
	// Text is the note for steer, the answer for reply, the optional note
	// for approve.
	Text string
	// Approve is the decision for approve.
	Approve bool
}

// String renders the command in the form ParseCtl accepts.
func (c Command) String() string {
	switch c.Verb {
	case VerbSteer, VerbReply:
		return string(c.Verb) + " " + c.Text
	case VerbApprove:
		s := "approve no"
		if c.Approve {
			s = "approve yes"
		}
		if c.Text != "" {
			s += " " + c.Text
		}
		return s
	}
	return string(c.Verb)
}

const ctlUsage = "want stop, steer TEXT, reply TEXT, approve yes|no [NOTE] or probe"

// ParseCtl parses one ctl write: "stop", "steer TEXT", "reply TEXT",
// "approve yes|no [NOTE]" or "probe". The verb is separated from its
// argument by spaces or tabs; TEXT is trimmed and may span lines. Input over
// MaxCtl wraps ErrTooLarge; invalid UTF-8, NUL bytes, unknown verbs,
// missing or extra arguments wrap ErrBadInput.
func ParseCtl(b []byte) (Command, error) {
	if len(b) > MaxCtl {
		return Command{}, fmt.Errorf("%w: ctl command of %d bytes exceeds %d", ErrTooLarge, len(b), MaxCtl)
	}
	s := string(b)
	if err := checkText("ctl command", s); err != nil {
		return Command{}, err
	}
	s = strings.TrimSpace(s)
	verb, rest := s, ""
	if i := strings.IndexAny(s, " \t\n\r"); i >= 0 {
		verb, rest = s[:i], strings.TrimSpace(s[i+1:])
	}
	c := Command{Verb: Verb(verb)}
	switch c.Verb {
	case VerbStop, VerbProbe:
		if rest != "" {
			return Command{}, badf("%s takes no argument", verb)
		}
	case VerbSteer, VerbReply:
		if rest == "" {
			return Command{}, badf("%s needs TEXT", verb)
		}
		c.Text = rest
	case VerbApprove:
		word, note := rest, ""
		if i := strings.IndexAny(rest, " \t\n\r"); i >= 0 {
			word, note = rest[:i], strings.TrimSpace(rest[i+1:])
		}
		switch word {
		case "yes":
			c.Approve = true
		case "no":
		default:
			return Command{}, badf("approve: want yes or no, got %q", clip(word, 40))
		}
		c.Text = note
	case "":
		return Command{}, badf("empty command: %s", ctlUsage)
	default:
		return Command{}, badf("unknown command %q: %s", clip(verb, 40), ctlUsage)
	}
	return c, nil
}

// AskRequest is a parsed write to ask or approval.
type AskRequest struct {
	Question string `json:"question"` // the question (may be empty for an approval with a command)
	// Command is what an approval request wants to run (approval only).
	Command string `json:"command,omitempty"`
	// Blocking is whether the asker parks on the answer (ask only; the
	// default is true). A non-blocking ask gets its answer in the inbox.
	Blocking *bool `json:"blocking,omitempty"`
}

// ParseAsk parses a write to ask (approval=false) or approval
// (approval=true): plain text is the question (a blocking ask), or one JSON
// object {"question":"...","blocking":false} for ask,
// {"question":"...","command":"..."} for approval. Input starting with {
// is always JSON. A question (or, for approval, a question or a command)
// is required; at most MaxQuestion bytes; UTF-8 without NUL. Errors wrap
// ErrTooLarge or ErrBadInput.
func ParseAsk(b []byte, approval bool) (AskRequest, error) {
	var a AskRequest
	if len(b) > MaxQuestion {
		return a, fmt.Errorf("%w: %d bytes exceeds %d", ErrTooLarge, len(b), MaxQuestion)
	}
	if err := checkText("question", string(b)); err != nil {
		return a, err
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return AskRequest{}, badf("want plain text or one JSON object {\"question\":...}: %v", err)
		}
		if _, err := dec.Token(); err == nil {
			return AskRequest{}, badf("trailing data after the JSON object")
		}
		a.Question, a.Command = strings.TrimSpace(a.Question), strings.TrimSpace(a.Command)
		if err := checkText("question", a.Question+a.Command); err != nil {
			return AskRequest{}, err
		}
	} else {
		a.Question = string(b)
	}
	if approval {
		if a.Blocking != nil {
			return AskRequest{}, badf("an approval request has no blocking field: the task always waits for the decision")
		}
		if a.Question == "" && a.Command == "" {
			return AskRequest{}, badf("empty approval request: write the question, or {\"question\":...,\"command\":...}")
		}
		return a, nil
	}
	if a.Command != "" {
		return AskRequest{}, badf("command belongs to an approval request (write it to approval)")
	}
	if a.Question == "" {
		return AskRequest{}, badf("empty question")
	}
	return a, nil
}

// IsBlocking returns the ask's blocking flag (true unless set false).
func (a AskRequest) IsBlocking() bool { return a.Blocking == nil || *a.Blocking }

// ParseActivity parses the lines a task appends to its activity file:
// "started TEXT" (RecordToolStarted) or "finished TEXT"
// (RecordToolFinished), one per line. Errors wrap ErrBadInput.
func ParseActivity(line string) (started bool, text string, err error) {
	line = strings.TrimSpace(line)
	if err := checkText("activity", line); err != nil {
		return false, "", err
	}
	verb, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch verb {
	case "started", "finished":
		if rest == "" {
			return false, "", badf("activity: %s needs TEXT", verb)
		}
		return verb == "started", clip(rest, OutputTailLineMax), nil
	}
	return false, "", badf("activity: want \"started TEXT\" or \"finished TEXT\", got %q", clip(line, 60))
}
