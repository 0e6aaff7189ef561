package sessionctl

// Fuzz targets for the session control files' parsers: the sessions/clone
// spec and the sessions/ctl commands; and the per-session ctl's commands.
// Seeds are committed under testdata/fuzz/; `go test` runs them as
// regular tests. Search further with, e.g.:
//
//	go test -run='^$' -fuzz='^FuzzSessionSpec$' -fuzztime=25s ./internal/sessionctl

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// wantCtlError checks that err reaches a control-file caller as a chosen
// errno (never EIO) with a readable, bounded, one-line reason.
func wantCtlError(t *testing.T, err error, allowed ...syscall.Errno) {
	t.Helper()
	var ce *ctltree.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *ctltree.Error: the caller would see EIO", err, err)
	}
	ok := false
	for _, e := range allowed {
		ok = ok || ce.Errno == e
	}
	if !ok {
		t.Fatalf("errno %v for %q, want one of %v", ce.Errno, ce.Msg, allowed)
	}
	if ce.Msg == "" || !utf8.ValidString(ce.Msg) {
		t.Fatalf("unreadable reason %q", ce.Msg)
	}
	if r := ctltree.Clip(ce.Msg); len(r) > ctltree.MaxReason+len("…") || strings.ContainsAny(r, "\n\r") {
		t.Fatalf("reason not clipped to one bounded line: %q", r)
	}
}

// FuzzSessionSpec fuzzes the sessions/clone spec parser: an accepted spec
// has a valid name (or none), a non-zero pid (or none) and a bounded,
// valid command, and round-trips through String; a refused one has a
// chosen errno and a reason.
func FuzzSessionSpec(f *testing.F) {
	for _, s := range []string{
		"pid=123", "pid=123 name=agent-a cmd=sh -c 'echo hi'", "name=x", "", "   ",
		"name=../etc", "name=/abs", "name=a/b", "name=..", "name=.", "name=a\nb", "name=default",
		"name=task-1", "pid=0", "pid=-1", "pid=99999999999", "pid=1 pid=2", "bogus", "k=v",
		"cmd=a\x00b", "name=\xff", "name=" + strings.Repeat("a", 65), "cmd=" + strings.Repeat("é", 3000),
		"name=x\tpid=3", "cmd=", "pid=1\nname=y",
		"cgroup=/a/b name=c remove=1", "cgroup=self", "keep=1 name=k", "join=k", "join=k pid=3", "cgroup=a/b",
		"cgroup=/a/../b", "cgroup=/a keep=1", "remove=1", "join=k name=j", "harness=1 keep=1",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sp, err := parseSessionSpec(b)
		if err != nil {
			wantCtlError(t, err, syscall.EINVAL, syscall.EPERM, syscall.EFBIG)
			return
		}
		if sp.Name != "" {
			if err := sessions.ValidName(sp.Name); err != nil {
				t.Fatalf("accepted name %q: %v", sp.Name, err)
			}
			if strings.HasPrefix(sp.Name, sessions.TaskPrefix) {
				t.Fatalf("accepted reserved name %q", sp.Name)
			}
		}
		if len(sp.Cmd) > maxSessionCmd || !utf8.ValidString(sp.Cmd) || strings.IndexByte(sp.Cmd, 0) >= 0 {
			t.Fatalf("command %q", sp.Cmd)
		}
		sp2, err := parseSessionSpec([]byte(sp.String()))
		if err != nil || sp2 != sp {
			t.Fatalf("round trip of %+v via %q: %+v %v", sp, sp.String(), sp2, err)
		}
	})
}

// FuzzSessionCommand fuzzes the sessions/ctl parser: an accepted command is
// end or rename with names that are never paths, and round-trips through
// String.
func FuzzSessionCommand(f *testing.F) {
	for _, s := range []string{
		"end agent-a", "rename agent-a agent-b", "end default", "rename default x", "end", "end a b",
		"rename a", "rename a ../b", "rename a /etc", "rename a task-9", "end ..", "end a/b", "halt",
		"", "\n", "end \x00", "rename a b\xff", "end " + strings.Repeat("x", 2000), "  end   a  ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseSessionCommand(s)
		if err != nil {
			wantCtlError(t, err, syscall.EINVAL, syscall.EPERM, syscall.EFBIG)
			return
		}
		names := []string{c.Name}
		switch c.Verb {
		case "end":
			if c.New != "" {
				t.Fatalf("end with a new name: %+v", c)
			}
		case "rename":
			if err := sessions.ValidName(c.New); err != nil || strings.HasPrefix(c.New, sessions.TaskPrefix) {
				t.Fatalf("accepted new name %q", c.New)
			}
			names = append(names, c.New)
		default:
			t.Fatalf("verb %q", c.Verb)
		}
		for _, n := range names {
			if n != sessions.Default && sessions.ValidName(n) != nil {
				t.Fatalf("accepted name %q", n)
			}
		}
		if c2, err := parseSessionCommand(c.String()); err != nil || c2 != c {
			t.Fatalf("round trip of %+v: %+v %v", c, c2, err)
		}
	})
}

// TestParseSelfCommand: the per-session ctl's commands and their errors.
func TestParseSelfCommand(t *testing.T) {
	h := guard.HashBytes([]byte("x"))
	good := []struct {
		in   string
		want selfCmd
	}{
		{"read f.txt", selfCmd{Verb: "read", Path: "f.txt"}},
		{"read f.txt\n", selfCmd{Verb: "read", Path: "f.txt"}},
		{"read /abs/f.txt " + h.String(), selfCmd{Verb: "read", Path: "/abs/f.txt", Hash: h, HasHash: true}},
		{"read sub/g " + strings.ToUpper(h.String()), selfCmd{Verb: "read", Path: "sub/g", Hash: h, HasHash: true}},
		{`read "a b.txt" ` + h.String(), selfCmd{Verb: "read", Path: "a b.txt", Hash: h, HasHash: true}},
		{"edit-failed f.txt", selfCmd{Verb: "edit-failed", Path: "f.txt"}},
	}
	for _, c := range good {
		got, err := parseSelfCommand(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseSelfCommand(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	bad := []struct {
		in    string
		errno syscall.Errno
	}{
		{"", syscall.EINVAL},
		{"read", syscall.EINVAL},
		{"write f.txt", syscall.EINVAL},
		{"read f.txt nothex", syscall.EINVAL},
		{"read f.txt " + h.String() + " extra", syscall.EINVAL},
		{"edit-failed f.txt " + h.String(), syscall.EINVAL},
		{`read "unterminated`, syscall.EINVAL},
		{`read "a"b`, syscall.EINVAL},
		{"read f\x00", syscall.EINVAL},
		{"read " + strings.Repeat("a", maxSelfCommand), syscall.EFBIG},
	}
	for _, c := range bad {
		_, err := parseSelfCommand(c.in)
		var ce *ctltree.Error
		if !errors.As(err, &ce) || ce.Errno != c.errno {
			t.Errorf("parseSelfCommand(%q) = %v, want %v", c.in, err, c.errno)
		}
	}
	sp, err := parseSessionSpec([]byte("name=h harness=1 cmd=claude --x"))
	if err != nil || !sp.Harness || sp.Name != "h" || sp.Cmd != "claude --x" {
		t.Errorf("harness spec: %+v, %v", sp, err)
	}
	if _, err := parseSessionSpec([]byte("harness=yes")); err == nil {
		t.Error("harness=yes accepted")
	}
}
