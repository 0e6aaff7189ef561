package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// file is a real temp file and its Target.
type file struct {
	t    *testing.T
	path string
	rel  string
}

func newFile(t *testing.T, content string) *file {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return &file{t: t, path: p, rel: "src/f.txt"}
}

func (f *file) target() Target {
	f.t.Helper()
	return targetOf(f.t, f.path, f.rel)
}

func targetOf(t *testing.T, p, rel string) Target {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return Target{Path: rel, Stat: StatOf(&st), Open: func() (*os.File, error) { return os.Open(p) }}
}

func (f *file) write(content string) {
	f.t.Helper()
	if err := os.WriteFile(f.path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// TestDecideTable is the policy table of the README: op × state → decision,
// in enforce, warn and off.
func TestDecideTable(t *testing.T) {
	states := []struct {
		name  string
		setup func(g *Guard, f *file)
		code  Code // "" = allowed
	}{
		{"never read", func(g *Guard, f *file) {}, CodeUnread},
		{"read, fresh", func(g *Guard, f *file) { must(t, g.NoteRead("s", f.target())) }, ""},
		{"read, stale", func(g *Guard, f *file) { must(t, g.NoteRead("s", f.target())); f.write("changed!\n") }, CodeStale},
		{"own write", func(g *Guard, f *file) { f.write("mine\n"); must(t, g.NoteWrite("s", f.target())) }, ""},
		{"read by another session", func(g *Guard, f *file) { must(t, g.NoteRead("other", f.target())) }, CodeUnread},
		{"read, touched", func(g *Guard, f *file) {
			must(t, g.NoteRead("s", f.target()))
			future := time.Now().Add(time.Hour)
			must(t, os.Chtimes(f.path, future, future))
		}, ""},
		{"read, rewritten with identical bytes", func(g *Guard, f *file) {
			must(t, g.NoteRead("s", f.target()))
			f.write("original\r\n")
		}, ""},
	}
	ops := []Op{OpOpenTrunc, OpWrite, OpTruncate, OpFallocate, OpCopyInto, OpRenameOver, OpExchange, OpUnlink, OpMapWrite, OpOpenRW}
	for _, mode := range []Mode{ModeEnforce, ModeWarn, ModeOff} {
		for _, st := range states {
			for _, op := range ops {
				t.Run(fmt.Sprintf("%s/%s/%s", mode, st.name, op), func(t *testing.T) {
					g := New(Config{Mode: mode})
					f := newFile(t, "original\r\n")
					st.setup(g, f)
					d := g.Decide("s", op, f.target())
					switch {
					case mode == ModeOff || st.code == "":
						if !d.Allow || d.WouldDeny {
							t.Fatalf("got %+v, want allow", d)
						}
					case mode == ModeWarn:
						if !d.Allow || !d.WouldDeny || d.Code != st.code {
							t.Fatalf("got %+v, want allow with would-deny %s", d, st.code)
						}
					default:
						if d.Allow || d.Code != st.code {
							t.Fatalf("got %+v, want deny %s", d, st.code)
						}
					}
					if !d.Allow || d.WouldDeny {
						if !strings.Contains(d.Message, f.rel) {
							t.Errorf("message %q does not name the path", d.Message)
						}
						want := map[Code]string{CodeUnread: "read it first", CodeStale: "changed on disk since this session read it"}[d.Code]
						if !strings.Contains(d.Message, want) {
							t.Errorf("message %q lacks %q", d.Message, want)
						}
					}
				})
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestChangedByteUnderSameMtime: content changes with size and mtime restored
// (what a coarse-clock filesystem shows for two writes in one tick) are
// caught, because the hash is authoritative.
func TestChangedByteUnderSameMtime(t *testing.T) {
	g := New(Config{})
	f := newFile(t, "aaaa\n")
	must(t, g.NoteRead("s", f.target()))
	before := f.target().Stat
	f.write("aaab\n")
	mt := time.Unix(0, before.MtimeNs)
	must(t, os.Chtimes(f.path, mt, mt))
	after := f.target()
	if after.Stat.MtimeNs != before.MtimeNs || after.Stat.Size != before.Size {
		t.Fatalf("setup: mtime/size not restored")
	}
	if d := g.Decide("s", OpOpenTrunc, after); d.Allow || d.Code != CodeStale {
		t.Fatalf("changed byte under unchanged mtime: %+v, want stale", d)
	}
}

// TestRacyTimestamp is git's racy-git rule in the hash cache: an entry hashed
// within Granularity of the file's mtime is not trusted, so a change that
// leaves the whole stat key identical is still caught; an entry hashed well
// after the mtime is trusted and read nothing.
func TestRacyTimestamp(t *testing.T) {
	f := newFile(t, "one\n")
	st := f.target().Stat
	mtime := time.Unix(0, st.MtimeNs)
	for _, c := range []struct {
		name      string
		hashedAt  time.Time
		wantFresh bool // whether the second Sum still sees the old (cached) hash
	}{
		{"racy: hashed in the same tick", mtime, false},
		{"racy: hashed within the granularity", mtime.Add(500 * time.Millisecond), false},
		{"settled: hashed after the granularity", mtime.Add(3 * time.Second), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.write("one\n")
			must(t, os.Chtimes(f.path, mtime, mtime))
			st := f.target().Stat
			hc := NewHashCache(time.Second, 0, func() time.Time { return c.hashedAt })
			h1, err := hc.Sum(st, f.target().Open)
			must(t, err)
			// Same-size change; the caller still presents the old stat, as
			// a filesystem whose timestamps did not move would.
			f.write("two\n")
			h2, err := hc.Sum(st, f.target().Open)
			must(t, err)
			if (h1 == h2) != c.wantFresh {
				t.Fatalf("h1==h2 is %v, want %v", h1 == h2, c.wantFresh)
			}
			s := hc.Stats()
			if c.wantFresh && s.Hits != 1 {
				t.Fatalf("settled entry not used: %+v", s)
			}
			if !c.wantFresh && s.Racy != 1 {
				t.Fatalf("racy entry not detected: %+v", s)
			}
		})
	}
}

// TestHashCacheHit: an unchanged, settled file is hashed once.
func TestHashCacheHit(t *testing.T) {
	f := newFile(t, "x\n")
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(f.path, old, old))
	hc := NewHashCache(time.Second, 0, nil)
	tg := f.target()
	// ctime is now; wait out the racy window on a fake clock instead.
	hc.now = func() time.Time { return time.Unix(0, tg.Stat.CtimeNs).Add(2 * time.Second) }
	for i := 0; i < 3; i++ {
		if _, err := hc.Sum(tg.Stat, tg.Open); err != nil {
			t.Fatal(err)
		}
	}
	if s := hc.Stats(); s.Misses != 1 || s.Hits != 2 {
		t.Fatalf("stats %+v, want 1 miss and 2 hits", s)
	}
	hc.Invalidate(tg.Stat.ID)
	hc.Sum(tg.Stat, tg.Open)
	if s := hc.Stats(); s.Misses != 2 {
		t.Fatalf("after Invalidate: %+v, want a miss", s)
	}
}

// TestAliasesShareRecord: a hard link and a symlink reach the same identity,
// so a read through one name covers a write through another
// (docs/DESIGN.md#file-identity).
func TestAliasesShareRecord(t *testing.T) {
	g := New(Config{})
	f := newFile(t, "shared\n")
	hard := filepath.Join(filepath.Dir(f.path), "hard")
	sym := filepath.Join(filepath.Dir(f.path), "sym")
	must(t, os.Link(f.path, hard))
	must(t, os.Symlink(f.path, sym))
	must(t, g.NoteRead("s", targetOf(t, sym, "sym")))
	if d := g.Decide("s", OpOpenTrunc, targetOf(t, hard, "hard")); !d.Allow {
		t.Fatalf("write through hard link after read through symlink: %+v", d)
	}
}

// TestCrossSession: a write by A leaves B's record stale.
func TestCrossSession(t *testing.T) {
	g := New(Config{})
	f := newFile(t, "v1\n")
	must(t, g.NoteRead("A", f.target()))
	must(t, g.NoteRead("B", f.target()))
	f.write("v2 by A\n")
	must(t, g.NoteWrite("A", f.target()))
	if d := g.Decide("A", OpWrite, f.target()); !d.Allow {
		t.Fatalf("A after its own write: %+v", d)
	}
	if d := g.Decide("B", OpWrite, f.target()); d.Allow || d.Code != CodeStale {
		t.Fatalf("B after A's write: %+v, want stale", d)
	}
}

// TestDuplicateRead: a duplicate only for the same window, same bytes, within
// the TTL and with no recovery pending (docs/DESIGN.md#dedup-window,
// docs/DESIGN.md#recovery).
func TestDuplicateRead(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	g := New(Config{Now: func() time.Time { return now }})
	f := newFile(t, "line1\nline2\n")
	tr := g.ForSession("s")
	dup := func(off, lim int64) bool {
		t.Helper()
		d, err := tr.DuplicateRead(f.target(), off, lim, Hash{})
		must(t, err)
		return d
	}
	steps := []struct {
		name   string
		before func()
		off    int64
		lim    int64
		want   bool
	}{
		{"first read", nil, 0, 10, false},
		{"same window", nil, 0, 10, true},
		{"other window", nil, 5, 10, false},
		{"within the TTL", func() { now = now.Add(DedupTTL) }, 0, 10, true},
		{"past the TTL", func() { now = now.Add(DedupTTL + time.Second) }, 0, 10, false},
		{"changed bytes", func() { f.write("line1\nLINE2\n") }, 0, 10, false},
		{"again, unchanged", nil, 0, 10, true},
		{"after an edit failure", func() { tr.NoteEditFailure(f.target().Stat.ID) }, 0, 10, false},
		{"recovery is one-shot", nil, 0, 10, true},
		{"after an own write", func() { must(t, tr.NoteWrite(f.target(), Hash{})) }, 0, 10, false},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		if got := dup(s.off, s.lim); got != s.want {
			t.Fatalf("%s: duplicate=%v, want %v", s.name, got, s.want)
		}
	}
	// A refusal by the guard is an edit failure: the next read is fresh.
	g2 := New(Config{})
	tr2 := g2.ForSession("s")
	must(t, tr2.Register(f.target(), Hash{}))
	if d, _ := tr2.DuplicateRead(f.target(), 0, 10, Hash{}); d {
		t.Fatal("first window is a duplicate")
	}
	f.write("changed outside\n")
	tg := f.target()
	if d := g2.Decide("s", OpWrite, tg); d.Allow {
		t.Fatal("stale write allowed")
	}
	// Same window, but both recovery and a changed hash make it fresh.
	if d, _ := tr2.DuplicateRead(tg, 0, 10, Hash{}); d {
		t.Fatal("recovery read after a refusal was deduplicated")
	}
}

// TestDedupWindowsBounded: a session asking for three times MaxWindows
// distinct windows keeps at most MaxWindows; the expired ones go first,
// then the oldest, and a recent window is still a duplicate.
func TestDedupWindowsBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	g := New(Config{Now: func() time.Time { return now }})
	f := newFile(t, "line1\nline2\n")
	tr := g.ForSession("s")
	tg := f.target()
	h := HashBytes([]byte("line1\nline2\n"))
	for i := range 3 * MaxWindows {
		if i == MaxWindows/2 {
			now = now.Add(DedupTTL + time.Second) // the first half expires
		}
		now = now.Add(time.Millisecond)
		d, err := tr.DuplicateRead(tg, int64(i), 10, h)
		must(t, err)
		if d {
			t.Fatalf("window %d: a first read taken for a duplicate", i)
		}
		tr.mu.Lock()
		n := len(tr.windows)
		tr.mu.Unlock()
		if n > MaxWindows {
			t.Fatalf("after window %d the session keeps %d windows, past %d", i, n, MaxWindows)
		}
	}
	if d, _ := tr.DuplicateRead(tg, int64(3*MaxWindows-1), 10, h); !d {
		t.Error("the newest window is no longer a duplicate")
	}
	if d, _ := tr.DuplicateRead(tg, 0, 10, h); d {
		t.Error("the first, expired window is still a duplicate")
	}
}

// TestSkeletonDrillIn: a targeted read window that overlaps a range elided
// in the file's last skeleton is a drill-in (docs/DESIGN.md#skeleton-drill-in).
func TestSkeletonDrillIn(t *testing.T) {
	g := New(Config{})
	tr := g.ForSession("s")
	id := FileID{Dev: 1, Ino: 2}
	if tr.DrillIn(id, 1, 100) {
		t.Fatal("drill-in without a skeleton")
	}
	tr.NoteSkeleton(id, []Range{{First: 10, Count: 5}, {First: 40, Count: 1}})
	for _, c := range []struct {
		off, lim int64
		want     bool
	}{
		{1, 9, false}, {1, 10, true}, {14, 1, true}, {15, 25, false}, {40, 1, true}, {41, 100, false},
	} {
		if got := tr.DrillIn(id, c.off, c.lim); got != c.want {
			t.Errorf("DrillIn(%d,%d)=%v, want %v", c.off, c.lim, got, c.want)
		}
	}
	tr.NoteSkeleton(id, []Range{{First: 100, Count: 1}})
	if tr.DrillIn(id, 10, 1) {
		t.Error("a new skeleton did not replace the old ranges")
	}
}

// TestTrackerAccessors covers Seen, MtimeAtRead, ForSession and Reset.
func TestTrackerAccessors(t *testing.T) {
	g := New(Config{})
	f := newFile(t, "x\n")
	tg := f.target()
	if g.ForSession("s").Seen(tg.Stat.ID) {
		t.Fatal("seen before a read")
	}
	must(t, g.NoteRead("s", tg))
	tr := g.ForSession("s")
	if tr != g.ForSession("s") {
		t.Fatal("ForSession returned a new tracker for the same session")
	}
	if !tr.Seen(tg.Stat.ID) {
		t.Fatal("not seen after a read")
	}
	if mt, ok := tr.MtimeAtRead(tg.Stat.ID); !ok || !mt.Equal(tg.Stat.Mtime()) {
		t.Fatalf("MtimeAtRead = %v %v, want %v", mt, ok, tg.Stat.Mtime())
	}
	g.Reset()
	if g.ForSession("s").Seen(tg.Stat.ID) {
		t.Fatal("seen after Reset")
	}
}

// TestForgetAndRename: records follow identities; Forget drops them.
func TestForgetAndRename(t *testing.T) {
	g := New(Config{})
	f := newFile(t, "x\n")
	tg := f.target()
	must(t, g.NoteRead("s", tg))
	g.Rename(tg.Stat.ID, "moved.txt")
	lookup := func(string) (Target, error) { return f.target(), nil }
	recs := g.Tracked("s", lookup)
	if len(recs) != 1 || recs[0].Path != "moved.txt" || recs[0].State != "fresh" {
		t.Fatalf("tracked %+v", recs)
	}
	f.write("y\n")
	if recs := g.Tracked("s", lookup); recs[0].State != "stale" {
		t.Fatalf("tracked after change %+v", recs)
	}
	g.Forget(tg.Stat.ID)
	if g.ForSession("s").Seen(tg.Stat.ID) {
		t.Fatal("seen after Forget")
	}
}

// TestDenialLogBounded keeps the newest MaxDenials entries.
func TestDenialLogBounded(t *testing.T) {
	g := New(Config{MaxDenials: 3})
	for i := 0; i < 5; i++ {
		g.RecordDenial(Denial{Session: fmt.Sprint(i % 2), Path: fmt.Sprint(i)})
	}
	all := g.Denials("")
	if len(all) != 3 || all[0].Path != "2" || all[2].Path != "4" {
		t.Fatalf("denials %+v", all)
	}
	if s := g.Denials("1"); len(s) != 1 || s[0].Path != "3" {
		t.Fatalf("session 1 denials %+v", s)
	}
	if c := g.Counts(); c.Denials != 5 {
		t.Fatalf("counts %+v", c)
	}
}

// TestConcurrent exercises every method from many goroutines (run with
// -race); a lock held across decide and mutate serialises per identity.
func TestConcurrent(t *testing.T) {
	g := New(Config{})
	f := newFile(t, "0\n")
	var wg sync.WaitGroup
	var counter int
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s := fmt.Sprint("s", i%3)
			for j := 0; j < 50; j++ {
				tg := f.target()
				unlock := g.Lock(tg.Stat.ID)
				counter++
				g.NoteRead(s, tg)
				g.Decide(s, OpWrite, tg)
				unlock()
				g.ForSession(s).DuplicateRead(tg, 0, 1, Hash{})
				g.Tracked(s, func(string) (Target, error) { return tg, nil })
				g.Counts()
			}
		}(i)
	}
	wg.Wait()
	if counter != 400 {
		t.Fatalf("Lock did not serialise: %d", counter)
	}
	if len(g.locks) != 0 {
		t.Fatalf("%d identity locks left behind", len(g.locks))
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeEnforce, ModeWarn, ModeOff} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("strict"); err == nil || !strings.Contains(err.Error(), "enforce, warn or off") {
		t.Errorf("ParseMode(strict) error %v", err)
	}
}

// TestHashCacheNoReuse: with Config.UntrustedStat (a backing whose stat
// may be a client cache's, docs/DESIGN.md#uncached-view) the cache never
// hits: content changed under an unchanged stat is hashed anew, so a
// stale record is found stale.
func TestHashCacheNoReuse(t *testing.T) {
	g := New(Config{UntrustedStat: true})
	f := newFile(t, "x\n")
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(f.path, old, old))
	tg := f.target()
	hc := g.Hashes()
	hc.now = func() time.Time { return time.Unix(0, tg.Stat.CtimeNs).Add(2 * time.Second) }
	h1, err := hc.Sum(tg.Stat, tg.Open)
	must(t, err)
	// Another host's client changed the bytes; this host's stat is cached.
	must(t, os.WriteFile(f.path, []byte("y\n"), 0o644))
	h2, err := hc.Sum(tg.Stat, tg.Open)
	must(t, err)
	if h1 == h2 {
		t.Fatal("the changed content hashed as the cached one")
	}
	if s := hc.Stats(); s.Hits != 0 || s.Misses != 2 {
		t.Fatalf("stats %+v, want 2 misses and no hit", s)
	}
}
