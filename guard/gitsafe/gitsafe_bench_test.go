package gitsafe

import (
	"bytes"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkHolds measures one git-safe lookup (docs/DESIGN.md#git-safe)
// of a file in a subdirectory that differs from its index blob but
// equals HEAD's, as a `git checkout` of a file staged with other bytes:
// the index, HEAD and the stash are all consulted.
func BenchmarkHolds(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("no git")
	}
	ws := b.TempDir()
	content := "package p\n\nfunc F() {}\n"
	write(b, filepath.Join(ws, "a", "b", "f.go"), content)
	git(b, ws, "init", "-q")
	git(b, ws, "add", "-A")
	git(b, ws, "commit", "-qm", "init")
	write(b, filepath.Join(ws, "a", "b", "f.go"), "staged\n")
	git(b, ws, "add", "-A")
	write(b, filepath.Join(ws, "a", "b", "f.go"), content)
	r := New(ws, ws)
	body := []byte(content)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		held, err := r.Holds("a/b/f.go", int64(len(body)), func() (io.Reader, error) { return bytes.NewReader(body), nil })
		if err != nil || !held {
			b.Fatal(held, err)
		}
	}
}
