package journalhook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rubinofs/rubinofs/journal"
)

// TestRemovalAfterIsAbsent: the after-note of a successful unlink or
// rmdir says the name is absent without looking (docs/DESIGN.md#own-bracket-journal):
// a file another process made at the name right after the removal is not
// noted as the session's, so a rewind sees it as a conflict.
func TestRemovalAfterIsAbsent(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, j := newTestHook(t, ws)
	for _, c := range []struct{ op, rel string }{{OpUnlink, "f"}, {OpRmdir, "d"}} {
		p, errno := h.Record("s1", c.op, []Name{{Rel: c.rel, Dir: -1, Doomed: c.op == OpUnlink}})
		if errno != 0 {
			t.Fatal(errno)
		}
		// The removal, then another process's new file at the name
		// before the after-note.
		if err := os.RemoveAll(filepath.Join(ws, c.rel)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, c.rel), []byte("outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p.Commit()
		recs, err := j.Records("s1")
		if err != nil {
			t.Fatal(err)
		}
		last := recs[len(recs)-1]
		if last.Op != journal.OpAfter || len(last.After) != 1 || last.After[0].Kind != journal.KindAbsent {
			t.Fatalf("%s %s: after-note %+v, want the name absent", c.op, c.rel, last)
		}
	}
}
