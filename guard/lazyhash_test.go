package guard

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// lazyGuard returns an enforcing guard that defers the hash of every
// non-empty read, with a clock an hour ahead so that files written by
// the test are not racy.
func lazyGuard() *Guard {
	return New(Config{LazyHashMin: 1, Now: func() time.Time { return time.Now().Add(time.Hour) }})
}

// gatedOpener opens f once gate is closed: the test decides when the
// background worker may hash.
func gatedOpener(f *file, gate chan struct{}) func() (*os.File, error) {
	return func() (*os.File, error) {
		<-gate
		return os.Open(f.path)
	}
}

// TestLazyHashAttributed: the file's stat is unchanged between the read
// and the deferred hash, so the hash is the read's and the record is fresh;
// a later change is stale as ever.
func TestLazyHashAttributed(t *testing.T) {
	for _, settle := range []string{"worker", "decision"} {
		t.Run(settle, func(t *testing.T) {
			g := lazyGuard()
			f := newFile(t, "content\n")
			gate := make(chan struct{})
			if settle == "decision" {
				// Hold the worker off: the job is queued but not run.
				g.deferred.running = true
			}
			p, err := g.NoteReadDeferred(Caller{Session: "s"}, f.target(), gatedOpener(f, gate))
			must(t, err)
			if p == nil {
				t.Fatal("the read's hash was not deferred")
			}
			if g.Counts().Hash.HashedBytes != 0 {
				t.Fatal("the read hashed the file")
			}
			if settle == "worker" {
				close(gate)
				g.WaitDeferred()
			}
			if code := decideCode(g, "s", f); code != "" { // the decision settles with its own target
				t.Fatalf("overwrite after an unchanged read: %q, want allowed", code)
			}
			if settle == "decision" {
				g.deferred.mu.Lock()
				g.deferred.running = false
				g.deferred.mu.Unlock()
				if len(g.deferred.jobs) != 1 {
					t.Fatal("the job did not wait in the queue")
				}
				g.deferred.jobs = nil
				close(gate)
			}
			if c := g.Counts().Hash; c.Deferred != 1 || c.DeferredLost != 0 {
				t.Fatalf("counts %+v, want one deferred, none lost", c)
			}
			f.write("changed\n")
			if code := decideCode(g, "s", f); code != CodeStale {
				t.Fatalf("overwrite after a change: %q, want stale", code)
			}
		})
	}
}

// TestLazyHashLostWhenStatChanged: the file's stat changed between the
// read and the deferred hash (here a touch, same bytes), so the hash cannot
// be the read's: the record is seen, never fresh, until the session reads
// again.
func TestLazyHashLostWhenStatChanged(t *testing.T) {
	g := lazyGuard()
	f := newFile(t, "content\n")
	gate := make(chan struct{})
	_, err := g.NoteReadDeferred(Caller{Session: "s"}, f.target(), gatedOpener(f, gate))
	must(t, err)
	later := time.Now().Add(-time.Minute)
	must(t, os.Chtimes(f.path, later, later))
	close(gate)
	g.WaitDeferred()
	if c := g.Counts().Hash; c.DeferredLost != 1 {
		t.Fatalf("counts %+v, want the deferred hash lost", c)
	}
	if code := decideCode(g, "s", f); code != CodeStale {
		t.Fatalf("overwrite after a change between read and hash: %q, want stale", code)
	}
	must(t, g.NoteRead("s", f.target())) // a new read vouches again
	if code := decideCode(g, "s", f); code != "" {
		t.Fatalf("overwrite after reading again: %q, want allowed", code)
	}
}

// TestLazyHashChangedThroughMount: another session's mutation between the
// read and the hash makes the record stale; the session's own mutation
// keeps it fresh through the own-write rule although the read's hash is
// lost.
func TestLazyHashChangedThroughMount(t *testing.T) {
	for _, who := range []string{"other", "s"} {
		t.Run(who, func(t *testing.T) {
			g := lazyGuard()
			f := newFile(t, "content\n")
			tg := f.target()
			gate := make(chan struct{})
			_, err := g.NoteReadDeferred(Caller{Session: "s"}, tg, gatedOpener(f, gate))
			must(t, err)
			unlock := g.Lock(tg.Stat.ID)
			f.write("written through the mount\n")
			g.NoteMutation(tg.Stat.ID, who)
			unlock()
			close(gate)
			g.WaitDeferred()
			want := CodeStale
			if who == "s" {
				want = ""
			}
			if code := decideCode(g, "s", f); code != want {
				t.Fatalf("overwrite after %s's change: %q, want %q", who, code, want)
			}
		})
	}
}

