package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
)

// hashCounts returns .rubino/status's counts.hash_cache.
func (m *mount) hashCounts() map[string]any {
	m.t.Helper()
	c, _ := m.status()["counts"].(map[string]any)
	h, ok := c["hash_cache"].(map[string]any)
	if !ok {
		m.t.Fatalf("no counts.hash_cache in status: %v", c)
	}
	return h
}

// TestOwnWriteDecidedWithoutReadBack: where the backing filesystem gives
// every change after a stat its own ctime (docs/DESIGN.md#fine-ctime, this
// machine's ext4), the session's next decision on files it wrote through
// the mount reads none of them back: an overwrite and a removal hash
// nothing, a file `sed -i` renamed into place included. Elsewhere each is
// read once, as the racy rule wants. Either
// way an outside change of the same size after the write is refused
// (the watcher is off: only the stat key and the hash can tell), and a
// change between two writes of one handle makes its credit read the file
// back rather than trust the bytes it wrote.
func TestOwnWriteDecidedWithoutReadBack(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) { c.Cache.Watch = false })
	fine, _ := m.hashCounts()["fine_ctime"].(bool)
	m.mustSh("printf 'first\\n' > own.txt && mkdir d && printf 'x\\n' > d/a && printf 'y\\n' > d/b &&" +
		" printf 'z\\n' > s.txt && sed -i s/z/w/ s.txt")
	misses := func() float64 { return m.hashCounts()["misses"].(float64) }
	before := misses()
	m.mustSh("printf 'second\\n' > own.txt && rm -r d s.txt")
	want := 4.0
	if fine {
		want = 0
	}
	if got := misses() - before; got != want {
		t.Fatalf("fine_ctime %v: the decisions on 4 own files hashed %v of them, want %v", fine, got, want)
	}

	m.mustSh("printf 'aaaa\\n' > t.txt")
	if err := os.WriteFile(m.backing("t.txt"), []byte("bbbb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.mustFail("printf 'cccc\\n' > t.txt")
	if got := m.readBacking("t.txt"); got != "bbbb\n" {
		t.Fatalf("the refused overwrite left %q", got)
	}

	// One handle writes twice; between its writes the file changes outside.
	ready, goOn := filepath.Join(m.tmp, "ready"), filepath.Join(m.tmp, "go")
	for _, p := range []string{ready, goOn} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hc := m.hashCounts()
	streamed, readBack := hc["streamed"].(float64), hc["read_back_bytes"].(float64)
	done := make(chan error, 1)
	go func() {
		out, err := m.sh("exec 3>i.txt && printf aaaa >&3 && echo ready > " + shq(ready) +
			" && read x < " + shq(goOn) + " && printf bbbb >&3 && exec 3>&-")
		if err != nil {
			err = &shError{err, out}
		}
		done <- err
	}()
	t.Cleanup(func() { // a test failed before the script may go on: let it end
		if fd, err := unix.Open(goOn, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			unix.Write(fd, []byte("go\n"))
			unix.Close(fd)
		}
	})
	readyCh := make(chan error, 1)
	go func() {
		b, err := os.ReadFile(ready)
		if err == nil && string(b) != "ready\n" {
			err = fmt.Errorf("read %q from the script", b)
		}
		readyCh <- err
	}()
	select { // the first write is in, or the script ended without it
	case err := <-readyCh:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		if fd, e := unix.Open(ready, unix.O_WRONLY|unix.O_NONBLOCK, 0); e == nil {
			unix.Close(fd) // the reader's open returns
		}
		t.Fatalf("the script ended before its first write: %v", err)
	}
	f, err := os.OpenFile(m.backing("i.txt"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("Z"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	past := time.Unix(1_000_000, 0) // its stat differs on any clock
	if err := os.Chtimes(m.backing("i.txt"), past, past); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goOn, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := m.readBacking("i.txt"); got != "Zaaabbbb" {
		t.Fatalf("i.txt holds %q", got)
	}
	hc = m.hashCounts()
	// The shell's own FLUSHes in between may credit the first write from
	// its bytes; the last credit must read the file back.
	if d := hc["read_back_bytes"].(float64) - readBack; d != 8 {
		t.Fatalf("the interleaved handle's credit read back %v bytes, want 8 (%v streamed since)", d, hc["streamed"].(float64)-streamed)
	}
}

// shError is a failed script with its output.
type shError struct {
	err error
	out string
}

func (e *shError) Error() string { return e.err.Error() + "\n" + e.out }
