package journalhook

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/journal"
)

// dirMount is a Mount over a plain directory.
type dirMount struct{ root string }

func (m dirMount) OpenParent(rel string) (int, string, func(), syscall.Errno) {
	dir, leaf := path.Split(rel)
	fd, err := unix.Open(filepath.Join(m.root, dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, leaf, func() {}, err.(syscall.Errno)
	}
	return fd, leaf, func() { unix.Close(fd) }, 0
}

func (dirMount) NotOpen(*unix.Stat_t) bool { return true }

func (m dirMount) NameOf(fd int) (string, bool) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return strings.CutPrefix(p, m.root+"/")
}

// TestHandleRecordsOncePerGeneration: a handle records its first change
// with the file's pre-image, not its next ones, and again after a
// checkpoint (a new generation); its release notes the file's state.
func TestHandleRecordsOncePerGeneration(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, j := newTestHook(t, ws)
	ops := func() (out []string) {
		recs, err := j.Records("s1")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, r.Op)
		}
		return out
	}
	hj := h.NewHandle("s1")
	for i := 0; i < 3; i++ {
		if errno := hj.Change(OpWrite, "f"); errno != 0 {
			t.Fatal(errno)
		}
	}
	if got := ops(); len(got) != 2 || got[1] != OpWrite {
		t.Fatalf("records after three changes: %q, want [start write]", got)
	}
	if _, err := j.Checkpoint("s1", ""); err != nil {
		t.Fatal(err)
	}
	h.Checkpointed()
	if errno := hj.Change(OpWrite, "f"); errno != 0 {
		t.Fatal(errno)
	}
	hj.Release("f", -1)
	got := ops()
	if n := len(got); n != 5 || got[3] != OpWrite || got[4] != journal.OpAfter {
		t.Fatalf("records: %q, want [start write checkpoint write after]", got)
	}
	var nilHook *Hook
	if nilHook.NewHandle("s1") != nil || nilHook.Journals("f", false) {
		t.Fatal("a nil hook journals")
	}
}

