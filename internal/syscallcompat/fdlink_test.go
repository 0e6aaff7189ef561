package syscallcompat

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFdLink: the link names the file's path, one longer than the first
// buffer whole, " (deleted)" once the name is gone; a closed descriptor is
// an error.
func TestFdLink(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 200), strings.Repeat("e", 200))
	if err := os.MkdirAll(filepath.Dir(long), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "f"), long} {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		fd := int(f.Fd())
		if got, err := FdLink(fd); err != nil || got != p {
			t.Fatalf("FdLink = %q, %v; want %q", got, err, p)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if got, err := FdLink(fd); err != nil || got != p+" (deleted)" {
			t.Fatalf("FdLink after the unlink = %q, %v; want %q", got, err, p+" (deleted)")
		}
		f.Close()
		if got, err := FdLink(fd); err == nil {
			t.Fatalf("FdLink of a closed descriptor = %q, want an error", got)
		}
	}
}

// BenchmarkFdLink: through the kept /proc/self/fd descriptor, and by the
// full path as before.
func BenchmarkFdLink(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	b.Run("kept-dir", func(b *testing.B) {
		for b.Loop() {
			if _, err := FdLink(fd); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full-path", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
