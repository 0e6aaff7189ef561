package journal

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// putFile stores the bytes of the file at path through PutFromFd.
func putFile(t *testing.T, b *Blobs, path string) Blob {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	blob, err := b.PutFromFd(int(f.Fd()), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return blob
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readBlob(t *testing.T, b *Blobs, addr string) []byte {
	t.Helper()
	f, err := b.Open(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// countBlobs counts the stored blobs (the files under DIR/xx/).
func countBlobs(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "??", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func TestBlobDedup(t *testing.T) {
	for _, mode := range []CopyMode{CopyAuto, CopyRange, CopyPlain} {
		dir := t.TempDir()
		b, err := NewBlobs(filepath.Join(dir, "blobs"), 0, mode)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("hello journal\n"), 10000)
		writeFile(t, filepath.Join(dir, "a"), data)
		writeFile(t, filepath.Join(dir, "b"), data)
		writeFile(t, filepath.Join(dir, "c"), []byte("other"))
		ba := putFile(t, b, filepath.Join(dir, "a"))
		bb := putFile(t, b, filepath.Join(dir, "b"))
		bc := putFile(t, b, filepath.Join(dir, "c"))
		if ba.Addr == "" || ba.Addr != bb.Addr || ba.Addr == bc.Addr {
			t.Fatalf("mode %d: addresses %q %q %q", mode, ba.Addr, bb.Addr, bc.Addr)
		}
		if ba.Dedup || !bb.Dedup {
			t.Fatalf("mode %d: dedup flags %v %v", mode, ba.Dedup, bb.Dedup)
		}
		if n := countBlobs(t, filepath.Join(dir, "blobs")); n != 2 {
			t.Fatalf("mode %d: %d blobs stored, want 2", mode, n)
		}
		if got := readBlob(t, b, ba.Addr); !bytes.Equal(got, data) {
			t.Fatalf("mode %d: blob content differs", mode)
		}
		if ba.Size != int64(len(data)) {
			t.Fatalf("mode %d: size %d", mode, ba.Size)
		}
		tmps, _ := os.ReadDir(filepath.Join(dir, "blobs", "tmp"))
		if len(tmps) != 0 {
			t.Fatalf("mode %d: %d temporary files left", mode, len(tmps))
		}
	}
}

// The copy paths are taken when asked for, and all give the same address.
func TestBlobCopyPaths(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 300000)
	writeFile(t, filepath.Join(dir, "f"), data)
	addrs := map[string]bool{}
	for _, c := range []struct {
		mode CopyMode
		want []Method
	}{
		{CopyPlain, []Method{MethodPlain}},
		{CopyRange, []Method{MethodRange, MethodPlain}},
		{CopyAuto, []Method{MethodClone, MethodRange, MethodPlain}},
	} {
		b, err := NewBlobs(filepath.Join(t.TempDir(), "blobs"), 0, c.mode)
		if err != nil {
			t.Fatal(err)
		}
		blob := putFile(t, b, filepath.Join(dir, "f"))
		ok := false
		for _, m := range c.want {
			ok = ok || blob.Method == m
		}
		if !ok {
			t.Fatalf("mode %d used %q, want one of %v", c.mode, blob.Method, c.want)
		}
		t.Logf("mode %d: %s", c.mode, blob.Method)
		if got := readBlob(t, b, blob.Addr); !bytes.Equal(got, data) {
			t.Fatalf("mode %d: content differs", c.mode)
		}
		addrs[blob.Addr] = true
	}
	if len(addrs) != 1 {
		t.Fatalf("addresses differ by copy path: %v", addrs)
	}
}

// The copy path copies a file at an offset: the fd's own offset is not used.
func TestBlobIgnoresFdOffset(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "f"), []byte("0123456789"))
	for _, mode := range []CopyMode{CopyRange, CopyPlain} {
		b, _ := NewBlobs(filepath.Join(t.TempDir(), "blobs"), 0, mode)
		f, _ := os.Open(filepath.Join(dir, "f"))
		f.Seek(5, io.SeekStart)
		blob, err := b.PutFromFd(int(f.Fd()), 10)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := string(readBlob(t, b, blob.Addr)); got != "0123456789" {
			t.Fatalf("mode %d stored %q", mode, got)
		}
	}
}

func TestBlobTooLarge(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []CopyMode{CopyAuto, CopyRange, CopyPlain} {
		b, err := NewBlobs(filepath.Join(dir, "blobs"), 100, mode)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "big"), make([]byte, 101))
		blob := putFile(t, b, filepath.Join(dir, "big"))
		if blob.Addr != "" || blob.Unrecoverable != UnrecoverableTooLarge {
			t.Fatalf("over the limit: %+v", blob)
		}
		// A file that grew past the limit after its size was taken.
		f, _ := os.Open(filepath.Join(dir, "big"))
		blob, err = b.PutFromFd(int(f.Fd()), 10)
		f.Close()
		if err != nil || blob.Unrecoverable != UnrecoverableTooLarge {
			t.Fatalf("grown past the limit: %+v %v", blob, err)
		}
		writeFile(t, filepath.Join(dir, "ok"), make([]byte, 100))
		if blob := putFile(t, b, filepath.Join(dir, "ok")); blob.Addr == "" {
			t.Fatalf("at the limit: %+v", blob)
		}
		if n := countBlobs(t, filepath.Join(dir, "blobs")); n != 1 {
			t.Fatalf("%d blobs stored, want 1", n)
		}
	}
}
