package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountType: the mount type of a directory is its longest mount
// point's, with mountinfo's octal escapes undone (backingKind names a FUSE
// backing by it, "fuse.glusterfs"): a ramfs mounted at a name with a space
// and a backslash (root only) is found under its own type.
func TestMountType(t *testing.T) {
	if got := mountType("/proc/self"); got != "proc" {
		t.Fatalf("mountType(/proc/self) = %q, want proc", got)
	}
	if got := mountType("/"); got == "" {
		t.Fatal("mountType(/) is empty")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a ramfs needs root")
	}
	dir := filepath.Join(t.TempDir(), `a b\c`)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outer := mountType(dir)
	if err := unix.Mount("ramfs", dir, "ramfs", 0, ""); err != nil {
		t.Skipf("mount ramfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if outer == "ramfs" {
		t.Skip("the test's temporary directory is on a ramfs already")
	}
	if got := mountType(dir); got != "ramfs" {
		t.Fatalf("mountType of a ramfs at %q = %q, want ramfs", dir, got)
	}
}
