package tests

import (
	"fmt"
	"os"
	"testing"
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
