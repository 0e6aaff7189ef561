package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLateCloserClosesEverything: every descriptor handed to a lateCloser
// is closed by the time close returns, more than its queue holds
// included, and one handed over after close is closed at once.
func TestLateCloserClosesEverything(t *testing.T) {
	dir := t.TempDir()
	var c lateCloser
	var fds []int
	for i := 0; i < 3*lateCloseQueue; i++ {
		p := filepath.Join(dir, "f")
		if i == 0 {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		c.closeLater(fd)
	}
	c.close()
	c.close() // idempotent
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Fatalf("descriptor %d still open after close (%v)", fd, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.closeLater(fd)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Fatalf("a descriptor handed over after close stayed open (%v)", err)
	}
}
