package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// phantomReads is how many reads the reader makes while refused writes are
// attempted: the test is bounded by this count, never by time.
const phantomReads = 20000

// phantomWriter is the refused writer, run in its own guard session. It
// opens the file for writing ("unread": without having read it, write-only;
// "rdwr": the same, read-write; "stale":
// after reading it and writing once, allowed, then waiting until the test
// has had another session rewrite it), then writes 4 KiB blocks of 'X'
// over the file, round robin over its four pages, until the test tells it
// to stop. Every write must fail with EACCES. Its steps are reported and
// awaited through fifos, so the test is ordered by events.
const phantomWriter = `
import os, sys, errno, threading
path, mode, step, goahead, stop, result = sys.argv[1:7]
def say(s):
    with open(step, "w") as f: f.write(s)
if mode == "stale":
    fd = os.open(path, os.O_RDWR)
    os.read(fd, 1 << 20)
    os.pwrite(fd, b"W" * 4096, 0)
    say("wrote")
    open(goahead).read()
else:
    try:
        fd = os.open(path, os.O_RDWR if mode == "rdwr" else os.O_WRONLY)
    except OSError as e:
        say("open failed: " + errno.errorcode[e.errno])
        sys.exit(1)
done = threading.Event()
threading.Thread(target=lambda: (open(stop).read(), done.set()), daemon=True).start()
refused, other, i = 0, [], 0
while not done.is_set():
    try:
        os.pwrite(fd, b"X" * 4096, (i % 4) * 4096)
        other.append("written")
    except OSError as e:
        if e.errno == errno.EACCES:
            refused += 1
        else:
            other.append(errno.errorcode[e.errno])
    if i == 0:
        say("looping")
    i += 1
with open(result, "w") as f: f.write("refused=%d other=%s" % (refused, ",".join(other[:5])))
`

