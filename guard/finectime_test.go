package guard

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFineCtimeTrustsFreshEntry: with FineCtime an entry hashed in the
// same instant its file was written is trusted (no racy rule), and a
// change after its stat still misses, since it moves the key; without
// it the same entry is racy and read again.
func TestFineCtimeTrustsFreshEntry(t *testing.T) {
	for _, fine := range []bool{false, true} {
		f := newFile(t, "one\n")
		tg := f.target()
		hc := NewHashCache(time.Second, 0, func() time.Time { return time.Unix(0, tg.Stat.CtimeNs) })
		hc.FineCtime = fine
		h1, err := hc.Sum(tg.Stat, tg.Open)
		must(t, err)
		h2, err := hc.Sum(tg.Stat, tg.Open)
		must(t, err)
		s := hc.Stats()
		if h1 != h2 {
			t.Fatalf("fine %v: two hashes of one content", fine)
		}
		if fine && (s.Hits != 1 || s.Misses != 1 || s.Racy != 0 || !s.FineCtime) {
			t.Fatalf("fine: %+v, want the second Sum a hit", s)
		}
		if !fine && (s.Hits != 0 || s.Misses != 2 || s.Racy != 1) {
			t.Fatalf("coarse: %+v, want the second Sum racy, read again", s)
		}
		f.write("two\n")
		h3, err := hc.Sum(f.target().Stat, f.target().Open)
		must(t, err)
		if h3 == h1 {
			t.Fatalf("fine %v: a change after the entry's stat kept its hash", fine)
		}
	}
}

// TestNoteWriteHashedCachesContent: a credit from the bytes as written
// caches their hash under the stat the write left, with FineCtime only,
// so the session's next decision reads nothing back; the entry is never
// trusted for another stat.
func TestNoteWriteHashedCachesContent(t *testing.T) {
	for _, fine := range []bool{false, true} {
		g := New(Config{FineCtime: fine})
		p := filepath.Join(t.TempDir(), "w.txt")
		f, err := os.Create(p)
		must(t, err)
		var w WriteHash
		b := []byte("written through the mount\n")
		_, err = f.WriteAt(b, 0)
		must(t, err)
		w.Wrote(0, b, fstatOf(t, f))
		must(t, f.Close())
		tg := targetOf(t, p, "w.txt")
		h, ok := w.Sum(tg.Stat)
		if !ok {
			t.Fatal("Sum refused the stat the write left")
		}
		must(t, g.NoteWriteHashed("s", tg, h))
		if d := g.Decide("s", OpOpenTrunc, tg); !d.Allow {
			t.Fatalf("fine %v: the session's own write refused: %+v", fine, d)
		}
		s := g.hashes.Stats()
		if want := uint64(map[bool]int{false: 1, true: 0}[fine]); s.Misses != want || (fine && s.HashedBytes != 0) {
			t.Fatalf("fine %v: %+v, want %d misses", fine, s, want)
		}
		other := tg.Stat
		other.CtimeNs++
		if _, ok := g.hashes.Lookup(other); ok {
			t.Fatalf("fine %v: the written entry answered for another ctime", fine)
		}
	}
}

// TestWriteHashBefore: a stat before a later write that is not the one
// the handle's last write left (the file changed in between) breaks the
// hash; the first write needs none, and the right one keeps it.
func TestWriteHashBefore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	var w WriteHash
	if w.Started() {
		t.Fatal("Started before any write")
	}
	a := []byte("aaaa")
	f.WriteAt(a, 0)
	w.Wrote(0, a, fstatOf(t, f))
	w.Before(fstatOf(t, f))
	if !w.Started() {
		t.Fatal("the stat the last write left broke the hash")
	}
	must(t, os.WriteFile(p, []byte("Zaaa"), 0o644)) // another writer, same size
	old := time.Unix(1_000_000, 0)                  // its stat differs on any clock
	must(t, os.Chtimes(p, old, old))
	w.Before(fstatOf(t, f))
	if w.Started() {
		t.Fatal("a change between two writes kept the hash")
	}
	f.WriteAt([]byte("bbbb"), 4)
	w.Wrote(4, []byte("bbbb"), fstatOf(t, f))
	if _, ok := w.Sum(fstatOf(t, f)); ok {
		t.Fatal("Sum held after a change between two writes")
	}
}

// TestRenamedOwnCarriesHash: with FineCtime a rename's new ctime does
// not cost a read: the entry under the stat before moves to the stat
// after; not when the mtime or size moved too, nor without FineCtime.
func TestRenamedOwnCarriesHash(t *testing.T) {
	for _, c := range []struct {
		name  string
		fine  bool
		write bool // the file is written between the two stats
		want  bool
	}{
		{"fine", true, false, true},
		{"fine, written in between", true, true, false},
		{"coarse", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := New(Config{FineCtime: c.fine, Granularity: time.Nanosecond})
			dir := t.TempDir()
			p, q := filepath.Join(dir, "tmp"), filepath.Join(dir, "f")
			must(t, os.WriteFile(p, []byte("content\n"), 0o644))
			before := targetOf(t, p, "tmp")
			if _, err := g.hashes.Sum(before.Stat, before.Open); err != nil {
				t.Fatal(err)
			}
			if c.write {
				must(t, os.WriteFile(p, []byte("CONTENT\n"), 0o644))
			}
			must(t, os.Rename(p, q))
			after := targetOf(t, q, "f")
			if after.Stat.CtimeNs == before.Stat.CtimeNs {
				t.Skip("the rename kept the ctime: a coarse clock")
			}
			g.RenamedOwn(before.Stat, after.Stat)
			if _, ok := g.hashes.Lookup(after.Stat); ok != c.want {
				t.Fatalf("entry under the stat after the rename: %v, want %v", ok, c.want)
			}
		})
	}
}
