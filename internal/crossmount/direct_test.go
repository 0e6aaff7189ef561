package crossmount

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// TestPreadDirect: a read at an unaligned offset and length through a
// descriptor opened with O_DIRECT (an uncached backing's read handle,
// docs/DESIGN.md#uncached-view) returns the bytes asked for, as pread(2)
// does without O_DIRECT; a read past the end returns 0 bytes.
func TestPreadDirect(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	content := strings.Repeat("0123456789", 1000) // 10000 bytes: spans pages
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Skipf("the test directory's filesystem refuses O_DIRECT: %v", err)
	}
	defer syscall.Close(fd)
	if syscallcompat.FdDirect(fd) == 0 {
		t.Fatal("FdDirect: the descriptor's O_DIRECT not seen")
	}
	for _, c := range []struct{ off, n int }{{0, 3}, {3, 5000}, {4095, 2}, {9990, 100}, {10000, 10}, {20000, 10}} {
		buf := make([]byte, c.n)
		n, err := PreadDirect(fd, buf[:c.n], int64(c.off))
		if err != nil {
			t.Fatalf("off %d: %v", c.off, err)
		}
		want := ""
		if c.off < len(content) {
			want = content[c.off:min(len(content), c.off+c.n)]
		}
		if got := string(buf[:n]); got != want {
			t.Fatalf("off %d len %d: %q, want %q", c.off, c.n, got, want)
		}
	}
}
