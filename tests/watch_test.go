package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
)

// status returns the parsed .rubino/status (readStatus).
func (m *mount) status() map[string]any {
	m.t.Helper()
	return readStatus(m.t, m.mnt)
}

// waitHandlesReleased waits until the daemon holds no file handle but
// the one its status is read through (status handles.open), for a test
// whose next open depends on the RELEASE of handles the kernel sends in
// the background after a process closed them.
func (m *mount) waitHandlesReleased() {
	m.t.Helper()
	for deadline := time.Now().Add(cliFailsafe); ; {
		h, _ := m.status()["handles"].(map[string]any)
		if n, ok := h["open"].(float64); ok && n <= 1 {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the daemon still holds handles after %v: %v", cliFailsafe, h)
		}
		time.Sleep(time.Millisecond) // polling the status, bounded above
	}
}

// rawRead reads rel through the mount with open(2) and read(2) only: no
// stat, so the kernel's cached size and pages are used as they are (cat's
// fstat would refresh attributes whose atime the kernel invalidated).
func (m *mount) rawRead(rel string) string {
	m.t.Helper()
	return m.mustSh(`python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); sys.stdout.write(os.read(fd, 1<<16).decode())' ` + shq(rel))
}

// TestExternalEditVisible: with one-hour kernel timeouts and the page cache
// kept across opens, a file read through the mount and then written in the
// backing directory shows its new bytes through the mount as soon as the
// watcher's invalidation is applied, and the guard refuses a write as stale.
func TestExternalEditVisible(t *testing.T) {
	m := newMount(t, map[string]string{"src/a.go": "package a // v1\n"}, func(c *daemon.Config) { c.Debug = true })
	if got := m.mustSh("cat src/a.go && stat -c %s src/a.go"); got != "package a // v1\n16\n" {
		t.Fatalf("first read %q", got)
	}
	var worst time.Duration
	for i := 2; i <= 4; i++ {
		mark := m.appliedMark()
		content := "package a // v" + string(rune('0'+i)) + " longer now\n"
		m.writeBacking("src/a.go", content)
		waited := m.waitApplied(mark, "src/a.go")
		worst = max(worst, waited)
		if got := m.rawRead("src/a.go"); got != content {
			t.Fatalf("round %d: through the mount %q, want %q", i, got, content)
		}
	}
	t.Logf("external write to invalidation applied: at most %v (not asserted: see bench/)", worst)

	// Read, then an external edit: the next write is refused as stale.
	mark := m.appliedMark()
	m.writeBacking("src/a.go", "package a // edited by a human\n")
	m.waitApplied(mark, "src/a.go")
	m.mustFail("echo 'package a // agent' > src/a.go")
	if got := m.readBacking("src/a.go"); got != "package a // edited by a human\n" {
		t.Fatalf("refused write changed the file: %q", got)
	}
	if ds := m.denials(); len(ds) != 1 || ds[0]["code"] != "stale" {
		t.Fatalf("denials %v, want one stale", ds)
	}
	// An external touch with identical bytes keeps the record fresh.
	m.mustSh("cat src/a.go >/dev/null")
	mark = m.appliedMark()
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(m.backing("src/a.go"), future, future); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "src/a.go")
	m.mustSh("echo 'package a // agent' > src/a.go")
}

