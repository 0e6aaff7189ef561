package watcher

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// own runs change as an own change of rels.
func own(t *testing.T, w *Watcher, change func() error, rels ...string) {
	t.Helper()
	end := w.Begin(rels...)
	err := change()
	end()
	if err != nil {
		t.Fatal(err)
	}
}

// appendTo appends s to the file p.
func appendTo(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// barrier writes an external file and waits for its event: the events of
// every change made before it have then been classified.
func barrier(t *testing.T, r *rec, root, name string) {
	t.Helper()
	write(t, filepath.Join(root, name), "x")
	r.waitEvent(name, Create)
}

// noneBut fails the test when anything but the given paths was delivered.
func (r *rec) noneBut(paths ...string) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, op := range r.events {
		ok := false
		for _, q := range paths {
			ok = ok || p == q
		}
		if !ok {
			r.t.Errorf("own change delivered as external: %s %v", p, op)
		}
	}
}

// TestOwnByIdentity: a link, then a write through the first name, then an
// unlink of the first name: the events of the second name are matched by the
// file's identity, not by what the second name looked like when the link
// was made. An external write through the second name is still external.
func TestOwnByIdentity(t *testing.T) {
	root := t.TempDir()
	f1, f2 := filepath.Join(root, "f1"), filepath.Join(root, "f2")
	write(t, f1, "v1\n")
	r := newRec(t)
	w := start(t, r.config(root))
	own(t, w, func() error { return os.Link(f1, f2) }, "f2", "f1")
	own(t, w, func() error { return appendTo(f1, "x\n") }, "f1")
	own(t, w, func() error { return os.Chmod(f1, 0o600) }, "f1")
	own(t, w, func() error { return os.Truncate(f1, 2) }, "f1")
	own(t, w, func() error { return os.Remove(f1) }, "f1") // f2 lives on: nlink and ctime change
	barrier(t, r, root, "barrier")
	r.noneBut("barrier")

	if err := appendTo(f2, "external\n"); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("f2", Write)
}

// TestOwnRaceWithExternal: an external write followed at once by an own
// change of the same file (through another name) before the watcher's batch:
// the external write is still reported. The batch window is long, so the
// own change almost always begins before the external event is classified
// (the case under test); if it does not, the event is reported all the
// same. The next event of the file's identity is the one reported.
func TestOwnRaceWithExternal(t *testing.T) {
	root := t.TempDir()
	f1, f2 := filepath.Join(root, "f1"), filepath.Join(root, "f2")
	write(t, f1, "v1\n")
	r := newRec(t)
	cfg := r.config(root)
	cfg.Coalesce = 500 * time.Millisecond
	w := start(t, cfg)
	own(t, w, func() error { return os.Link(f1, f2) }, "f2", "f1")
	if err := appendTo(f2, "external\n"); err != nil {
		t.Fatal(err)
	}
	own(t, w, func() error { return appendTo(f1, "own\n") }, "f1")
	// Reported under either name: both are the one file, and the mount
	// invalidates by identity.
	r.waitFor("an external write of f1 = f2", func() bool { return (r.events["f1"]|r.events["f2"])&Write != 0 })
}

// waitClockPast lets a later rename's stamp on the directories come after
// the ctime of the file p (a coarse clock may give both the same tick): it
// waits for the clock to pass it, bounded.
func waitClockPast(t *testing.T, p string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now); err != nil {
			t.Fatal(err)
		}
		if now.Sec > st.Ctim.Sec || now.Sec == st.Ctim.Sec && now.Nsec > st.Ctim.Nsec {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the coarse clock did not pass a file's ctime")
		}
		time.Sleep(time.Millisecond) // polling the clock, bounded above
	}
}

// ownExchange exchanges a and b below root with RENAME_EXCHANGE, as one own
// move.
func ownExchange(t *testing.T, w *Watcher, root, a, b string) {
	t.Helper()
	end := w.BeginMove(a, b)
	err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, a), unix.AT_FDCWD, filepath.Join(root, b), unix.RENAME_EXCHANGE)
	end(err == nil)
	if err != nil {
		t.Fatal(err)
	}
}

// TestOwnExchange: RENAME_EXCHANGE of two files and of two directories,
// each as one own move: nothing is external, not even the entries of the
// exchanged directories (which the watcher scans as it watches them again),
// and both directories stay watched.
func TestOwnExchange(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a"), "a")
	write(t, filepath.Join(root, "b"), "bb")
	write(t, filepath.Join(root, "d1/x"), "x")
	write(t, filepath.Join(root, "d1/sub/z"), "z")
	write(t, filepath.Join(root, "d2/y"), "y")
	waitClockPast(t, filepath.Join(root, "d2/y"))
	r := newRec(t)
	w := start(t, r.config(root))
	exchange := func(a, b string) { t.Helper(); ownExchange(t, w, root, a, b) }
	exchange("a", "b")
	own(t, w, func() error { return appendTo(filepath.Join(root, "a"), "own") }, "a")
	exchange("d1", "d2")
	own(t, w, func() error { return appendTo(filepath.Join(root, "d2/x"), "own") }, "d2/x")
	exchange("d1", "d2")
	exchange("d2", "d1")
	barrier(t, r, root, "barrier")
	r.noneBut("barrier")

	for _, rel := range []string{"d2/x", "d2/sub/z", "d1/y"} {
		if err := appendTo(filepath.Join(root, rel), "external"); err != nil {
			t.Fatal(err)
		}
		r.waitEvent(rel, Write)
	}
}