// TestLazyHashRacyReadHashedAtOnce: a file modified within the timestamp
// granularity of the read is hashed at the read, as before deferral, so
// the racy rule applies unchanged; so is a file below LazyHashMin.
func TestLazyHashRacyReadHashedAtOnce(t *testing.T) {
	f := newFile(t, "content\n")
	for name, g := range map[string]*Guard{
		"racy":  New(Config{LazyHashMin: 1}), // real clock: the file was just written
		"small": New(Config{LazyHashMin: 1 << 20, Now: func() time.Time { return time.Now().Add(time.Hour) }}),
	} {
		p, err := g.NoteReadDeferred(Caller{Session: "s"}, f.target(), func() (*os.File, error) {
			t.Error("the worker's opener was used")
			return nil, os.ErrInvalid
		})
		must(t, err)
		if c := g.Counts().Hash; p != nil || c.Deferred != 0 || c.HashedBytes != int64ToU(len("content\n")) {
			t.Fatalf("%s: pending %v, counts %+v: want hashed at the read", name, p, c)
		}
		if code := decideCode(g, "s", f); code != "" {
			t.Fatalf("%s: overwrite after the read: %q", name, code)
		}
	}
}

// TestReadOfOwnWriteAddsNothing: a read of a file whose stat is the one
// the session's own credited write left hashes nothing.
func TestReadOfOwnWriteAddsNothing(t *testing.T) {
	g := New(Config{LazyHashMin: 1})
	f := newFile(t, "mine\n")
	tg := f.target()
	must(t, g.NoteWriteHashed("s", tg, HashBytes([]byte("mine\n"))))
	p, err := g.NoteReadDeferred(Caller{Session: "s"}, tg, nil)
	must(t, err)
	if c := g.Counts().Hash; p != nil || c.HashedBytes != 0 || c.Streamed != 1 {
		t.Fatalf("pending %v, counts %+v: want nothing hashed", p, c)
	}
	if code := decideCode(g, "s", f); code != "" {
		t.Fatalf("overwrite of the own write: %q", code)
	}
}

func int64ToU(n int) uint64 { return uint64(n) }

// TestReadAfterDeclaredHashRefreshes: a record holding a hash a harness
// declared is not kept by a read through the mount (the declared bytes
// may not be the file's): the read hashes the file and refreshes it.
func TestReadAfterDeclaredHashRefreshes(t *testing.T) {
	g := New(Config{LazyHashMin: 1})
	f := newFile(t, "on disk\n")
	tg := f.target()
	must(t, g.DeclareRead("s", tg, HashBytes([]byte("what the model was shown\n")), true))
	if code := decideCode(g, "s", f); code != CodeStale {
		t.Fatalf("overwrite after a stale declared view: %q, want stale", code)
	}
	_, err := g.NoteReadDeferred(Caller{Session: "s"}, tg, nil)
	must(t, err)
	if code := decideCode(g, "s", f); code != "" {
		t.Fatalf("overwrite after a read through the mount: %q, want allowed", code)
	}
}

// TestTrackedSettlesDeferred: guard/tracked shows a record whose hash is
// deferred with the hash of the content read, fresh.
func TestTrackedSettlesDeferred(t *testing.T) {
	g := lazyGuard()
	g.deferred.running = true // hold the worker off
	f := newFile(t, "content\n")
	_, err := g.NoteReadDeferred(Caller{Session: "s"}, f.target(), nil)
	must(t, err)
	recs := g.Tracked("s", func(string) (Target, error) { return f.target(), nil })
	if len(recs) != 1 || recs[0].State != "fresh" || recs[0].Hash != HashBytes([]byte("content\n")).String() {
		t.Fatalf("tracked %+v, want one fresh record with the content's hash", recs)
	}
}

