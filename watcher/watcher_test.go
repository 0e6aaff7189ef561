package watcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// rec collects what a watcher reports; wait* block until an expected report
// arrives (events, not sleeps), failing after a generous deadline.
type rec struct {
	t         *testing.T
	mu        sync.Mutex
	events    map[string]Op
	unwatched map[string]error
	overflows int
	signal    chan struct{}
}

func newRec(t *testing.T) *rec {
	return &rec{t: t, events: map[string]Op{}, unwatched: map[string]error{}, signal: make(chan struct{}, 1)}
}

func (r *rec) poke() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

func (r *rec) config(root string) Config {
	return Config{
		Root: root,
		OnEvents: func(evs []Event) {
			r.mu.Lock()
			for _, ev := range evs {
				r.events[ev.Path] |= ev.Op
			}
			r.mu.Unlock()
			r.poke()
		},
		OnOverflow: func() { r.mu.Lock(); r.overflows++; r.mu.Unlock(); r.poke() },
		OnUnwatched: func(rel string, err error) {
			r.mu.Lock()
			r.unwatched[rel] = err
			r.mu.Unlock()
			r.poke()
		},
	}
}

// waitFor waits until cond holds on the recorded state.
func (r *rec) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.signal:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			r.t.Fatalf("no %s; events so far: %v, unwatched %v", what, r.events, r.unwatched)
		}
	}
}

func (r *rec) waitEvent(rel string, op Op) {
	r.t.Helper()
	r.waitFor("event "+op.String()+" on "+rel, func() bool { return r.events[rel]&op != 0 })
}

func (r *rec) reset() {
	r.mu.Lock()
	r.events = map[string]Op{}
	r.mu.Unlock()
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, cfg Config) *Watcher {
	t.Helper()
	w, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestExternalChanges: create, write, rename, remove and chmod of files and
// directories made outside are delivered with workspace-relative paths.
func TestExternalChanges(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a/old.txt"), "x")
	r := newRec(t)
	start(t, r.config(root))

	write(t, filepath.Join(root, "a/new.txt"), "y")
	r.waitEvent("a/new.txt", Create)
	write(t, filepath.Join(root, "a/old.txt"), "xx")
	r.waitEvent("a/old.txt", Write)
	if err := os.Rename(filepath.Join(root, "a/old.txt"), filepath.Join(root, "a/moved.txt")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("a/old.txt", Rename)
	r.waitEvent("a/moved.txt", Create)
	if err := os.Chmod(filepath.Join(root, "a/moved.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("a/moved.txt", Chmod)
	if err := os.Remove(filepath.Join(root, "a/new.txt")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("a/new.txt", Remove)
}

// TestDirectoryMadeAgainWatched: a directory removed and made again at
// the same name, 50 times in a row (the removal's event is handled after
// the new directory exists), is watched at the end: the removal alone
// takes no look at the name; the new directory's own create event does.
func TestDirectoryMadeAgainWatched(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	r := newRec(t)
	start(t, r.config(root))
	for range 50 {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, "barrier"), "x")
	r.waitEvent("barrier", Create)
	write(t, filepath.Join(d, "f"), "in the last one")
	r.waitEvent("d/f", Create)
}

// TestNewDirectoryScanned: a deep tree created at once outside is watched,
// and files made in it before its watches existed are reported by the scan.
func TestNewDirectoryScanned(t *testing.T) {
	root := t.TempDir()
	r := newRec(t)
	w := start(t, r.config(root))
	// Build the tree elsewhere and move it in: its files exist before any
	// watch could be added, so only the scan can report them.
	staging := t.TempDir()
	write(t, filepath.Join(staging, "deep/b/c/d/file.txt"), "1")
	if err := os.Rename(filepath.Join(staging, "deep"), filepath.Join(root, "deep")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("deep/b/c/d/file.txt", Create)
	// The innermost directory is watched: a later write there is seen.
	write(t, filepath.Join(root, "deep/b/c/d/file.txt"), "2")
	r.waitEvent("deep/b/c/d/file.txt", Write)
	if n := w.Stats().Watches; n != 5 {
		t.Errorf("watches = %d, want 5 (root, deep, b, c, d)", n)
	}
}

// TestRenamedDirectory: after a directory is moved, events come under its
// new path and its old watches are dropped.
func TestRenamedDirectory(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "src/pkg/f.go"), "package pkg")
	r := newRec(t)
	w := start(t, r.config(root))
	if err := os.Rename(filepath.Join(root, "src"), filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("lib", Create)
	r.reset()
	write(t, filepath.Join(root, "lib/pkg/f.go"), "package pkg // edited")
	r.waitEvent("lib/pkg/f.go", Write)
	r.mu.Lock()
	_, stale := r.events["src/pkg/f.go"]
	r.mu.Unlock()
	if stale {
		t.Error("event reported under the directory's old path")
	}
	if n := w.Stats().Watches; n != 3 {
		t.Errorf("watches = %d, want 3 (root, lib, lib/pkg)", n)
	}
}

// TestOwnChangesSuppressed: a change bracketed by Begin/end is the daemon's
// own and not delivered; an external change right after it is.
func TestOwnChangesSuppressed(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "f"), "0")
	r := newRec(t)
	w := start(t, r.config(root))
	for i := 0; i < 20; i++ {
		end := w.Begin("f")
		write(t, filepath.Join(root, "f"), "own write")
		end()
	}
	end := w.Begin("g")
	write(t, filepath.Join(root, "g"), "own create")
	end()
	// An external change after the own ones: delivered. Its delivery does
	// not prove the own events were classified: an event of an earlier own
	// write of f, read late, is decided on f's state then and carries the
	// external change, before g's events are read. The barrier's event
	// comes after all of them.
	write(t, filepath.Join(root, "f"), "external write")
	r.waitEvent("f", Write)
	barrier(t, r, root, "barrier")
	r.mu.Lock()
	_, gotG := r.events["g"]
	r.mu.Unlock()
	if gotG {
		t.Error("own create of g was delivered as external")
	}
	if s := w.Stats(); s.Own == 0 {
		t.Errorf("no own events counted: %+v", s)
	}
}

// TestOwnInFlight: events arriving while an own change is in flight are
// decided only after it ends.
func TestOwnInFlight(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "f"), "0")
	r := newRec(t)
	w := start(t, r.config(root))
	end := w.Begin("f")
	write(t, filepath.Join(root, "f"), "being written")
	write(t, filepath.Join(root, "other"), "external")
	r.waitEvent("other", Create)
	write(t, filepath.Join(root, "f"), "being written, more")
	end()
	write(t, filepath.Join(root, "other2"), "external")
	r.waitEvent("other2", Create)
	r.mu.Lock()
	_, gotF := r.events["f"]
	r.mu.Unlock()
	if gotF {
		t.Error("own in-flight write was delivered as external")
	}
}