// TestOwnMoveAfterScan: the scan of an own-moved directory found an entry,
// and a later own move took it elsewhere before its event was classified
// (the first exchange's events are handled late): the entry is still own,
// judged where it is now, while an entry created outside after the moves
// is external. The batch window is long, so only the direct calls
// classify.
func TestOwnMoveAfterScan(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "d1/x"), "x")
	write(t, filepath.Join(root, "d2/y"), "y")
	waitClockPast(t, filepath.Join(root, "d2/y"))
	r := newRec(t)
	cfg := r.config(root)
	cfg.Coalesce = time.Hour
	w := start(t, cfg)
	exchange := func(a, b string) { t.Helper(); ownExchange(t, w, root, a, b) }
	exchange("d1", "d2") // y is at d1/y: the scan of d1 finds it there
	exchange("d1", "d2") // and this takes it back to d2/y
	if how, _ := w.classify("d1/y", Create|scanned); how != ownDone {
		t.Errorf("scanned d1/y, now at d2/y: origin %d, want own", how)
	}
	write(t, filepath.Join(root, "d2/new"), "external")
	if how, _ := w.classify("d1/new", Create|scanned); how != external {
		t.Errorf("d2/new created outside after the moves: origin %d, want external", how)
	}
}

// TestOwnChangeDuringClassify: an own write of a file that begins and ends
// between the lstat classify takes for an earlier own write's event and its
// decision leaves a record newer than that lstat; the event is still own
// (classify takes its lstats again), not taken for an external change.
func TestOwnChangeDuringClassify(t *testing.T) {
	root := t.TempDir()
	f := filepath.Join(root, "f")
	write(t, f, "v1\n")
	r := newRec(t)
	w := start(t, r.config(root))
	var once sync.Once
	errs := make(chan error, 1)
	hook := func(rel string, lstated bool) {
		if rel != "f" || !lstated {
			return
		}
		once.Do(func() {
			end := w.Begin("f")
			errs <- appendTo(f, "second own write\n")
			end()
		})
	}
	w.classifyHook.Store(&hook)
	own(t, w, func() error { return appendTo(f, "first own write\n") }, "f")
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	barrier(t, r, root, "barrier")
	r.noneBut("barrier")
}

// TestOwnMoveDuringClassify: an own rename of the directory above a file,
// made after classify looked up the paths an own write's event may name
// and before its lstat, leaves the file where that lookup did not look;
// the event is still own (classify looks again), not taken for an external
// change of a file that vanished.
func TestOwnMoveDuringClassify(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "a", "x"), "v1\n")
	r := newRec(t)
	w := start(t, r.config(root))
	var once sync.Once
	errs := make(chan error, 1)
	hook := func(rel string, lstated bool) {
		if rel != "a/x" || lstated {
			return
		}
		once.Do(func() {
			end := w.BeginMove("a", "b")
			err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "b"))
			end(err == nil)
			errs <- err
		})
	}
	w.classifyHook.Store(&hook)
	own(t, w, func() error { return appendTo(filepath.Join(root, "a", "x"), "own write\n") }, "a/x")
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	barrier(t, r, root, "barrier")
	r.noneBut("barrier")
}

// TestOwnChangeEndsBeforeEarlierBracket: two own changes of one identity
// overlap, and the one that ends last no longer sees the file at its paths
// (as when an unlink frees an inode number that a new file gets before the
// unlink's bracket has ended: the new file's own write ends first). The
// one that saw the file leaves its record, so the file's events are own.
// Here the first bracket's name is moved away, unbracketed by the second
// name, to give the same order without relying on inode reuse.
func TestOwnChangeEndsBeforeEarlierBracket(t *testing.T) {
	root := t.TempDir()
	f, h := filepath.Join(root, "f"), filepath.Join(root, "h")
	write(t, f, "v1\n")
	r := newRec(t)
	w := start(t, r.config(root))
	endA := w.Begin("f")
	if err := os.Rename(f, h); err != nil {
		t.Fatal(err)
	}
	own(t, w, func() error { return appendTo(h, "own write\n") }, "h")
	endA()
	barrier(t, r, root, "barrier")
	r.noneBut("barrier")
}

// TestOwnRecordsPrunedWithoutEvents: own changes that bring no events (a
// subtree inotify cannot watch) do not pile up: records past ownTTL are
// dropped by the next own change, not only by the next batch of events.
func TestOwnRecordsPrunedWithoutEvents(t *testing.T) {
	root := t.TempDir()
	w := start(t, newRec(t).config(root))
	for i := 0; i < 50; i++ {
		own(t, w, func() error { return nil }, filepath.Join("gone", "x", strconv.Itoa(i)))
	}
	// end takes the records before it returns: none is busy now.
	w.own.mu.Lock()
	n := len(w.own.paths)
	w.own.mu.Unlock()
	if n < 50 {
		t.Fatalf("%d own records, want 50", n)
	}
	w.own.mu.Lock()
	for _, p := range w.own.paths {
		p.at = p.at.Add(-2 * ownTTL)
	}
	w.own.lastPrune = time.Time{}
	w.own.mu.Unlock()
	own(t, w, func() error { return nil }, "next")
	w.own.mu.Lock()
	n = len(w.own.paths)
	w.own.mu.Unlock()
	if n > 1 {
		t.Fatalf("%d own records kept past their TTL without events", n)
	}
}
