package mounttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestDaemonFdsAndDiff: a descriptor opened into a root is listed, and
// DiffFds reports it against the listing taken before it was opened.
func TestDaemonFdsAndDiff(t *testing.T) {
	root := t.TempDir()
	before, err := DaemonFds(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(root, "a", "f"), "x"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "a", "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	after, err := DaemonFds(root)
	if err != nil {
		t.Fatal(err)
	}
	leaked := DiffFds(before, after)
	if len(leaked) != 1 || leaked[0] != fdOf(f)+" -> "+f.Name() {
		t.Fatalf("DiffFds = %v, want the one open file", leaked)
	}
	if got := DiffFds(after, after); len(got) != 0 {
		t.Errorf("DiffFds of equal listings = %v", got)
	}
}

// TestShq: a quoted string reaches the shell as one word, quotes included.
func TestShq(t *testing.T) {
	s := `it's a "path" $HOME`
	out, err := exec.Command("/bin/sh", "-c", "printf %s "+Shq(s)).Output()
	if err != nil || string(out) != s {
		t.Fatalf("sh printed %q, %v; want %q", out, err, s)
	}
}

// fdOf is f's descriptor number as /proc/self/fd names it.
func fdOf(f *os.File) string { return strconv.Itoa(int(f.Fd())) }
