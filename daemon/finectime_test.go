package daemon

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFineCtimeProbe: the probe says no for a filesystem type without
// multigrain timestamps (procfs) and for a directory it cannot make a
// file in, and on the test's own directory it agrees with the kernel's
// version and the filesystem's type: multigrain on ext4, XFS, btrfs and
// tmpfs since Linux 6.13.
func TestFineCtimeProbe(t *testing.T) {
	if fineCtime("/proc", "") {
		t.Fatal("procfs probed as fine-grained")
	}
	if fineCtime(t.TempDir()+"/missing", "") {
		t.Fatal("a missing directory probed as fine-grained")
	}
	dir := t.TempDir()
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	want := multigrainTypes[uint32(sfs.Type)] && kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 13)
	if got := fineCtime(dir, ""); got != want {
		t.Fatalf("fineCtime(%s) = %v, want %v (type %#x, kernel %s)", dir, got, want, sfs.Type, u.Release[:])
	}
	// A state directory on the same filesystem is where the probe's file
	// goes; the answer is the same.
	if got := fineCtime(dir, t.TempDir()); got != want {
		t.Fatalf("with a state directory: %v, want %v", got, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the probe left %d names in the backing directory", len(entries))
	}
}

// kernelAtLeast reports whether the release string (uname -r) is at
// least major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
