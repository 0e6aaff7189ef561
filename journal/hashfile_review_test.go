package journal

import (
	"errors"
	"path/filepath"
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
