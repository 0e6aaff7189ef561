package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rubinofs/rubinofs/sessions"
)

// TestReplacedIsStale: a session that read a file whose name another
// session then gave to a new file (the old one's last name gone) is
// refused the new file as stale, naming the replacer only when MayName
// allows; the replacer's own next write is unaffected, a name never read
// is unread, and the names remembered are bounded (MaxReplacedNames).
func TestReplacedIsStale(t *testing.T) {
	g := New(Config{})
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, []byte("v1\n"), 0o644))
	old := targetOf(t, p, "f")
	must(t, g.NoteRead("a", old))
	must(t, g.NoteRead("b", old))
	// b saves atomically: a new file renamed over f.
	tmp := filepath.Join(dir, "f.tmp")
	must(t, os.WriteFile(tmp, []byte("v2\n"), 0o644))
	must(t, os.Rename(tmp, p))
	g.NoteLastNameGone(old.Stat.ID, "b")
	cur := targetOf(t, p, "f")
	if cur.Stat.ID == old.Stat.ID {
		t.Skip("the file system reused the inode number at once")
	}
	d := g.DecideBy(Caller{Session: "a", MayName: func(s string) bool { return s == "b" }}, OpOpenTrunc, cur)
	if d.Allow || d.Code != CodeStale || d.ReplacedBy != "session b" {
		t.Fatalf("a's overwrite of the replaced f: %+v, want stale by session b", d)
	}
	d = g.DecideBy(Caller{Session: "a"}, OpOpenTrunc, cur)
	if d.Code != CodeStale || d.ReplacedBy != ReplacedByAnother {
		t.Fatalf("without MayName: %+v, want stale by another session", d)
	}
	if d := g.Decide("c", OpOpenTrunc, cur); d.Code != CodeUnread {
		t.Fatalf("a session that never read f: %+v, want unread", d)
	}
	// A read of the new file ends it: fresh.
	must(t, g.NoteRead("a", cur))
	if d := g.Decide("a", OpOpenTrunc, cur); !d.Allow {
		t.Fatalf("after reading again: %+v", d)
	}

	// The watcher's case: the old record stays, its identity mutated
	// outside the mount. (Each case below has a guard of its own: a new
	// file may be given the inode number of one freed above, which g has
	// records of.)
	ge := New(Config{})
	q := filepath.Join(dir, "e")
	must(t, os.WriteFile(q, []byte("v1\n"), 0o644))
	eOld := targetOf(t, q, "e")
	must(t, ge.NoteRead("a", eOld))
	must(t, os.WriteFile(q+".tmp", []byte("v2\n"), 0o644))
	must(t, os.Rename(q+".tmp", q))
	ge.NoteMutation(eOld.Stat.ID, sessions.External)
	if d := ge.Decide("a", OpUnlink, targetOf(t, q, "e")); d.Code != CodeStale || d.ReplacedBy != ReplacedOutside {
		t.Fatalf("replaced outside: %+v, want stale outside the mount", d)
	}

	// Renamed away by another session (a backup-then-write save), and a
	// new file made at the name: stale too.
	gm := New(Config{})
	r := filepath.Join(dir, "m")
	must(t, os.WriteFile(r, []byte("v1\n"), 0o644))
	mOld := targetOf(t, r, "m")
	must(t, gm.NoteRead("a", mOld))
	must(t, os.Rename(r, r+".bak"))
	gm.RenameBy(mOld.Stat.ID, "m.bak", "b")
	must(t, os.WriteFile(r, []byte("v2\n"), 0o644))
	if d := gm.Decide("a", OpOpenTrunc, targetOf(t, r, "m")); d.Code != CodeStale || d.ReplacedBy != ReplacedByAnother {
		t.Fatalf("renamed away and recreated: %+v, want stale by another session", d)
	}
	if d := gm.Decide("a", OpOpenTrunc, targetOf(t, r+".bak", "m.bak")); !d.Allow {
		t.Fatalf("the moved file keeps a's record: %+v", d)
	}

	// Bounded: past MaxReplacedNames the oldest names may be dropped.
	tr := g.ForSession("a")
	for i := 0; i < MaxReplacedNames+10; i++ {
		tr.mu.Lock()
		tr.noteGone(fmt.Sprint("n", i), "b")
		tr.mu.Unlock()
	}
	if n := len(tr.gone); n > MaxReplacedNames {
		t.Fatalf("%d names remembered, want at most %d", n, MaxReplacedNames)
	}
}
