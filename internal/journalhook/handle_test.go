package journalhook

import (
	"os"
	"path"
	"path/filepath"
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
	hj.Release("f")
	got := ops()
	if n := len(got); n != 5 || got[3] != OpWrite || got[4] != journal.OpAfter {
		t.Fatalf("records: %q, want [start write checkpoint write after]", got)
	}
	var nilHook *Hook
	if nilHook.NewHandle("s1") != nil || nilHook.Journals("f", false) {
		t.Fatal("a nil hook journals")
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
