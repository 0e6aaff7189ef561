package guard

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestHashBoundFingerprintsLargeFiles: a file over MaxBytes is never
// opened; its hash is its stat's fingerprint, which every field of the
// stat key moves. A file at the bound is read and hashed as bytes.
func TestHashBoundFingerprintsLargeFiles(t *testing.T) {
	c := NewHashCache(0, 0, nil)
	c.MaxBytes = 10
	never := func() (*os.File, error) {
		t.Fatal("a file over the bound was opened")
		return nil, nil
	}
	st := Stat{ID: FileID{Dev: 1, Ino: 2}, Size: 11, MtimeNs: 3, CtimeNs: 4, Mode: syscall.S_IFREG | 0o644}
	h, err := c.Sum(st, never)
	if err != nil || h.IsZero() {
		t.Fatalf("Sum over the bound = %v, %v", h, err)
	}
	if again, _, _ := c.sumAt(st, never); again != h {
		t.Errorf("sumAt of the same stat = %v, want %v", again, h)
	}
	for name, moved := range map[string]Stat{
		"dev": func() Stat { s := st; s.ID.Dev++; return s }(), "ino": func() Stat { s := st; s.ID.Ino++; return s }(),
		"size": func() Stat { s := st; s.Size++; return s }(), "mtime": func() Stat { s := st; s.MtimeNs++; return s }(),
		"ctime": func() Stat { s := st; s.CtimeNs++; return s }(),
	} {
		if got, _ := c.Sum(moved, never); got == h {
			t.Errorf("a stat with another %s has the same fingerprint", name)
		}
	}
	if n := c.Stats().Fingerprinted; n != 7 {
		t.Errorf("Fingerprinted = %d, want 7", n)
	}

	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	var sys syscall.Stat_t
	if err := syscall.Stat(p, &sys); err != nil {
		t.Fatal(err)
	}
	got, err := c.Sum(StatOf(&sys), func() (*os.File, error) { return os.Open(p) })
	if err != nil || got != HashBytes([]byte("0123456789")) {
		t.Errorf("Sum of a file at the bound = %v, %v; want the hash of its bytes", got, err)
	}
}
