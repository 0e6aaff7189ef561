package syscallcompat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestCopiedRead: a small fd result becomes the bytes read (a short read
// at the end of the file included); a large one and a failed one pass
// through as they are.
func TestCopiedRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("hello, world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	res, st := CopiedRead(fuse.ReadResultFd(f.Fd(), 7, len(buf)), fuse.OK, buf)
	if st != fuse.OK {
		t.Fatalf("status %v", st)
	}
	if _, vec := res.(interface {
		Slices() ([][]byte, fuse.Status)
	}); !vec {
		t.Fatal("a small read is not a vector result (go-fuse would pass it through a pipe)")
	}
	if b, _ := res.Bytes(nil); string(b) != "world\n" {
		t.Fatalf("bytes %q, want %q", b, "world\n")
	}
	big := make([]byte, CopyReadMax+1)
	res, _ = CopiedRead(fuse.ReadResultFd(f.Fd(), 0, len(big)), fuse.OK, big)
	if _, fd := res.(interface{ Seekable() (uintptr, int64, int) }); !fd {
		t.Fatal("a read above CopyReadMax was copied")
	}
	if res, st := CopiedRead(nil, fuse.EIO, buf); res != nil || st != fuse.EIO {
		t.Fatalf("a failed read became %v, %v", res, st)
	}
	if _, st := CopiedRead(fuse.ReadResultFd(^uintptr(0)>>1, 0, 10), fuse.OK, buf); st == fuse.OK {
		t.Fatal("a failed pread reported OK")
	}
}