// TestReleaseNotesTheFilesNameNow: a handle released after its file was
// renamed (the mount's name for it lags behind the rename) notes the
// file under the name it has now, from its descriptor, not under the
// name the handle was opened by; a file unlinked meanwhile gets no note.
func TestReleaseNotesTheFilesNameNow(t *testing.T) {
	ws := t.TempDir()
	for _, n := range []string{"f", "gone"} {
		if err := os.WriteFile(filepath.Join(ws, n), []byte("before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, j := newTestHook(t, ws)
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	notes := func() (out []string) {
		recs, err := j.Records("s1")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			for _, a := range r.After {
				out = append(out, a.Path+"="+a.Kind)
			}
		}
		return out
	}
	for _, n := range []string{"f", "gone"} {
		fd, err := unix.Open(filepath.Join(ws, n), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		hj := h.NewHandle("s1")
		if errno := hj.Change(OpWrite, n); errno != 0 {
			t.Fatal(errno)
		}
		if n == "f" {
			err = os.Rename(filepath.Join(ws, "f"), filepath.Join(ws, "d", "g"))
		} else {
			err = os.Remove(filepath.Join(ws, n))
		}
		if err != nil {
			t.Fatal(err)
		}
		hj.Release(n, fd)
		unix.Close(fd)
	}
	if got := notes(); len(got) != 1 || got[0] != "d/g=file" {
		t.Fatalf("after-notes %q, want [d/g=file]: the renamed file under its new name, none for the unlinked one", got)
	}
}

// newTestHook returns a Hook over the workspace directory ws with a
// fresh journal, closed at the test's end, and a guard of its own.
func newTestHook(t *testing.T, ws string) (*Hook, *journal.Journal) {
	t.Helper()
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return New(Config{Journal: j, Mount: dirMount{ws}, Guard: guard.New(guard.Config{})}), j
}

// namedMount is dirMount telling when NameOf was called.
type namedMount struct {
	dirMount
	called *atomic.Bool
}

func (m namedMount) NameOf(fd int) (string, bool) {
	m.called.Store(true)
	return m.dirMount.NameOf(fd)
}

// TestReleaseNoteWaitsForMoveInFlight: a handle released while an
// exchange of its file's directory is between its record and its
// after-note, after the backing exchange, is noted only once the
// exchange's after-note is logged. fsstress found this: the note named
// the file where it was now, inside the exchange's window, and the
// conflict rule read it as named before the exchange, under the other
// side's name, then found a different file there.
func TestReleaseNoteWaitsForMoveInFlight(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"d", "e"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "d", "f"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	var called atomic.Bool
	h := New(Config{Journal: j, Mount: namedMount{dirMount{ws}, &called}, Guard: guard.New(guard.Config{})})
	fd, hj := writingHandle(t, h, ws, "d/f")
	p, errno := h.Record("s1", OpExchange, []Name{{Rel: "d", Dir: -1}, {Rel: "e", Dir: -1}})
	if errno != 0 {
		t.Fatal(errno)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "d"), unix.AT_FDCWD, filepath.Join(ws, "e"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { hj.Release("d/f", fd); close(done) }()
	// Until the release either names the file or waits for the gate (a
	// writer waiting makes TryRLock fail).
	for !called.Load() && h.moves.TryRLock() {
		h.moves.RUnlock()
		runtime.Gosched()
	}
	if called.Load() {
		t.Fatal("the release named its file while the exchange was in flight")
	}
	p.Commit()
	<-done
	recs, err := j.Records("s1")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range recs {
		if r.Op == journal.OpAfter {
			order = append(order, fmt.Sprintf("after(ref %d) %s", r.Ref, r.After[0].Path))
		}
	}
	if len(order) != 2 || !strings.HasPrefix(order[0], "after(ref ") || strings.HasPrefix(order[0], "after(ref 0)") || order[1] != "after(ref 0) e/f" {
		t.Fatalf("after-notes %q, want the exchange's, then the release's of e/f", order)
	}
}

// TestReleaseNoteBeforeUnlink: a handle that wrote its file and is
// released (the kernel sends RELEASE after close(2) returned) between an
// unlink's record and the backing unlink notes the file as it still is;
// the unlink's after-note then follows that note, so the session's last
// word on the name is that it is absent, and a rewind restores the file
// with no conflict. A removal with no line after its record writes no
// after-note (TestRemovalAfterIsAbsent). fsstress found the case once the
// removal's after-note was left out: the release note was the last word,
// and the rewind reported the removed file as changed outside the mount.
func TestReleaseNoteBeforeUnlink(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, j := newTestHook(t, ws)
	cp, err := j.Checkpoint("s1", "")
	if err != nil {
		t.Fatal(err)
	}
	fd, hj := writingHandle(t, h, ws, "f")
	if _, err := unix.Pwrite(fd, []byte("after\n"), 0); err != nil {
		t.Fatal(err)
	}
	p, errno := h.Record("s1", OpUnlink, []Name{{Rel: "f", Dir: -1, Doomed: true}})
	if errno != 0 {
		t.Fatal(errno)
	}
	hj.Release("f", fd) // names the file: it is still there
	if err := os.Remove(filepath.Join(ws, "f")); err != nil {
		t.Fatal(err)
	}
	p.Commit()
	recs, err := j.Records("s1")
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.Op != journal.OpAfter || last.Ref == 0 || len(last.After) != 1 || last.After[0].Kind != journal.KindAbsent {
		t.Fatalf("last record %+v, want the unlink's after-note: f absent", last)
	}
	plan, err := j.PlanRewind("s1", cp.ID, journal.DirInspector{Root: ws}, journal.RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Conflicts) != 0 || len(plan.Steps) != 1 || plan.Steps[0].Path != "f" {
		t.Fatalf("plan %+v, want f's restore and no conflict", plan)
	}
}

// writingHandle opens rel under ws read-write (closed at the test's end)
// and returns its descriptor with a handle of session s1 whose first
// change, a write, is recorded.
func writingHandle(t *testing.T, h *Hook, ws, rel string) (int, *Handle) {
	t.Helper()
	fd, err := unix.Open(filepath.Join(ws, rel), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	hj := h.NewHandle("s1")
	if errno := hj.Change(OpWrite, rel); errno != 0 {
		t.Fatal(errno)
	}
	return fd, hj
}
