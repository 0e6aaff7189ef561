package daemon

import "testing"

// TestMountType: the mount type of a directory is its longest mount
// point's, with mountinfo's octal escapes undone (backingKind names a FUSE
// backing by it, "fuse.glusterfs").
func TestMountType(t *testing.T) {
	if got := mountType("/proc/self"); got != "proc" {
		t.Fatalf("mountType(/proc/self) = %q, want proc", got)
	}
	if got := mountType("/"); got == "" {
		t.Fatal("mountType(/) is empty")
	}
	if got := unescapeMountinfo(`/a\040b\134c`); got != `/a b\c` {
		t.Fatalf("unescape: %q", got)
	}
}