// TestSettleDeferredBeforeAttrChange: a deferred hash taken (SettleDeferred)
// before a change of the file's attributes is the read's, so the record
// stays fresh after the chmod; the same chmod before the hash loses the
// read (TestLazyHashLostWhenStatChanged).
func TestSettleDeferredBeforeAttrChange(t *testing.T) {
	g := lazyGuard()
	f := newFile(t, "content\n")
	tg := f.target()
	resume := g.PauseDeferred()
	defer resume()
	p, err := g.NoteReadDeferred(Caller{Session: "s"}, tg, func() (*os.File, error) { return os.Open(f.path) })
	must(t, err)
	if p == nil || !g.HasDeferred() {
		t.Fatal("the read's hash was not deferred")
	}
	g.SettleDeferred(tg.Stat.ID, nil)
	if g.HasDeferred() {
		t.Fatal("SettleDeferred left the hash pending")
	}
	must(t, os.Chmod(f.path, 0o600))
	if code := decideCode(g, "s", f); code != "" {
		t.Fatalf("overwrite after a chmod that came after the settled hash: %q, want allowed", code)
	}
	if c := g.Counts().Hash; c.DeferredLost != 0 {
		t.Fatalf("counts %+v, want none lost", c)
	}
}

// TestLazyHashRenamedBeforeWorker: the worker finds the read's name gone
// (the file, or a directory above it, was renamed since): it leaves the
// hash to the next decision, which hashes through its own target, and the
// read stays the session's (fsstress: a read, a rename of the directory,
// then an O_DIRECT write).
func TestLazyHashRenamedBeforeWorker(t *testing.T) {
	g := lazyGuard()
	root := t.TempDir()
	p := filepath.Join(root, "sub", "f")
	must(t, os.Mkdir(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte("content\n"), 0o644))
	resume := g.PauseDeferred()
	_, err := g.NoteReadDeferred(Caller{Session: "s"}, targetOf(t, p, "sub/f"), func() (*os.File, error) { return os.Open(p) })
	must(t, err)
	moved := filepath.Join(root, "sub2", "f")
	must(t, os.Rename(filepath.Dir(p), filepath.Dir(moved))) // the directory: the file's stat is unchanged
	resume()
	g.WaitDeferred()
	if c := g.Counts().Hash; c.DeferredLost != 0 {
		t.Fatalf("counts %+v: the worker lost the read of a file whose directory was renamed", c)
	}
	if d := g.Decide("s", OpWrite, targetOf(t, moved, "sub2/f")); !d.Allow {
		t.Fatalf("overwrite of the moved, unchanged file: %+v, want allowed", d)
	}
}

// TestSettleDeferredViaChangeOwnFile: a hard-linked file whose read's
// name leads to another file (the node's path, given to another file by an
// exchange) is settled through the change's own opener (its other name),
// so the read survives the chmod; an opener of another file is not used,
// and without a usable one the read stays pending and the chmod loses it
// (fsstress: an exchange, a read through the exchanged node, a setfattr
// through another name, a write).
func TestSettleDeferredViaChangeOwnFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		via  string // "": no opener; "other": another file; "link": the file's other name
		lost bool
	}{{"own-file", "link", false}, {"another-file", "other", true}, {"none", "", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := lazyGuard()
			root := t.TempDir()
			a, link, other := filepath.Join(root, "a"), filepath.Join(root, "c"), filepath.Join(root, "b")
			must(t, os.WriteFile(a, []byte("content\n"), 0o644))
			must(t, os.Link(a, link))
			must(t, os.WriteFile(other, []byte("another file\n"), 0o644))
			resume := g.PauseDeferred()
			defer resume()
			tg := targetOf(t, a, "a")
			// The read's own name leads to another file.
			_, err := g.NoteReadDeferred(Caller{Session: "s"}, tg, func() (*os.File, error) { return os.Open(other) })
			must(t, err)
			var via func() (*os.File, error)
			if tc.via != "" {
				p := map[string]string{"link": link, "other": other}[tc.via]
				via = func() (*os.File, error) { return os.Open(p) }
			}
			g.SettleDeferred(tg.Stat.ID, via)
			if pending := g.HasDeferred(); pending != tc.lost {
				t.Fatalf("pending after SettleDeferred: %v, want %v", pending, tc.lost)
			}
			must(t, os.Chmod(link, 0o600))
			d := g.Decide("s", OpWrite, targetOf(t, link, "c"))
			if d.Allow == tc.lost {
				t.Fatalf("overwrite through the other name after the chmod: %+v, want allowed %v", d, !tc.lost)
			}
			if c := g.Counts().Hash; (c.DeferredLost != 0) != tc.lost {
				t.Fatalf("counts %+v, want lost %v", c, tc.lost)
			}
		})
	}
}
