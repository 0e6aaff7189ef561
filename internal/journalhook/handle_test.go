package journalhook

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
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
