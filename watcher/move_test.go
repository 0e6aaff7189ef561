package watcher

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ownMoveDir renames root/from to root/to as an own move (BeginMove).
func ownMoveDir(t *testing.T, w *Watcher, root, from, to string) {
	t.Helper()
	end := w.BeginMove(from, to)
	err := os.Rename(filepath.Join(root, from), filepath.Join(root, to))
	end(err == nil)
	if err != nil {
		t.Fatal(err)
	}
}

// TestOwnMoveKeepsOwnChanges: an own write in d, then an own rename of d to
// d2. The write's event arrives under the old path d/f and the scan of d2
// finds d2/f and d2/sub/g; none of it is external. Then an external write
// into d2/f is reported (under d2/f).
func TestOwnMoveKeepsOwnChanges(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "d/f"), "0")
	r := newRec(t)
	w := start(t, r.config(root))
	end := w.Begin("d/sub")
	if err := os.Mkdir(filepath.Join(root, "d/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	end()
	end = w.Begin("d/sub/g")
	write(t, filepath.Join(root, "d/sub/g"), "own create")
	end()
	end = w.Begin("d/f")
	write(t, filepath.Join(root, "d/f"), "own write")
	end()
	ownMoveDir(t, w, root, "d", "d2")
	write(t, filepath.Join(root, "barrier"), "x")
	r.waitEvent("barrier", Create)
	r.mu.Lock()
	for p, op := range r.events {
		if p != "barrier" {
			t.Errorf("own change delivered as external: %s %v", p, op)
		}
	}
	r.mu.Unlock()

	write(t, filepath.Join(root, "d2/f"), "external write")
	r.waitEvent("d2/f", Write)
}

// TestOwnMoveScanRule: the scan of an own-moved directory reports an entry
// that existed unchanged before the move (ctime before the one the rename
// stamped on the directory) as no change, and an entry changed after the
// move as external. The test polls the kernel's coarse clock (with a
// deadline) until it has passed the old entry's ctime, so the rename's
// stamp is after it.
func TestOwnMoveScanRule(t *testing.T) {
	coarse := func() syscall.Timespec {
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now); err != nil {
			t.Fatal(err)
		}
		return syscall.Timespec{Sec: now.Sec, Nsec: now.Nsec}
	}
	root := t.TempDir()
	write(t, filepath.Join(root, "d/old"), "from before")
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(root, "d/old"), &st); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if now := coarse(); tsBefore(st.Ctim, now) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the coarse clock did not pass a file's ctime")
		}
		time.Sleep(time.Millisecond) // polling the clock, bounded above
	}
	r := newRec(t)
	w := start(t, r.config(root))
	// An external write into d after the move began is not hidden: it
	// gets a ctime after the reference, whatever path reports it.
	end := w.BeginMove("d", "d2")
	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "d2")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "d2/new"), "external, right after the move")
	end(true)
	write(t, filepath.Join(root, "barrier"), "x")
	r.waitEvent("barrier", Create)
	r.waitEvent("d2/new", Create)
	r.mu.Lock()
	defer r.mu.Unlock()
	if op, ok := r.events["d2/old"]; ok {
		t.Errorf("an entry unchanged since before the own move was reported: d2/old %v", op)
	}
}

// TestOwnMoveScanClearsUnchanged: the scan of an own-moved directory
// queues only the entries changed since the move began (a create made
// outside right after it, and the directory it was made in); the entries unchanged since before it, files
// and directories at any depth, are cleared while the scan reads them,
// with no event queued and classified each. The scan is called directly,
// after the move is recorded, with a batch window long enough that no
// batch is classified meanwhile.
func TestOwnMoveScanClearsUnchanged(t *testing.T) {
	root := t.TempDir()
	for _, rel := range []string{"d/a", "d/sub/b", "d/sub/deeper/c"} {
		write(t, filepath.Join(root, rel), "from before")
	}
	waitClockPast(t, filepath.Join(root, "d/sub/deeper/c"))
	r := newRec(t)
	cfg := r.config(root)
	cfg.Coalesce = time.Hour
	w := start(t, cfg)
	ownMoveDir(t, w, root, "d", "d2")
	write(t, filepath.Join(root, "d2/sub/new"), "external, after the move")
	var got []string
	w.addTree("d2", func(rel string) { got = append(got, rel) })
	if len(got) != 2 || got[0] != "d2/sub" || got[1] != "d2/sub/new" {
		t.Errorf("the scan of the own-moved d2 queued %q, want only d2/sub and d2/sub/new", got)
	}
	// A directory no own move put in place is scanned whole.
	write(t, filepath.Join(root, "e/f"), "x")
	got = nil
	w.addTree("e", func(rel string) { got = append(got, rel) })
	if len(got) != 1 || got[0] != "e/f" {
		t.Errorf("the scan of e queued %q, want e/f", got)
	}
}

// TestMovedPaths: an old path is tried where every later move took it, and
// a later directory of the same name is tried on its own.
func TestMovedPaths(t *testing.T) {
	w := &ownTable{moves: []ownMove{{from: "a", to: "b"}, {from: "b", to: "c"}, {from: "a", to: "e"}}}
	got := w.movedPaths("a/f")
	want := []string{"a/f", "c/f", "e/f"}
	if len(got) != len(want) {
		t.Fatalf("movedPaths = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("movedPaths = %v, want %v", got, want)
		}
	}
	if got := w.movedPaths("ab/f"); len(got) != 1 {
		t.Errorf("movedPaths(ab/f) = %v: a is not a prefix of ab", got)
	}
}

// TestScanHoldsOneDescriptor: the scan of a chain of 200 nested
// directories holds one directory open at a time, not one per level (a
// chain 2,000 deep would otherwise take 2,000 of the daemon's
// descriptors at once).
func TestScanHoldsOneDescriptor(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a")
	for range 199 {
		deep = filepath.Join(deep, "d")
	}
	write(t, filepath.Join(deep, "f"), "x")
	r := newRec(t)
	cfg := r.config(root)
	cfg.Coalesce = time.Hour
	w := start(t, cfg)
	open := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	base, most := open(), 0
	w.addTree("a", func(string) { most = max(most, open()) })
	if most == 0 || most-base > 10 {
		t.Errorf("the scan held %d descriptors more than before it (%d levels)", most-base, 200)
	}
}