// TestPhantomReads: one session reads a file in a loop while another keeps
// attempting refused 4 KiB writes, through a handle of a file it never read
// ("unread") or through a handle whose right went stale when a third
// session rewrote the file ("stale"). A refused write never reaches the
// backing file, and it must never reach a reader either: every read returns
// exactly the bytes on disk (no refused byte, no mix of old and refused
// bytes) and no read fails with EIO. docs/DESIGN.md#refused-writes
func TestPhantomReads(t *testing.T) {
	v1 := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB: four pages
	for _, mode := range []string{"unread", "stale"} {
		t.Run(mode, func(t *testing.T) {
			m := newMount(t, map[string]string{"f": string(v1)}, nil)
			a, w := m.startAgent("agent-a"), m.startAgent("writer")
			want := v1
			step, goahead, stop, result := startPhantomWriter(t, m, w, mode)
			readStep := func(want string) {
				t.Helper()
				got, err := os.ReadFile(step)
				if err != nil || string(got) != want {
					t.Fatalf("writer step %q, %v; want %q", got, err, want)
				}
			}
			if mode == "stale" {
				readStep("wrote")
				// Agent A rewrites the whole file: the writer's handle
				// loses its right (its session's read is stale now).
				want = bytes.Repeat([]byte("ABCDEFGHIJKLMNOP"), 1024)
				src := m.tmp + "/v3"
				if err := os.WriteFile(src, want, 0o644); err != nil {
					t.Fatal(err)
				}
				a.ok("cat f >/dev/null && cat " + shq(src) + " > f")
				if err := os.WriteFile(goahead, []byte("go\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			readStep("looping")

			r, err := os.Open(m.path("f"))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			phantomRace(t, m, r, nil, want, stop, result)
		})
	}
}

// phantomRace reads want's file through r phantomReads times (every
// eighth time through mapped instead, when it is not nil) while the
// phantomWriter keeps attempting refused writes, then stops the writer
// (fifos stop and result) and checks that every write was refused with
// EACCES, that the backing file is want, and that no read returned a byte
// that is not on disk or failed with EIO.
func phantomRace(t *testing.T, m *mount, r *os.File, mapped, want []byte, stop, result string) {
	t.Helper()
	buf := make([]byte, len(want)+1)
	var phantom, eio int
	var sample string
	for i := 0; i < phantomReads; i++ {
		n, err := r.ReadAt(buf, 0)
		switch {
		case errors.Is(err, syscall.EIO):
			eio++
			continue
		case err != nil && !errors.Is(err, io.EOF):
			t.Fatalf("read %d: %d bytes, %v", i, n, err)
		}
		got := buf[:n]
		if mapped != nil && i%8 == 0 {
			got = mapped
		}
		if !bytes.Equal(got, want) {
			phantom++
			if sample == "" {
				sample = phantomDiff(got, want)
			}
		}
	}
	if err := os.WriteFile(stop, []byte("stop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("writer: %s; reads: %d, phantom %d, EIO %d", res, phantomReads, phantom, eio)
	if !strings.HasPrefix(string(res), "refused=") || !strings.HasSuffix(string(res), " other=") || strings.HasPrefix(string(res), "refused=0 ") {
		t.Errorf("writer: %s; want only EACCES, at least once", res)
	}
	if got := m.readBacking("f"); got != string(want) {
		t.Errorf("a refused write reached the backing file: %s", phantomDiff([]byte(got), want))
	}
	if phantom != 0 || eio != 0 {
		t.Errorf("%d of %d reads returned bytes never on disk (first: %s), %d failed with EIO",
			phantom, phantomReads, sample, eio)
	}
}

// phantomDiff describes how got differs from want: its length and the
// first differing offset with the bytes there.
func phantomDiff(got, want []byte) string {
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			end := min(i+8, len(got))
			return fmt.Sprintf("%d bytes, first difference at %d: %q", len(got), i, got[i:end])
		}
	}
	return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
}

// coherentWriter rewrites the whole file through one handle, after reading
// it (every write is allowed), once per round: round k fills it with the
// letter k (mod 26). After each write returns it reports the round on the
// step fifo and waits for the test's go-ahead on the other.
const coherentWriter = `
import os, sys
path, step, goahead, rounds, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
fd = os.open(path, os.O_RDWR)
os.read(fd, 1 << 20)
out, inp = open(step, "w"), open(goahead)
for k in range(rounds):
    assert os.pwrite(fd, bytes([97 + k % 26]) * size, 0) == size
    out.write("%d\n" % k); out.flush()
    inp.readline()
out.write("done\n"); out.flush()
`

// TestPhantomCacheAfterAllowedWrite: the handles that may be refused write
// around the page cache (docs/DESIGN.md#refused-writes), and the watcher
// ignores the daemon's own changes, so no notification drops a reader's
// cached pages after an allowed write: the kernel must. While one session
// rewrites a file round after round, another keeps reading it through one
// descriptor (its page cache kept across opens); each time a write has
// returned, a read must show exactly that round's bytes, never a page
// cached from before the write.
func TestPhantomCacheAfterAllowedWrite(t *testing.T) {
	const rounds, size = 300, 16384
	m := newMount(t, map[string]string{"f": strings.Repeat("-", size)}, nil)
	w := m.startAgent("writer")
	fifo := func(name string) string {
		p := m.tmp + "/" + name
		if err := exec.Command("mkfifo", p).Run(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	step, goahead := fifo("step"), fifo("go")
	script := m.tmp + "/writer.py"
	if err := os.WriteFile(script, []byte(coherentWriter), 0o644); err != nil {
		t.Fatal(err)
	}
	w.ok(fmt.Sprintf("python3 %s f %s %s %d %d &", shq(script), shq(step), shq(goahead), rounds, size))
	sf, err := os.Open(step)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	steps := bufio.NewReader(sf)
	gf, err := os.OpenFile(goahead, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()

	r, err := os.Open(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The racing reader re-reads the file all along, so that pages are
	// being read in while the writes are under way.
	stop := make(chan struct{})
	raced := make(chan int)
	go func() {
		buf, n := make([]byte, size), 0
		for {
			select {
			case <-stop:
				raced <- n
				return
			default:
			}
			r.ReadAt(buf, 0)
			n++
		}
	}()
	buf := make([]byte, size+1)
	var stale int
	var sample string
	for k := 0; ; k++ {
		line, err := steps.ReadString('\n')
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
		if line == "done\n" {
			if k != rounds {
				t.Fatalf("writer done after %d rounds", k)
			}
			break
		}
		if line != fmt.Sprintf("%d\n", k) {
			t.Fatalf("writer step %q, want round %d", line, k)
		}
		want := bytes.Repeat([]byte{byte('a' + k%26)}, size)
		n, err := r.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("round %d: %v", k, err)
		}
		if !bytes.Equal(buf[:n], want) {
			stale++
			if sample == "" {
				sample = fmt.Sprintf("round %d: %s", k, phantomDiff(buf[:n], want))
			}
		}
		if _, err := gf.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	t.Logf("%d rounds, %d racing reads, %d stale", rounds, <-raced, stale)
	if stale != 0 {
		t.Errorf("%d of %d reads after an allowed write returned older bytes (first: %s)", stale, rounds, sample)
	}
}

// TestPhantomSharedMmap: a handle that may write bypasses the page cache
// for read(2) and write(2) (docs/DESIGN.md#refused-writes), yet a shared
// writable mapping of it works as on a cached handle: the session maps the
// file it read, stores through the mapping and msyncs, and the bytes reach
// the backing file and a reader through the mount.
func TestPhantomSharedMmap(t *testing.T) {
	m := newMount(t, map[string]string{"f": "0123456789\n"}, nil)
	a := m.startAgent("agent-a")
	script := m.tmp + "/mapper.py"
	if err := os.WriteFile(script, []byte(`
import mmap, os
fd = os.open("f", os.O_RDWR)
os.read(fd, 100)
mm = mmap.mmap(fd, 0)
mm[0:5] = b"HELLO"
mm.flush()
mm.close()
os.close(fd)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	a.ok("python3 " + shq(script))
	if got := m.readBacking("f"); got != "HELLO56789\n" {
		t.Fatalf("backing after the mapped store: %q", got)
	}
	if got, err := os.ReadFile(m.path("f")); err != nil || string(got) != "HELLO56789\n" {
		t.Fatalf("read through the mount: %q, %v", got, err)
	}
}

// startPhantomWriter starts phantomWriter on f in mode as w, in the
// background, with its four FIFOs made under m.tmp, and returns their
// paths: step, goahead, stop and result.
func startPhantomWriter(t *testing.T, m *mount, w *agent, mode string) (step, goahead, stop, result string) {
	t.Helper()
	fifo := func(name string) string {
		p := m.tmp + "/" + name
		if err := exec.Command("mkfifo", p).Run(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	step, goahead, stop, result = fifo("step"), fifo("go"), fifo("stop"), fifo("result")
	script := m.tmp + "/writer.py"
	if err := os.WriteFile(script, []byte(phantomWriter), 0o644); err != nil {
		t.Fatal(err)
	}
	w.ok(fmt.Sprintf("python3 %s f %s %s %s %s %s &", shq(script), mode, shq(step), shq(goahead), shq(stop), shq(result)))
	return step, goahead, stop, result
}
