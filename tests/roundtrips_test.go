package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// opsTotal returns rubinofs_fuse_ops_total for op (all results).
func opsTotal(t *testing.T, m *mount, op string) float64 {
	t.Helper()
	return sumFamily(scrapeMetrics(t, m), "rubinofs_fuse_ops_total", "op", op)
}

// TestRoundTripsNoFlushReadOnly: closing a read-only descriptor costs no
// FLUSH request (FOPEN_NOFLUSH, docs/DESIGN.md#noflush-read-only), for
// guarded and unguarded files alike, while a writable descriptor still gets
// its FLUSH (the guard credits the session's writes there).
func TestRoundTripsNoFlushReadOnly(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 20; i++ {
		files[fmt.Sprintf("f%02d.txt", i)] = "hello\n"
	}
	m := newMount(t, files, nil)
	before := opsTotal(t, m, "flush")
	for i := 0; i < 20; i++ {
		if _, err := os.ReadFile(m.path(fmt.Sprintf("f%02d.txt", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := opsTotal(t, m, "flush") - before; got != 0 {
		t.Fatalf("20 read-only opens and closes sent %.0f FLUSH requests, want 0", got)
	}
	before = opsTotal(t, m, "flush")
	if err := os.WriteFile(m.path("new.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := opsTotal(t, m, "flush") - before; got < 1 {
		t.Fatalf("closing a written file sent %.0f FLUSH requests, want at least 1", got)
	}
	// The session's own write is credited at that flush: it may edit again.
	if err := os.WriteFile(m.path("new.txt"), []byte("y\n"), 0o644); err != nil {
		t.Fatalf("second write of an own file: %v", err)
	}
}

// TestXattrThroughOpenHandle: while a file is open, its extended attributes
// are read through the open descriptor (docs/DESIGN.md#xattr-probes), so
// fgetxattr and flistxattr on a descriptor of a file unlinked while open
// answer as natively instead of ENOENT.
func TestXattrThroughOpenHandle(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "data\n", "other.txt": "other\n"}, func(c *daemon.Config) {
		c.Guard.Mode = guard.ModeOff
	})
	if err := unix.Setxattr(m.path("f.txt"), "user.k", []byte("v1"), 0); err != nil {
		t.Skipf("backing file system without user xattrs: %v", err)
	}
	f, err := os.Open(m.path("f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(m.path("f.txt")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := unix.Fgetxattr(int(f.Fd()), "user.k", buf)
	if err != nil || string(buf[:n]) != "v1" {
		t.Fatalf("fgetxattr of a file unlinked while open: %q, %v; want \"v1\"", buf[:max(n, 0)], err)
	}
	n, err = unix.Flistxattr(int(f.Fd()), buf)
	if err != nil || !strings.Contains(string(buf[:max(n, 0)]), "user.k") {
		t.Fatalf("flistxattr of a file unlinked while open: %q, %v", buf[:max(n, 0)], err)
	}
	if _, err := unix.Fgetxattr(int(f.Fd()), "user.none", buf); err != unix.ENODATA {
		t.Fatalf("fgetxattr of a missing attribute: %v, want ENODATA", err)
	}
}
