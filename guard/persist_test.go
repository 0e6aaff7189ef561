package guard

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rubinofs/rubinofs/sessions"
)

// TestSaveLoad: records survive a restart when their file is unchanged
// (one whose name is not valid UTF-8 too); a changed or replaced file's
// record is dropped; a record made stale by another session is not saved.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"same": "1\n", "changed": "2\n", "replaced": "3\n", "foreign": "4\n", "odd\xff": "5\n"}
	for name, c := range files {
		os.WriteFile(filepath.Join(dir, name), []byte(c), 0o644)
	}
	lookup := func(rel string) (Target, error) {
		p := filepath.Join(dir, rel)
		if _, err := os.Lstat(p); err != nil {
			return Target{}, err
		}
		return targetOf(t, p, rel), nil
	}
	g := New(Config{})
	for name := range files {
		tg, _ := lookup(name)
		must(t, g.NoteRead("agent", tg))
	}
	// Two more sessions: one with a record, one whose only record is
	// foreign (nothing saved): the streamed document stays valid JSON.
	tg, _ := lookup("same")
	must(t, g.NoteRead("second", tg))
	tg, _ = lookup("foreign")
	must(t, g.NoteRead("third", tg))
	tg, _ = lookup("foreign")
	g.NoteMutation(tg.Stat.ID, "other")
	var buf bytes.Buffer
	must(t, g.Save(&buf, []sessions.Info{{Name: "second"}}))
	var doc savedState
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || len(doc.Sessions) != 2 || len(doc.Roots) != 1 {
		t.Fatalf("saved state %s: %v (%d sessions, %d roots)", buf.Bytes(), err, len(doc.Sessions), len(doc.Roots))
	}

	os.WriteFile(filepath.Join(dir, "changed"), []byte("two\n"), 0o644)
	os.Remove(filepath.Join(dir, "replaced"))
	// Same bytes under a new inode (or the reused one): kept or dropped,
	// either is right; only the total is checked.
	os.WriteFile(filepath.Join(dir, "replaced"), []byte("3\n"), 0o644)
	g2 := New(Config{})
	_, kept, dropped, err := g2.Load(bytes.NewReader(buf.Bytes()), lookup)
	must(t, err)
	for name, want := range map[string]bool{"same": true, "changed": false, "foreign": false, "odd\xff": true} {
		tg, _ := lookup(name)
		if d := g2.Decide("agent", OpOpenTrunc, tg); d.Allow != want {
			t.Errorf("%s after load: %+v, want allow=%v", name, d, want)
		}
	}
	if kept < 2 || kept+dropped != 5 {
		t.Errorf("kept %d, dropped %d of 5 saved", kept, dropped)
	}
	if _, _, _, err := g2.Load(bytes.NewReader([]byte("{")), lookup); err == nil {
		t.Error("malformed state loaded")
	}
}
