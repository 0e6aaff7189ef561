package fusefs

// Fuzz targets for every parser of control-file input in this package: the
// generic ctl mechanism (how writes are cut into lines and commands), the
// sessions/clone spec and the sessions/ctl commands. Seeds are committed
// under testdata/fuzz/; `go test` runs them as regular tests. Search
// further with, e.g.:
//
//	go test -run='^$' -fuzz='^FuzzCtlHandleWrite$' -fuzztime=25s ./fusefs

import (
	"bytes"
	"context"
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
	if r := ctltree.Clip(ce.Msg); len(r) > maxCtlReason+len("…") || strings.ContainsAny(r, "\n\r") {
		t.Fatalf("reason not clipped to one bounded line: %q", r)
	}
}

// chunks cuts data at the offsets named by cuts (each byte a chunk length,
// 0 meaning 1), as a writer issuing several write(2) calls would.
func chunks(data, cuts []byte) [][]byte {
	var out [][]byte
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if i < len(cuts) {
			n = max(int(cuts[i]), 1)
		}
		n = min(n, len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// FuzzCtlHandleWrite drives the generic mechanism's handle (fusefs/ctl.go)
// with arbitrary data cut into arbitrary writes, for each file kind, and
// checks its contract against a model:
//   - Append: the handler sees only complete lines; their concatenation,
//     plus the partial line passed at flush (with a newline added), is
//     exactly what was written;
//   - Ctl: each write reaches the handler once, trailing newlines removed;
//   - Clone: the first write is the spec, later writes fail with EINVAL and
//     a reason, and the id reads back from the handle;
//   - ReadOnly: every write fails with EACCES;
//   - a failed write returns 0 bytes and its reason is read back once.
func FuzzCtlHandleWrite(f *testing.F) {
	for _, s := range []struct {
		data, cuts string
		kind       uint8
	}{
		{"{\"role\":\"user\",\"content\":\"hi\"}\n", "", uint8(ctltree.Append)},
		{"a\nb\nc", "\x01\x02\x01", uint8(ctltree.Append)},
		{"partial line", "\x04\x04", uint8(ctltree.Append)},
		{"\n\n\n", "\x01", uint8(ctltree.Append)},
		{"end agent-a\n", "", uint8(ctltree.Ctl)},
		{"steer a\nb\n\n", "\x03", uint8(ctltree.Ctl)},
		{"pid=1 name=x", "\x05", uint8(ctltree.Clone)},
		{"anything", "", uint8(ctltree.ReadOnly)},
		{"fail\n", "", uint8(ctltree.Append)},
		{"fail", "", uint8(ctltree.Ctl)},
	} {
		f.Add([]byte(s.data), []byte(s.cuts), s.kind)
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte, kind uint8) {
		k := ctltree.Kind(kind % 4)
		var got [][]byte
		// The handler fails any input holding "fail", so error paths run.
		handle := func(b []byte) error {
			if bytes.Contains(b, []byte("fail")) {
				return ctltree.Errorf(syscall.EINVAL, "refused %q", b)
			}
			got = append(got, append([]byte(nil), b...))
			return nil
		}
		file := &ctltree.File{Kind: k,
			Append: func(_ ctltree.Caller, b []byte) error { return handle(b) },
			Write:  func(_ ctltree.Caller, b []byte) error { return handle(b) },
			Clone: func(_ ctltree.Caller, b []byte) (string, error) {
				if err := handle(b); err != nil {
					return "", err
				}
				return "id-1", nil
			},
		}
		fsys := &FS{}
		h := &ctlHandle{fs: fsys, elems: []string{"x"}, file: file, caller: ctltree.Caller{Session: "default"}}
		ctx := context.Background()
		var accepted []byte // what the writer was told succeeded
		failed := false
		writes := chunks(data, cuts)
		for i, w := range writes {
			n, errno := h.Write(ctx, w, 0)
			if errno != 0 {
				if n != 0 {
					t.Fatalf("failed write reports %d bytes written", n)
				}
				failed = true
				want := map[ctltree.Kind]syscall.Errno{ctltree.ReadOnly: syscall.EACCES, ctltree.Append: syscall.EINVAL,
					ctltree.Ctl: syscall.EINVAL, ctltree.Clone: syscall.EINVAL}[k]
				if errno != want {
					t.Fatalf("kind %d write %d: errno %v, want %v", k, i, errno, want)
				}
				r, _ := h.Read(ctx, make([]byte, 4096), 0)
				b, _ := r.Bytes(make([]byte, 4096))
				if !bytes.HasPrefix(b, []byte("error: ")) || !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
					t.Fatalf("reason after a failed write: %q", b)
				}
				if recs := fsys.errs.Records(nil); len(recs) == 0 || recs[len(recs)-1].Errno != errnoName(errno) {
					t.Fatalf("the failure is not in .rubino/errors: %+v", recs)
				}
				continue
			}
			if int(n) != len(w) {
				t.Fatalf("short write %d of %d", n, len(w))
			}
			accepted = append(accepted, w...)
			switch k {
			case ctltree.Ctl:
				if len(got) == 0 || !bytes.Equal(got[len(got)-1], bytes.TrimRight(w, "\n")) {
					t.Fatalf("ctl write %q reached the handler as %q", w, got)
				}
			case ctltree.Clone:
				if i != 0 {
					t.Fatalf("a second clone write succeeded")
				}
			}
		}
		if h.Flush(ctx) != 0 {
			failed = true
		}
		switch k {
		case ctltree.Append:
			for _, l := range got {
				if len(l) == 0 || l[len(l)-1] != '\n' {
					t.Fatalf("append handler got a partial line %q", l)
				}
			}
			if !failed {
				want := append([]byte(nil), data...)
				if len(want) > 0 && want[len(want)-1] != '\n' {
					want = append(want, '\n')
				}
				if all := bytes.Join(got, nil); !bytes.Equal(all, want) {
					t.Fatalf("append lines %q, want %q", all, want)
				}
			}
		case ctltree.Clone:
			if len(got) == 1 {
				r, errno := h.Read(ctx, make([]byte, 64), 0)
				b, _ := r.Bytes(make([]byte, 64))
				if errno != 0 || string(b) != "id-1\n" {
					t.Fatalf("clone id read %q %v", b, errno)
				}
			}
		case ctltree.ReadOnly:
			if len(got) != 0 {
				t.Fatal("a read-only file's handler ran")
			}
		}
		if len(h.pending) > ctltree.MaxLine {
			t.Fatalf("pending line of %d bytes", len(h.pending))
		}
		_ = accepted
	})
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

// TestCtlWriteLimits checks the size limits of the generic mechanism with
// inputs too large for the fuzzer: a write over ctltree.MaxWrite and a line
// carried across writes over ctltree.MaxLine fail with EFBIG and a reason,
// and nothing of them reaches the handler.
func TestCtlWriteLimits(t *testing.T) {
	var got int
	file := &ctltree.File{Kind: ctltree.Append, Append: func(_ ctltree.Caller, b []byte) error { got += len(b); return nil }}
	h := &ctlHandle{fs: &FS{}, elems: []string{"messages"}, file: file}
	ctx := context.Background()
	if _, errno := h.Write(ctx, bytes.Repeat([]byte("x\n"), ctltree.MaxWrite/2+1), 0); errno != syscall.EFBIG {
		t.Fatalf("oversized write: %v", errno)
	}
	// A partial line grows across writes until it passes MaxLine.
	part := bytes.Repeat([]byte("y"), ctltree.MaxLine/2+1)
	if _, errno := h.Write(ctx, part, 0); errno != 0 {
		t.Fatalf("first half: %v", errno)
	}
	if _, errno := h.Write(ctx, part, 0); errno != syscall.EFBIG {
		t.Fatalf("line over MaxLine across writes: %v", errno)
	}
	r, _ := h.Read(ctx, make([]byte, 4096), 0)
	b, _ := r.Bytes(make([]byte, 4096))
	if !strings.HasPrefix(string(b), "error: line longer than the control-file limit") {
		t.Fatalf("reason %q", b)
	}
	if h.Flush(ctx) != 0 || got != 0 || len(h.pending) != 0 {
		t.Fatalf("the refused line reached the handler (%d bytes) or stayed pending (%d)", got, len(h.pending))
	}
	// A long line ended within the limit passes whole.
	if _, errno := h.Write(ctx, append(part, '\n'), 0); errno != 0 || got != len(part)+1 {
		t.Fatalf("line within the limit: %v, %d bytes", errno, got)
	}
}

// TestCtlErrorLogBounded checks that .rubino/errors keeps at most
// maxCtlErrors entries of at most maxCtlReason bytes each, whatever callers
// write.
func TestCtlErrorLogBounded(t *testing.T) {
	fsys := &FS{}
	huge := strings.Repeat("é\n", 100_000)
	for i := 0; i < maxCtlErrors+10; i++ {
		fsys.recordCtlError(ctltree.Caller{}, []string{"sessions", "ctl"}, syscall.EINVAL, huge)
	}
	recs := fsys.errs.Records(nil)
	if len(recs) != maxCtlErrors {
		t.Fatalf("%d entries", len(recs))
	}
	for _, e := range recs {
		if len(e.Message) > maxCtlReason+len("…") || !utf8.ValidString(e.Message) || strings.Contains(e.Message, "\n") {
			t.Fatalf("entry of %d bytes, valid UTF-8 %v", len(e.Message), utf8.ValidString(e.Message))
		}
	}
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
