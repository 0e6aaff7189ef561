package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// listOps reads the mount's READDIR and READDIRPLUS counters through
// .rubino/metrics (reading the file lists no directory).
func listOps(t *testing.T, m *mount) float64 {
	t.Helper()
	fams := scrapeMetrics(t, m)
	var sum float64
	for _, op := range []string{"readdir", "readdirplus"} {
		v, _ := metricValue(fams, "rubinofs_fuse_ops_total", "op", op)
		sum += v
	}
	return sum
}

// cachedListing lists dir through the mount twice and fails unless the
// second listing was served from the kernel's readdir cache (no READDIR or
// READDIRPLUS): the precondition of the invalidation tests below. It
// returns the listing.
func cachedListing(t *testing.T, m *mount, dir string) string {
	t.Helper()
	first := m.mustSh("ls -a " + shq(dir))
	before := listOps(t, m)
	second := m.mustSh("ls -a " + shq(dir))
	if d := listOps(t, m) - before; d != 0 {
		t.Fatalf("a second listing of unchanged %q sent %v READDIR/READDIRPLUS, want 0 (readdir cache, docs/DESIGN.md#dir-cache)", dir, d)
	}
	if first != second {
		t.Fatalf("cached listing of %q is %q, first was %q", dir, second, first)
	}
	return second
}

// TestReaddirCacheSecondWalk: a second find (and ls -R) of an unchanged tree
// from the mount root is served from the kernel's readdir cache: no READDIR
// or READDIRPLUS reaches the daemon, the output is the same, and the root's
// listing still leaves out .rubino, also a real .rubino directory in the
// workspace (docs/DESIGN.md#control-tree-visibility).
func TestReaddirCacheSecondWalk(t *testing.T) {
	files := map[string]string{
		"top.txt": "t\n", ".rubino/real": "shadowed\n", "empty/.keep": "",
	}
	for _, d := range []string{"a", "a/b", "a/b/c", "d", "d/e"} {
		for _, f := range []string{"1", "2", "3"} {
			files[d+"/f"+f] = d + f + "\n"
		}
	}
	// Enough root entries for several READDIRPLUS pages and cache pages.
	var rootNames []string
	for i := range 200 {
		name := fmt.Sprintf("root-file-with-a-long-name-to-fill-pages-%03d", i)
		files[name] = ""
		rootNames = append(rootNames, name)
	}
	m := newMount(t, files, nil)
	first := m.mustSh("find . | sort")
	if strings.Contains(first, ".rubino") {
		t.Fatalf("find lists the control tree:\n%s", first)
	}
	before := listOps(t, m)
	second := m.mustSh("find . | sort")
	lsR := m.mustSh("ls -aR")
	if d := listOps(t, m) - before; d != 0 {
		t.Errorf("second walk of an unchanged tree sent %v READDIR/READDIRPLUS, want 0", d)
	}
	if second != first {
		t.Errorf("second find differs:\n%s\nfirst:\n%s", second, first)
	}
	if strings.Contains(lsR, ".rubino") {
		t.Errorf("ls -aR lists the control tree:\n%s", lsR)
	}
	// The cached root listing (several cache pages) read by another
	// reader holds every name once, and not .rubino.
	got := m.mustSh(`python3 -c 'import os; print("\n".join(os.listdir(".")))' | sort`)
	want := strings.Join(append([]string{"a", "d", "empty"}, append(rootNames, "top.txt")...), "\n") + "\n"
	if got != want {
		t.Errorf("root listing %q, want %q", got, want)
	}
	// The control tree is still reachable by name.
	if got := m.mustSh("test -f .rubino/metrics && echo ok"); got != "ok\n" {
		t.Errorf(".rubino/metrics by name: %q", got)
	}
}

