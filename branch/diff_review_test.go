package branch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteDiffSwappedAfterChanges: an agent in the branch swaps its files
// between Changes (which saw regular files) and WriteDiff (which reads
// them), as `branch diff` runs them one after the other, run by root (or
// by an MCP server of root's, answering the agent): a file becomes a
// symlink to a root-only file, another a fifo, a directory a symlink to a
// root-only directory. The diff shows none of those bytes, returns, and
// says the file changed while it was read.
func TestWriteDiffSwappedAfterChanges(t *testing.T) {
	tmp := t.TempDir()
	lower, upper, secret := filepath.Join(tmp, "lower"), filepath.Join(tmp, "upper"), filepath.Join(tmp, "secret")
	for _, d := range []string{lower + "/d", upper + "/d", secret} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(secret, "g.txt"), "TOPSECRET\n")
	write(filepath.Join(secret, "f.txt"), "TOPSECRET\n")
	for _, f := range []string{"f.txt", "d/g.txt", "z.txt"} {
		write(filepath.Join(lower, f), "old\n")
		write(filepath.Join(upper, f), "new\n")
	}
	changes, err := Changes(upper, lower)
	if err != nil || len(changes) != 3 {
		t.Fatalf("Changes: %v %v", changes, err)
	}
	for _, c := range []struct {
		name string
		swap func(p string) error
	}{
		{"f.txt", func(p string) error { os.Remove(p); return os.Symlink(filepath.Join(secret, "f.txt"), p) }},
		{"d/g.txt", func(string) error {
			os.RemoveAll(filepath.Join(upper, "d"))
			return os.Symlink(secret, filepath.Join(upper, "d"))
		}},
		{"z.txt", func(p string) error { os.Remove(p); return syscall.Mkfifo(p, 0o644) }},
	} {
		if err := c.swap(filepath.Join(upper, c.name)); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- WriteDiff(&out, upper, lower, changes, []string{c.name}) }()
		select {
		case err = <-done:
		case <-time.After(30 * time.Second): // a failsafe, not a timing
			t.Fatalf("WriteDiff of %s swapped hung", c.name)
		}
		if strings.Contains(out.String(), "TOPSECRET") || !errors.Is(err, ErrChangedWhileRead) {
			t.Errorf("WriteDiff of %s swapped after Changes: %v, want ErrChangedWhileRead and none of the other file\n%s", c.name, err, out.String())
		}
	}
}

// TestPlanMergeTooManyChanges: a branch changing more paths than one merge
// plans fails with ErrTooManyChanges and the count, before any base or
// workspace file is read.
func TestPlanMergeTooManyChanges(t *testing.T) {
	defer func(n int) { maxMergeChanges = n }(maxMergeChanges)
	maxMergeChanges = 10
	tmp := t.TempDir()
	b := &Branch{Dir: tmp}
	b.Meta.Workspace = filepath.Join(tmp, "ws")
	for _, d := range []string{b.Meta.Workspace, b.Upper()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 11; i++ {
		if err := os.WriteFile(filepath.Join(b.Upper(), fmt.Sprint("f", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := PlanMerge(b, b.Meta.Workspace, nil)
	if !errors.Is(err, ErrTooManyChanges) || !strings.Contains(err.Error(), "changes 11 paths, over the 10") {
		t.Fatalf("PlanMerge of 11 changes, limit 10: %v", err)
	}
	maxMergeChanges = 11
	if plan, err := PlanMerge(b, b.Meta.Workspace, nil); err != nil || len(plan.Steps) != 11 {
		t.Fatalf("PlanMerge of 11 changes, limit 11: %v %v", plan, err)
	}
}

// TestCopyFileNoFollow: building a checkpoint's base layer copies files of
// the live workspace; one swapped for a symlink to a root-only file, or
// for a fifo with a silent writer, after the walk saw it is refused, never
// copied into the branch's view nor waited on.
func TestCopyFileNoFollow(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("TOPSECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lnk, fifo := filepath.Join(dir, "lnk"), filepath.Join(dir, "fifo")
	if err := os.Symlink(secret, lnk); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := syscall.Open(fifo, syscall.O_RDWR|syscall.O_CLOEXEC, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(w)
	for i, src := range []string{lnk, fifo} {
		dst := filepath.Join(dir, fmt.Sprint("dst", i))
		done := make(chan error, 1)
		go func() { done <- copyFile(src, dst) }()
		select {
		case err = <-done:
		case <-time.After(30 * time.Second): // a failsafe, not a timing
			t.Fatalf("copyFile of %s hung", src)
		}
		if b, _ := os.ReadFile(dst); err == nil || strings.Contains(string(b), "TOPSECRET") {
			t.Errorf("copyFile of %s: %v, copied %q; want it refused", src, err, b)
		}
	}
}