// TestOverflowRescans: Overflow reports lost events and watches directories
// created meanwhile.
func TestOverflowRescans(t *testing.T) {
	root := t.TempDir()
	r := newRec(t)
	w := start(t, r.config(root))
	before := w.Stats().Watches
	// Simulate directories whose Create events were lost: add them while
	// the watcher's root watch is replaced by nothing.
	w.fsw.Remove(root)
	if err := os.MkdirAll(filepath.Join(root, "x/y"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	delete(w.dirs, "")
	w.mu.Unlock()
	w.Overflow()
	r.waitFor("overflow report", func() bool { return r.overflows == 1 })
	if s := w.Stats(); s.Watches != before+2 || s.Overflows != 1 {
		t.Fatalf("after overflow: %+v, want %d watches", s, before+2)
	}
	write(t, filepath.Join(root, "x/y/f"), "1")
	r.waitEvent("x/y/f", Create)
}

// TestWatchLimit: past MaxWatches subtrees are reported unwatched (as on
// ENOSPC); skipped subtrees are reported with ErrSkipped.
func TestWatchLimit(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/a1", "b/b1", ".git/objects/ab"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := newRec(t)
	cfg := r.config(root)
	cfg.MaxWatches = 3
	w := start(t, cfg)
	s := w.Stats()
	if s.Watches != 3 {
		t.Fatalf("watches %d, want 3", s.Watches)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !errors.Is(r.unwatched[".git/objects"], ErrSkipped) {
		t.Errorf(".git/objects not reported skipped: %v", r.unwatched)
	}
	limited := 0
	for rel, err := range r.unwatched {
		if errors.Is(err, errLimit) {
			limited++
			if rel == "" {
				t.Errorf("the root reported unwatched")
			}
		}
	}
	if limited == 0 {
		t.Errorf("no subtree reported past the limit: %v", r.unwatched)
	}
}

// TestRootThroughMagicLink: a root named by /proc/self/fd/N (an in-place
// mount reaches its workspace so) is watched: its lstat is the magic
// link's, so the root must be followed, or its own files go unwatched.
func TestRootThroughMagicLink(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "top.txt"), "x")
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := newRec(t)
	start(t, r.config(fmt.Sprintf("/proc/self/fd/%d", d.Fd())))
	write(t, filepath.Join(dir, "top.txt"), "xy")
	r.waitEvent("top.txt", Write)
}