// TestReaddirCacheExternalChanges: with a directory's listing cached by the
// kernel, a file created, removed or renamed in the backing directory shows
// in the very next listing once the watcher's event is applied (the
// invalidator drops the cached listing), in a subdirectory and at the root.
func TestReaddirCacheExternalChanges(t *testing.T) {
	m := newMount(t, map[string]string{"dir/keep": "k\n", "dir/gone": "g\n", "dir/old": "o\n", "rootfile": "r\n"}, nil)
	if got := cachedListing(t, m, "dir"); got != ".\n..\ngone\nkeep\nold\n" {
		t.Fatalf("first listing %q", got)
	}
	step := func(what string, change func(), rels []string, dir, want string) {
		t.Helper()
		mark := m.appliedMark()
		change()
		for _, rel := range rels {
			m.waitApplied(mark, rel)
		}
		if got := m.mustSh("ls -a " + shq(dir)); got != want {
			t.Fatalf("after external %s: %s lists %q, want %q", what, dir, got, want)
		}
		cachedListing(t, m, dir) // cached again
	}
	step("create", func() { m.writeBacking("dir/new", "n\n") }, []string{"dir/new"},
		"dir", ".\n..\ngone\nkeep\nnew\nold\n")
	step("unlink", func() {
		if err := os.Remove(m.backing("dir/gone")); err != nil {
			t.Fatal(err)
		}
	}, []string{"dir/gone"}, "dir", ".\n..\nkeep\nnew\nold\n")
	step("rename", func() {
		if err := os.Rename(m.backing("dir/old"), m.backing("dir/renamed")); err != nil {
			t.Fatal(err)
		}
	}, []string{"dir/old", "dir/renamed"}, "dir", ".\n..\nkeep\nnew\nrenamed\n")

	// The root: cached, then an external create; .rubino stays hidden.
	if got := cachedListing(t, m, "."); got != ".\n..\ndir\nrootfile\n" {
		t.Fatalf("root listing %q", got)
	}
	step("create at the root", func() { m.writeBacking("zz", "z\n") }, []string{"zz"},
		".", ".\n..\ndir\nrootfile\nzz\n")
	step("mkdir .rubino at the root", func() {
		if err := os.Mkdir(m.backing(".rubino"), 0o755); err != nil {
			t.Fatal(err)
		}
	}, []string{".rubino"}, ".", ".\n..\ndir\nrootfile\nzz\n")
}

// TestReaddirCacheOwnChanges: with a directory's listing cached by the
// kernel, every namespace change made through the mount (create, unlink,
// rename, mkdir, rmdir, symlink, link, mknod) shows in the very next
// listing, with no wait: the kernel drops its own cache for these.
func TestReaddirCacheOwnChanges(t *testing.T) {
	m := newMount(t, map[string]string{"dir/a": "a\n"}, nil)
	steps := []struct{ script, want string }{
		{"echo b > dir/b", "a b"},
		{"cat dir/a >/dev/null && rm dir/a", "b"},
		{"mv dir/b dir/c", "c"},
		{"mkdir dir/sub", "c sub"},
		{"ln -s c dir/sym", "c sub sym"},
		{"ln dir/c dir/hard", "c hard sub sym"},
		{"mkfifo dir/fifo", "c fifo hard sub sym"},
		{"rmdir dir/sub", "c fifo hard sym"},
		{"mv dir/hard x", "c fifo sym"},
		{"mv x dir/hard", "c fifo hard sym"},
	}
	for _, s := range steps {
		cachedListing(t, m, "dir")
		m.mustSh(s.script)
		got := strings.Join(strings.Fields(m.mustSh("ls dir")), " ")
		if got != s.want {
			t.Fatalf("after %q: dir lists %q, want %q", s.script, got, s.want)
		}
	}
}

// TestReaddirCacheNotInUnwatched: a subtree the watcher does not watch
// (.git/objects, skipped by default) gets no readdir cache: every listing
// reaches the daemon, so a file created there outside the mount shows in
// the very next listing, with no event to wait for; a watched sibling is
// cached.
func TestReaddirCacheNotInUnwatched(t *testing.T) {
	m := newMount(t, map[string]string{".git/objects/ab/cd": "x", ".git/HEAD": "ref\n"}, nil)
	cachedListing(t, m, ".git")
	m.mustSh("ls .git/objects/ab")
	before := listOps(t, m)
	m.mustSh("ls .git/objects/ab")
	if d := listOps(t, m) - before; d == 0 {
		t.Fatalf("a listing in an unwatched subtree was served from the kernel's cache")
	}
	m.writeBacking(".git/objects/ab/ef", "y")
	if got := m.mustSh("ls .git/objects/ab"); got != "cd\nef\n" {
		t.Fatalf("unwatched directory lists %q after an external create, want cd and ef", got)
	}
}