// TestExternalNamespaceChanges: names created, removed and renamed outside
// appear in ls through the mount, despite cached (negative) entries.
func TestExternalNamespaceChanges(t *testing.T) {
	m := newMount(t, map[string]string{"dir/keep": "k\n", "dir/gone": "g\n", "dir/old": "o\n"}, nil)
	// Cache the listing, the entries and a negative entry for "new".
	if got := m.mustSh("ls dir; test -e dir/new || echo absent"); got != "gone\nkeep\nold\nabsent\n" {
		t.Fatalf("first listing %q", got)
	}
	mark := m.appliedMark()
	m.writeBacking("dir/new", "n\n")
	if err := os.Remove(m.backing("dir/gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.backing("dir/old"), m.backing("dir/renamed")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"dir/new", "dir/gone", "dir/old", "dir/renamed"} {
		m.waitApplied(mark, rel)
	}
	if got := m.mustSh("ls dir && cat dir/new dir/renamed && test ! -e dir/old && test ! -e dir/gone"); got != "keep\nnew\nrenamed\nn\no\n" {
		t.Fatalf("after external changes %q", got)
	}
	// The loopback's inode tree followed the rename: the renamed file is
	// reachable and writable (after a read) under its new name.
	m.mustSh("cat dir/renamed >/dev/null && echo updated > dir/renamed")
	if got := m.readBacking("dir/renamed"); got != "updated\n" {
		t.Fatalf("write through the renamed name reached %q", got)
	}
}

// TestExternalDeepDirectory: a deep directory created outside is watched
// (changes inside it are seen) and its files, made before any watch could
// exist, are visible.
func TestExternalDeepDirectory(t *testing.T) {
	m := newMount(t, nil, nil)
	if got := m.mustSh("ls"); got != "" {
		t.Fatalf("empty workspace lists %q", got)
	}
	staging := filepath.Join(m.tmp, "staging")
	if err := os.MkdirAll(filepath.Join(staging, "a/b/c/d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "a/b/c/d/f"), []byte("v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mark := m.appliedMark()
	if err := os.Rename(filepath.Join(staging, "a"), m.backing("a")); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "a/b/c/d/f")
	if got := m.mustSh("cat a/b/c/d/f"); got != "v1\n" {
		t.Fatalf("deep file %q", got)
	}
	mark = m.appliedMark()
	m.writeBacking("a/b/c/d/f", "v2, longer\n")
	m.waitApplied(mark, "a/b/c/d/f")
	if got := m.rawRead("a/b/c/d/f"); got != "v2, longer\n" {
		t.Fatalf("deep file after external write %q", got)
	}
}

// TestOverflowInvalidatesAll: lost events (the watcher's Overflow, as on
// fsnotify's ErrEventOverflow) invalidate everything cached, are counted in
// status, and the mount keeps working.
func TestOverflowInvalidatesAll(t *testing.T) {
	m := newMount(t, map[string]string{"f": "v1\n"}, nil)
	m.mustSh("cat f >/dev/null")
	mark := m.appliedMark()
	m.d.Watcher.Overflow()
	m.waitApplied(mark, "")
	w := m.status()["watcher"].(map[string]any)
	if w["overflows"].(float64) != 1 || w["full_invalidations"].(float64) != 1 {
		t.Fatalf("watcher status after overflow: %v", w)
	}
	mark = m.appliedMark()
	m.writeBacking("f", "v2 after overflow\n")
	m.waitApplied(mark, "f")
	if got := m.rawRead("f"); got != "v2 after overflow\n" {
		t.Fatalf("after overflow %q", got)
	}
}

// TestWatchExhaustion: past the watch limit subtrees are reported in status
// and get short timeouts, so an external edit there is still visible; the
// guard still refuses a stale write.
func TestWatchExhaustion(t *testing.T) {
	files := map[string]string{"top.txt": "t\n"}
	for _, d := range []string{"a", "b", "c", "d"} {
		files[d+"/sub/f.txt"] = "v1\n"
	}
	m := newMount(t, files, func(c *daemon.Config) {
		c.MaxWatches = 3
		c.ShortTimeout = time.Nanosecond // effectively uncached, so no wait is needed
	})
	// The walk is in name order: the root, a and a/sub use the three
	// watches, and b, c and d are left unwatched.
	w := m.status()["watcher"].(map[string]any)
	if got := fmt.Sprint(w["unwatched"]); got != "[b c d]" {
		t.Fatalf("unwatched subtrees in status: %s, want [b c d]", got)
	}
	rel := "d/sub/f.txt"
	if got := m.mustSh("cat " + rel); got != "v1\n" {
		t.Fatalf("cat %s: %q", rel, got)
	}
	m.writeBacking(rel, "v2 unwatched\n")
	if got := m.rawRead(rel); got != "v2 unwatched\n" {
		t.Fatalf("unwatched %s after external edit: %q", rel, got)
	}
	m.writeBacking(rel, "v3 unwatched\n")
	m.mustFail("echo mine > " + rel)
	if got := m.readBacking(rel); got != "v3 unwatched\n" {
		t.Fatalf("refused write changed %s: %q", rel, got)
	}
}

// TestInPlaceMount mounts over the workspace itself: agents keep their
// paths, a writer holding a descriptor opened before the mount is seen
// through it, and unmounting leaves exactly what the last write left.
func TestInPlaceMount(t *testing.T) {
	var held *os.File
	m := newMount(t, map[string]string{"f.txt": "v1\n", "held.txt": "h1\n"}, func(c *daemon.Config) {
		c.InPlace = true
		// A descriptor opened before mounting reaches the underlying file.
		var err error
		if held, err = os.OpenFile(filepath.Join(c.Workspace, "held.txt"), os.O_WRONLY, 0); err != nil {
			t.Fatal(err)
		}
	})
	defer held.Close()
	ws := m.ws
	m.mustSh("cat f.txt >/dev/null && echo v2 > f.txt && cat held.txt >/dev/null")
	mark := m.appliedMark()
	if _, err := held.WriteAt([]byte("h2, from a held descriptor\n"), 0); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "held.txt")
	if got := m.rawRead("held.txt"); got != "h2, from a held descriptor\n" {
		t.Fatalf("held writer through the in-place mount: %q", got)
	}
	if !isMounted(t, ws) {
		t.Fatal("workspace is not a mount point")
	}
	if err := m.d.Close(); err != nil {
		t.Fatal(err)
	}
	if isMounted(t, ws) {
		t.Fatal("still mounted after Close")
	}
	for name, want := range map[string]string{"f.txt": "v2\n", "held.txt": "h2, from a held descriptor\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("after unmount %s = %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, ".rubino")); !os.IsNotExist(err) {
		t.Errorf(".rubino left in the workspace: %v", err)
	}
}
