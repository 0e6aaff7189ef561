package syscallcompat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestXattrAtBothWays: the by-name xattr calls answer the same with the
// *xattrat(2) syscalls and with their /proc/self/fd fallback, and none
// follows a final symlink.
func TestXattrAtBothWays(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.k", []byte("v"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	d := Dir{FD: fd}
	defer noXattrat.Store(false)
	for _, fallback := range []bool{false, true} {
		noXattrat.Store(fallback)
		buf := make([]byte, 64)
		if err := SetxattrLeaf(d, "f", "user.k", []byte("v"), 0); err != nil {
			t.Errorf("fallback=%v: setxattr f: %v", fallback, err)
		}
		if err := SetxattrLeaf(d, "f", "user.new", []byte("n"), unix.XATTR_REPLACE); err != unix.ENODATA {
			t.Errorf("fallback=%v: setxattr XATTR_REPLACE of a missing attribute: %v, want ENODATA", fallback, err)
		}
		if err := SetxattrLeaf(d, "f", "user.gone", []byte("g"), unix.XATTR_CREATE); err != nil {
			t.Errorf("fallback=%v: setxattr XATTR_CREATE: %v", fallback, err)
		}
		if err := RemovexattrLeaf(d, "f", "user.gone"); err != nil {
			t.Errorf("fallback=%v: removexattr: %v", fallback, err)
		}
		if err := RemovexattrLeaf(d, "f", "user.gone"); err != unix.ENODATA {
			t.Errorf("fallback=%v: removexattr again: %v, want ENODATA", fallback, err)
		}
		if err := SetxattrLeaf(d, "l", "user.k", []byte("v"), 0); err != unix.EPERM {
			t.Errorf("fallback=%v: user xattr on the symlink itself: %v, want EPERM", fallback, err)
		}
		if n, err := GetxattrAt(d, "f", "user.k", buf); err != nil || string(buf[:n]) != "v" {
			t.Errorf("fallback=%v: getxattr f: %q %v", fallback, buf[:max(n, 0)], err)
		}
		if n, err := GetxattrAt(d, "f", "user.k", nil); err != nil || n != 1 {
			t.Errorf("fallback=%v: size of f's user.k: %d %v", fallback, n, err)
		}
		if _, err := GetxattrAt(d, "l", "user.k", buf); err != unix.ENODATA {
			t.Errorf("fallback=%v: getxattr of the symlink itself: %v, want ENODATA", fallback, err)
		}
		if _, err := GetxattrAt(d, "missing", "user.k", buf); err != unix.ENOENT {
			t.Errorf("fallback=%v: getxattr missing: %v, want ENOENT", fallback, err)
		}
		n, err := ListxattrAt(d, "f", buf)
		if err != nil || !strings.Contains(string(buf[:max(n, 0)]), "user.k\x00") {
			t.Errorf("fallback=%v: listxattr f: %q %v", fallback, buf[:max(n, 0)], err)
		}
		if !fallback && noXattrat.Load() {
			t.Logf("getxattrat(2) is not available (kernel before 6.13): only the fallback was tested")
		}
	}
}
