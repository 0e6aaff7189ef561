package journalhook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rubinofs/rubinofs/journal"
)

// TestRemovalAfterIsAbsent: a successful unlink or rmdir writes no
// after-note (docs/DESIGN.md#own-bracket-journal): its record says the name
// is absent. A file another process made at the name right after the
// removal is not taken for the session's: a rewind sees it as a conflict.
// Without it, the rewind plans the name's restore with no conflict.
func TestRemovalAfterIsAbsent(t *testing.T) {
	for _, outside := range []bool{false, true} {
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "f"), []byte("before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		h, j := newTestHook(t, ws)
		cp, err := j.Checkpoint("s1", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ op, rel string }{{OpUnlink, "f"}, {OpRmdir, "d"}} {
			p, errno := h.Record("s1", c.op, []Name{{Rel: c.rel, Dir: -1, Doomed: c.op == OpUnlink}})
			if errno != 0 {
				t.Fatal(errno)
			}
			// The removal, then another process's new file at the name
			// before the commit.
			if err := os.RemoveAll(filepath.Join(ws, c.rel)); err != nil {
				t.Fatal(err)
			}
			if outside {
				if err := os.WriteFile(filepath.Join(ws, c.rel), []byte("outside\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p.Commit()
			recs, err := j.Records("s1")
			if err != nil {
				t.Fatal(err)
			}
			if last := recs[len(recs)-1]; last.Op != c.op || last.Path != c.rel {
				t.Fatalf("%s %s: last record %+v, want the removal's own", c.op, c.rel, last)
			}
		}
		plan, err := j.PlanRewind("s1", cp.ID, journal.DirInspector{Root: ws}, journal.RewindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conflicts := map[string]bool{}
		for _, c := range plan.Conflicts {
			conflicts[c.Path] = true
		}
		for _, rel := range []string{"f", "d"} {
			if conflicts[rel] != outside {
				t.Errorf("outside file %v: conflicts %+v, want %s listed: %v", outside, plan.Conflicts, rel, outside)
			}
		}
		if !outside && len(plan.Steps) != 2 {
			t.Errorf("steps %+v, want the restores of f and d", plan.Steps)
		}
	}
}
