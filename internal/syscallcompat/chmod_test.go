package syscallcompat

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestChmodAtBothWays: ChmodAt changes a file's and a directory's mode
// (setuid and sticky bits included) and refuses a symlink with EOPNOTSUPP,
// leaving its target alone, with Fchmodat2(2) and with its fallback.
func TestChmodAtBothWays(t *testing.T) {
	dir := t.TempDir()
	f, sub := filepath.Join(dir, "f"), filepath.Join(dir, "sub")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	d := Dir{FD: fd}
	defer noFchmodat2.Store(false)
	mode := func(p string) uint32 {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Mode & 07777
	}
	for i, fallback := range []bool{false, true} {
		noFchmodat2.Store(fallback)
		want := []uint32{0o4755, 0o600}[i]
		if errno := ChmodAt(d, "f", want); errno != 0 || mode(f) != want {
			t.Errorf("fallback=%v: chmod f: %v, mode %o, want %o", fallback, errno, mode(f), want)
		}
		if errno := ChmodAt(d, "sub", 0o1777); errno != 0 || mode(sub) != 0o1777 {
			t.Errorf("fallback=%v: chmod sub: %v, mode %o", fallback, errno, mode(sub))
		}
		if errno := ChmodAt(d, "l", 0o777); errno != syscall.EOPNOTSUPP || mode(f) != want {
			t.Errorf("fallback=%v: chmod of a symlink: %v (want EOPNOTSUPP), target mode %o", fallback, errno, mode(f))
		}
		if errno := ChmodAt(d, "missing", 0o644); errno != syscall.ENOENT {
			t.Errorf("fallback=%v: chmod missing: %v, want ENOENT", fallback, errno)
		}
	}
}
