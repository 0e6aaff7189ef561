package ctlfs

// Fuzz target of the generic control-file mechanism (render.go): how
// writes are cut into lines and commands. Seeds are committed under
// testdata/fuzz/; `go test` runs them as regular tests. Search further
// with, e.g.:
//
//	go test -run='^$' -fuzz='^FuzzCtlHandleWrite$' -fuzztime=25s ./internal/ctlfs

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
)

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

// FuzzCtlHandleWrite drives the generic mechanism's handle (render.go)
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
		tree := &Tree{errs: new(ctltree.ErrorRing)}
		h := &ctlHandle{t: tree, elems: []string{"x"}, file: file, caller: ctltree.Caller{Session: "default"}}
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
				if recs := tree.errs.Records(nil); len(recs) == 0 || recs[len(recs)-1].Errno != ctltree.ErrnoName(errno) {
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

// TestCtlWriteLimits checks the size limits of the generic mechanism with
// inputs too large for the fuzzer: a write over ctltree.MaxWrite and a line
// carried across writes over ctltree.MaxLine fail with EFBIG and a reason,
// and nothing of them reaches the handler.
func TestCtlWriteLimits(t *testing.T) {
	var got int
	file := &ctltree.File{Kind: ctltree.Append, Append: func(_ ctltree.Caller, b []byte) error { got += len(b); return nil }}
	h := &ctlHandle{t: &Tree{errs: new(ctltree.ErrorRing)}, elems: []string{"messages"}, file: file}
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
// ctltree.MaxErrors entries of at most ctltree.MaxReason bytes each, whatever callers
// write.
func TestCtlErrorLogBounded(t *testing.T) {
	tree := &Tree{errs: new(ctltree.ErrorRing)}
	huge := strings.Repeat("é\n", 100_000)
	for i := 0; i < ctltree.MaxErrors+10; i++ {
		tree.recordError(ctltree.Caller{}, []string{"sessions", "ctl"}, syscall.EINVAL, huge)
	}
	recs := tree.errs.Records(nil)
	if len(recs) != ctltree.MaxErrors {
		t.Fatalf("%d entries", len(recs))
	}
	for _, e := range recs {
		if len(e.Message) > ctltree.MaxReason+len("…") || !utf8.ValidString(e.Message) || strings.Contains(e.Message, "\n") {
			t.Fatalf("entry of %d bytes, valid UTF-8 %v", len(e.Message), utf8.ValidString(e.Message))
		}
	}
}
