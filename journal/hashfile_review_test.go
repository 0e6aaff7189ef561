package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHashFileFifoWithWriter: a regular file swapped for a fifo between a
// caller's fstatat and HashFile (another session racing a merge's plan),
// its write end held open and silent: HashFile refuses it (EINVAL) and
// returns, where reading it waited on the poller for as long as the
// writer liked.
func TestHashFileFifoWithWriter(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "f")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := unix.Open(fifo, unix.O_RDWR|unix.O_CLOEXEC, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(w)
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	done := make(chan error, 1)
	go func() { _, err := HashFile(dfd, "f"); done <- err }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a failsafe, not a timing
		t.Fatal("HashFile of a fifo with a silent writer hung")
	}
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("HashFile of a fifo: %v, want EINVAL", err)
	}
}

// TestWriteFileDiffBounded: two 40,000-line files differing in every
// other line (go-difflib took 26 s at 20,000 lines and grows as the
// square) are diffed in bounded work, as one hunk that git apply turns
// into the new file.
func TestWriteFileDiffBounded(t *testing.T) {
	var a, b strings.Builder
	for i := 0; i < 40000; i++ {
		fmt.Fprintf(&a, "line %d\n", i)
		if i%2 == 0 {
			fmt.Fprintf(&b, "LINE %d\n", i)
		} else {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	b.WriteString("no newline")
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- WriteFileDiff(&out, "f.txt", FileSide{Exists: true, Mode: 0o100644, Content: []byte(a.String())},
			FileSide{Exists: true, Mode: 0o100644, Content: []byte(b.String())})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a failsafe, not a timing
		t.Fatal("WriteFileDiff of 40,000 lines, every other changed, did not return")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(a.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.diff"), out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to apply the diff")
	}
	cmd := exec.Command("git", "apply", "p.diff")
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\n%.300s", err, msg, out.String())
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(got) != b.String() {
		t.Fatalf("git apply of the bounded diff gave another file (%d bytes, want %d)", len(got), b.Len())
	}
}
