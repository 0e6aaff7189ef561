package journalhook

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
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

// TestRecordParentGone: a change whose parent directory is not there (a
// rename of a directory above has just made the mount's path for it
// stale) is refused with the errno its backing call would get, ENOENT or
// ENOTDIR, records nothing and reports no error; before, the pre-image
// capture failed and the change was refused with EIO and an entry in
// .rubino/errors.
func TestRecordParentGone(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "file"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, j := newTestHook(t, ws)
	var reported []ctltree.ErrorRecord
	h.cfg.Report = func(r ctltree.ErrorRecord) { reported = append(reported, r) }
	for _, c := range []struct {
		op    string
		names []Name
		want  syscall.Errno
	}{
		{OpUnlink, []Name{{Rel: "gone/x", Dir: -1, Doomed: true}}, syscall.ENOENT},
		{OpRename, []Name{{Rel: "gone/x", Dir: -1}, {Rel: "gone/y", Dir: -1, Doomed: true}}, syscall.ENOENT},
		{OpRename, []Name{{Rel: "file", Dir: -1}, {Rel: "gone/y", Dir: -1, Doomed: true}}, syscall.ENOENT},
		{OpCreate, []Name{{Rel: "file/x", Dir: -1}}, syscall.ENOTDIR},
	} {
		p, errno := h.Record("s1", c.op, c.names)
		if errno != c.want {
			t.Errorf("%s %v: errno %v, want %v", c.op, c.names, errno, c.want)
		}
		p.Abort()
	}
	recs, err := j.Records("s1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Op == OpUnlink || r.Op == OpRename || r.Op == OpCreate {
			t.Errorf("recorded %+v for a change that cannot happen", r)
		}
	}
	if len(reported) != 0 {
		t.Errorf("reported %+v, want nothing in .rubino/errors", reported)
	}
}
