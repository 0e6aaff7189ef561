package tasks

import (
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
)

// The parsers of everything a caller writes: seeds are committed under
// testdata/fuzz/; run `go test -fuzz FuzzParseSpec ./tasks` (or FuzzParseCtl,
// FuzzParseAsk) to search further.

// wantParseErrno checks that a parse error reaches a control-file caller as
// EINVAL or EFBIG with a reason, never as EIO.
func wantParseErrno(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrBadInput) && !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v wraps neither ErrBadInput nor ErrTooLarge", err)
	}
	ce := ctlErrnos.Map(err)
	if n := ctltree.ErrnoOf(ce); n != syscall.EINVAL && n != syscall.EFBIG {
		t.Fatalf("errno %v for %v", n, err)
	}
	if !utf8.ValidString(ce.Error()) || ce.Error() == "" {
		t.Fatalf("unreadable reason %q", ce.Error())
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		`{"subagent":"sh","prompt":"echo hi"}`,
		"subagent=sh\nprompt=make test\n",
		"# c\n\nsubagent = claude\nprompt = fix the bug\n",
		`{"subagent":"sh","prompt":"x"} trailing`,
		`{"subagent":"../etc","prompt":"x"}`,
		"prompt=\x00",
		"subagent=sh\nprompt=\xff",
		"",
		"{",
		"subagent=sh\nsubagent=sh",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil {
			wantParseErrno(t, err)
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid spec %+v: %v", s, err)
		}
		if !subagentRE.MatchString(s.Subagent) || strings.ContainsAny(s.Subagent, "/\x00") {
			t.Fatalf("subagent %q", s.Subagent)
		}
		if strings.TrimSpace(s.Prompt) == "" || len(s.Prompt) > MaxPrompt || !utf8.ValidString(s.Prompt) || strings.IndexByte(s.Prompt, 0) >= 0 {
			t.Fatalf("prompt %q", s.Prompt)
		}
		// Round trips: JSON always; key=value for one-line trimmed prompts.
		j, _ := json.Marshal(s)
		if s2, err := ParseSpec(j); err != nil || s2 != s {
			t.Fatalf("JSON round trip %s: %+v %v", j, s2, err)
		}
		if !strings.ContainsAny(s.Prompt, "\n\r") && s.Prompt == strings.TrimSpace(s.Prompt) {
			kv := "subagent=" + s.Subagent + "\nprompt=" + s.Prompt
			if s2, err := ParseSpec([]byte(kv)); err != nil || s2 != s {
				t.Fatalf("key=value round trip %q: %+v %v", kv, s2, err)
			}
		}
	})
}

func FuzzParseCtl(f *testing.F) {
	for _, s := range []string{
		"stop", "probe", "steer focus on the tests", "reply main\nplease", "approve yes", "approve no use make clean",
		"approve maybe", "stop now", "steer", "", "\t", "steer \x00", "reply \xff", "halt",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCtl(b)
		if err != nil {
			wantParseErrno(t, err)
			return
		}
		switch c.Verb {
		case VerbStop, VerbProbe:
			if c.Text != "" {
				t.Fatalf("%s with text %q", c.Verb, c.Text)
			}
		case VerbSteer, VerbReply:
			if c.Text == "" || c.Text != strings.TrimSpace(c.Text) {
				t.Fatalf("%s text %q", c.Verb, c.Text)
			}
		case VerbApprove:
		default:
			t.Fatalf("verb %q", c.Verb)
		}
		if !utf8.ValidString(c.Text) || strings.IndexByte(c.Text, 0) >= 0 || len(c.Text) > MaxCtl {
			t.Fatalf("text %q", c.Text)
		}
		if c2, err := ParseCtl([]byte(c.String())); err != nil || c2 != c {
			t.Fatalf("round trip %q: %+v %v", c.String(), c2, err)
		}
	})
}

func FuzzParseAsk(f *testing.F) {
	for _, s := range []string{
		"which branch?", `{"question":"later?","blocking":false}`, `{"question":"ok?","command":"rm -rf build"}`,
		`{"question":""}`, "{", "  ", "\x00", `{"question":"x"} {}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, approval bool) {
		a, err := ParseAsk(b, approval)
		if err != nil {
			wantParseErrno(t, err)
			return
		}
		if approval && a.Question == "" && a.Command == "" || !approval && (a.Question == "" || a.Command != "") {
			t.Fatalf("accepted %+v (approval %v)", a, approval)
		}
		if !utf8.ValidString(a.Question+a.Command) || strings.IndexByte(a.Question+a.Command, 0) >= 0 {
			t.Fatalf("text %+v", a)
		}
	})
}

func FuzzParseActivity(f *testing.F) {
	for _, s := range []string{
		"started bash make test", "finished bash", "started", "finished   ", "ran x", "", "started \x00",
		"started \xff", "started " + strings.Repeat("é", 300), "\tstarted\tx",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		started, text, err := ParseActivity(line)
		if err != nil {
			wantParseErrno(t, err)
			return
		}
		if text == "" || len(text) > OutputTailLineMax+len("…") || !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 {
			t.Fatalf("text %q", text)
		}
		verb := "finished"
		if started {
			verb = "started"
		}
		if len(text) <= OutputTailLineMax && !strings.ContainsAny(text, "\n\r") {
			if s2, t2, err := ParseActivity(verb + " " + text); err != nil || s2 != started || t2 != text {
				t.Fatalf("round trip %q: %v %q %v", text, s2, t2, err)
			}
		}
	})
}

// FuzzValidID: an accepted task id is a decimal number without a leading
// zero, so never a path element other than itself.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"1", "42", "0", "01", "..", "1/2", "", "9999999999999999999", "99999999999999999999", "-1", "1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidID(s) {
			return
		}
		if s == "" || s[0] == '0' || len(s) > 19 {
			t.Fatalf("accepted %q", s)
		}
		for _, c := range s {
			if c < '0' || c > '9' {
				t.Fatalf("accepted %q", s)
			}
		}
	})
}
