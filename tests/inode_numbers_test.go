package tests

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestInodeNumbers: every name through the mount, the mount's root
// included, reports its backing file's inode number (go-fuse's default
// root reports 0, which `ls -i` prints as "?"), and `..` of a top-level
// directory is the root's.
func TestInodeNumbers(t *testing.T) {
	m := newMount(t, map[string]string{"f": "x\n", "sub/g": "y\n"}, nil)
	for _, rel := range []string{"", "f", "sub", "sub/g", "sub/.."} {
		var through, backing syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(m.mnt, rel), &through); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Lstat(filepath.Join(m.ws, rel), &backing); err != nil {
			t.Fatal(err)
		}
		if through.Ino == 0 || through.Ino != backing.Ino {
			t.Errorf("%q: inode %d through the mount, %d in the workspace", rel, through.Ino, backing.Ino)
		}
	}
	out, err := exec.Command("ls", "-id", m.mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("ls -id: %v\n%s", err, out)
	}
	var root syscall.Stat_t
	if err := syscall.Stat(m.ws, &root); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(out)); len(f) == 0 || f[0] != strconv.FormatUint(root.Ino, 10) {
		t.Errorf("ls -id of the mount printed %q, want the workspace root's inode %d", out, root.Ino)
	}
}
