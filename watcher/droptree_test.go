package watcher

import (
	"os"
	"path"
	"path/filepath"
	"testing"
)

// TestDropTreeCounts: removing files drops no watch, and removing and
// moving directories (a subtree at once, and leaves first as rm -rf
// does) drops exactly the watches at and below them; the per-path counts
// of watches below that let dropTree skip its walk stay those of the
// watches left.
func TestDropTreeCounts(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"a/b/c/f", "a/b/g", "a/d/h", "e/i", "j"} {
		write(t, filepath.Join(root, f), "x")
	}
	r := newRec(t)
	w := start(t, r.config(root))
	check := func(want int) {
		t.Helper()
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.dirs) != want {
			t.Errorf("%d watches, want %d: %v", len(w.dirs), want, w.dirs)
		}
		below := map[string]int{}
		for d := range w.dirs {
			for d != "" {
				if d = path.Dir(d); d == "." {
					d = ""
				}
				below[d]++
			}
		}
		if len(below) != len(w.below) {
			t.Errorf("below %v, want %v", w.below, below)
		}
		for d, n := range below {
			if w.below[d] != n {
				t.Errorf("below %v, want %v", w.below, below)
				break
			}
		}
	}
	check(6) // "", a, a/b, a/b/c, a/d, e
	for _, f := range []string{"j", "a/b/g"} {
		if err := os.Remove(filepath.Join(root, f)); err != nil {
			t.Fatal(err)
		}
		r.waitEvent(f, Remove)
	}
	check(6)
	if err := os.Rename(filepath.Join(root, "a/b"), filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("moved", Create)
	check(6) // a/b and a/b/c dropped, moved and moved/c added
	if err := os.RemoveAll(filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("moved", Remove)
	check(4)
	if err := os.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("a", Remove)
	check(2)
}
