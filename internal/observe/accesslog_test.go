package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
)

// TestRecordAllocs checks the hot path: timing and counting a request,
// also one that fails, allocates nothing while no access-log reader is
// attached.
func TestRecordAllocs(t *testing.T) {
	w := &rawWrap{m: newFSMetrics(nil)}
	w.done(opLookup, time.Now(), fuse.ENOENT) // first ENOENT of lookup resolves its counter
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := w.done(opGetattr, time.Now(), fuse.OK); ok {
			t.Fatal("a line is wanted with no reader attached")
		}
		w.done(opLookup, time.Now(), fuse.ENOENT)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request, want 0", allocs)
	}
}

// BenchmarkRecord measures the per-request cost of rawWrap's bookkeeping
// with no access-log reader.
func BenchmarkRecord(b *testing.B) {
	w := &rawWrap{m: newFSMetrics(nil)}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.done(opGetattr, time.Now(), fuse.OK)
		}
	})
}

// TestAccessLogNeverBlocks checks that publishing to a reader whose buffer
// is full drops the line instead of blocking, and that the reader's next
// read reports the loss first, then the oldest lines, whole.
func TestAccessLogNeverBlocks(t *testing.T) {
	l := newAccessLog()
	r := mustOpen(t, l)
	defer r.Close()
	const extra = 10
	for i := range accessLogBuffer + extra {
		l.publish(fmt.Appendf(nil, "line %d\n", i), "default", 0) // must not block
	}
	buf := make([]byte, 64<<10)
	n, err := r.Read(context.Background(), buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")
	if !strings.Contains(lines[0], fmt.Sprintf(" #dropped %d lines", extra)) {
		t.Fatalf("first line %q, want a report of %d dropped lines", lines[0], extra)
	}
	if lines[1] != "line 0" {
		t.Errorf("second line %q, want the oldest line", lines[1])
	}
	for _, ln := range lines[1:] {
		if !strings.HasPrefix(ln, "line ") {
			t.Fatalf("cut or foreign line %q", ln)
		}
	}
}

// TestAccessLogShortReads checks that a line longer than the read buffer
// is delivered in pieces, and that a line that does not fit after others
// waits whole for the next read.
func TestAccessLogShortReads(t *testing.T) {
	l := newAccessLog()
	r := mustOpen(t, l)
	defer r.Close()
	l.publish([]byte("abcdefghij\n"), "default", 0)
	l.publish([]byte("0123\n"), "default", 0)
	l.publish([]byte("xyz\n"), "default", 0)
	var got []string
	buf := make([]byte, 8)
	for range 4 {
		n, err := r.Read(context.Background(), buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(buf[:n]))
	}
	want := []string{"abcdefgh", "ij\n", "0123\n", "xyz\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reads %q, want %q", got, want)
	}
}

// TestAccessLogEnds checks that a blocked read returns on the reader's
// close (io.EOF), on the log's close (io.EOF) and on its context's end.
func TestAccessLogEnds(t *testing.T) {
	l := newAccessLog()
	buf := make([]byte, 128)
	for _, c := range []struct {
		name string
		end  func(r *alogReader, cancel context.CancelFunc)
		want error
	}{
		{"reader closed", func(r *alogReader, _ context.CancelFunc) { r.Close() }, io.EOF},
		{"interrupted", func(_ *alogReader, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"log closed", func(*alogReader, context.CancelFunc) { l.close() }, io.EOF},
	} {
		r := mustOpen(t, l)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			for {
				n, err := r.Read(ctx, buf)
				if err != nil || !strings.HasSuffix(string(buf[:n]), "#heartbeat\n") {
					errc <- err
					return
				}
			}
		}()
		c.end(r, cancel)
		if err := <-errc; !errors.Is(err, c.want) {
			t.Errorf("%s: Read returned %v, want %v", c.name, err, c.want)
		}
		cancel()
		r.Close()
		if l.active() {
			t.Errorf("%s: a closed reader is still attached", c.name)
		}
	}
}

// TestAccessLogNonBlockingFeed checks the feed of an O_NONBLOCK reader
// (ctltree.NonBlocking): with nothing waiting it is ErrWouldBlock at once
// (no heartbeat), waiting lines come out whole, and an ended feed is
// io.EOF, not EAGAIN.
func TestAccessLogNonBlockingFeed(t *testing.T) {
	l := newAccessLog()
	r := mustOpen(t, l)
	nb := ctltree.WithNonBlocking(context.Background())
	buf := make([]byte, 4096)
	if n, err := r.Read(nb, buf); !errors.Is(err, ctltree.ErrWouldBlock) || n != 0 {
		t.Fatalf("empty feed: %d %v, want ErrWouldBlock", n, err)
	}
	l.publish([]byte("one\n"), "default", 0)
	l.publish([]byte("two\n"), "default", 0)
	if n, err := r.Read(nb, buf); err != nil || string(buf[:n]) != "one\ntwo\n" {
		t.Fatalf("waiting lines: %q %v", buf[:n], err)
	}
	if _, err := r.Read(nb, buf); !errors.Is(err, ctltree.ErrWouldBlock) {
		t.Fatalf("drained feed: %v, want ErrWouldBlock", err)
	}
	r.Close()
	if _, err := r.Read(nb, buf); !errors.Is(err, io.EOF) {
		t.Fatalf("closed feed: %v, want io.EOF", err)
	}
}

// mustOpen attaches a reader of uid 0 that sees every line.
func mustOpen(t *testing.T, l *accessLog) *alogReader {
	t.Helper()
	r, err := l.open(0, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAccessLogReadersBounded: one uid attaches at most
// accessLogReadersPerUID readers, all together at most accessLogReaders
// (EMFILE past either), a closed reader frees its place, and the owner or
// root outside every session attaches past the total, within its own
// share.
func TestAccessLogReadersBounded(t *testing.T) {
	l := newAccessLog()
	defer l.close()
	emfile := func(uid uint32, exempt bool) {
		t.Helper()
		r, err := l.open(uid, exempt, nil)
		if ctltree.ErrnoOf(err) != syscall.EMFILE {
			t.Fatalf("uid %d (exempt %v): reader attached past a bound (err %v)", uid, exempt, err)
		}
		if r != nil {
			t.Fatal("a refused open returned a reader")
		}
	}
	var first *alogReader
	for uid := uint32(1000); uid < 1000+accessLogReaders/accessLogReadersPerUID; uid++ {
		for range accessLogReadersPerUID {
			r, err := l.open(uid, false, nil)
			if err != nil {
				t.Fatalf("uid %d: %v", uid, err)
			}
			if first == nil {
				first = r
			}
		}
	}
	emfile(1000, false)
	emfile(2000, false) // a new uid: past the total
	r, err := l.open(0, true, nil)
	if err != nil {
		t.Fatalf("root outside every session, past the total: %v", err)
	}
	r.Close()
	first.Close()
	if _, err := l.open(2000, false, nil); err != nil {
		t.Fatalf("after a reader closed: %v", err)
	}
	for range accessLogReadersPerUID {
		if _, err := l.open(0, true, nil); err != nil {
			t.Fatal(err)
		}
	}
	emfile(0, true) // exempt from the total, not from its own share
}
