package branch

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"b": true, "agent-1.fix_x": true, "": false, ".": false, "..": false,
		"a/b": false, "-x": false, string(make([]byte, 65)): false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestCreateListChangedRemove mounts a real overlay (root only): a copied
// up file, a new directory and a whiteout count as three changed paths;
// Remove unmounts it and leaves no directory.
func TestCreateListChangedRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting an overlay needs root")
	}
	tmp := t.TempDir()
	lower := filepath.Join(tmp, "ws")
	os.MkdirAll(filepath.Join(lower, "d"), 0o755)
	os.WriteFile(filepath.Join(lower, "d", "f"), []byte("lower\n"), 0o644)
	os.WriteFile(filepath.Join(lower, "g"), []byte("g\n"), 0o644)
	state := filepath.Join(tmp, "state")
	m := Meta{Name: "b", Created: time.Now().UTC(), Workspace: lower, Mount: lower, Owner: 0}
	b, err := Create(state, m, lower)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Remove() })
	if _, err := Create(state, m, lower); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	if !b.OverlayMounted() || b.DaemonMounted() {
		t.Fatalf("overlay mounted %v, daemon mounted %v", b.OverlayMounted(), b.DaemonMounted())
	}
	if n, err := b.Changed(); n != 0 || err != nil {
		t.Fatalf("Changed of a new branch = %d, %v", n, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(b.Merged(), "d", "f"), []byte("upper\n"), 0o644))
	must(os.Mkdir(filepath.Join(b.Merged(), "new"), 0o755))
	must(os.Remove(filepath.Join(b.Merged(), "g")))
	if n, err := b.Changed(); n != 3 || err != nil {
		t.Fatalf("Changed = %d, %v; want 3 (d/f, new, g's whiteout)", n, err)
	}
	if got, _ := os.ReadFile(filepath.Join(lower, "d", "f")); string(got) != "lower\n" {
		t.Fatalf("the lower layer changed: %q", got)
	}
	bs, err := List(state)
	if err != nil || len(bs) != 1 || bs[0].Meta.Name != "b" || bs[0].Meta.Workspace != lower {
		t.Fatalf("List = %+v, %v", bs, err)
	}
	must(b.SetDaemonPid(42))
	if b.DaemonPid() != 42 {
		t.Fatalf("DaemonPid = %d", b.DaemonPid())
	}
	must(b.Remove())
	if b.OverlayMounted() {
		t.Fatal("overlay still mounted after Remove")
	}
	if _, err := Open(state, "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open after Remove: %v, want ErrNotFound", err)
	}
}
