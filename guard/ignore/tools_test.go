package ignore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nextTick returns once a file made in root is born later than the file
// rel: the file system stamps births with a coarse clock, and a test
// that means "made after" must not share its tick.
func nextTick(t *testing.T, root, rel string) {
	t.Helper()
	var ref, probe unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, filepath.Join(root, rel), 0, unix.STATX_BTIME, &ref); err != nil || ref.Mask&unix.STATX_BTIME == 0 {
		t.Skipf("no birth time here: %v", err)
	}
	p := filepath.Join(root, ".tick")
	for {
		os.WriteFile(p, nil, 0o644)
		unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_BTIME, &probe)
		os.Remove(p)
		if probe.Btime.Sec > ref.Btime.Sec || probe.Btime.Sec == ref.Btime.Sec && probe.Btime.Nsec > ref.Btime.Nsec {
			return
		}
	}
}

// mk writes rel under root with content, owned by uid (-1: as made), and
// returns its inode.
func mk(t *testing.T, root, rel, content string, uid int) fileID {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Skipf("chown needs root: %v", err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fileID{uint64(st.Dev), st.Ino}
}

// fileID is a file's st_dev and st_ino.
type fileID struct{ dev, ino uint64 }

// mountedPolicy is a policy whose span (a mount serving the workspace)
// began before anything the test makes: every marker is a session's.
func mountedPolicy(t *testing.T, root string) *Policy {
	t.Helper()
	p, err := NewPolicy(root, "")
	if err != nil {
		t.Fatal(err)
	}
	p.spans = []span{{From: time.Now().Add(-time.Minute).UnixNano()}}
	return p
}

// TestToolsSessionMarker: a marker made while mounted exempts only files
// born after it, owned by its own uid, for a caller of that uid.
func TestToolsSessionMarker(t *testing.T) {
	root := t.TempDir()
	old := mk(t, root, "lib/old.txt", "old", 0)
	nextTick(t, root, "lib/old.txt")
	mk(t, root, "lib/pyvenv.cfg", "home = /usr/bin\n", 0)
	newer := mk(t, root, "lib/sub/new.py", "x", 0)
	other := mk(t, root, "lib/sub/other.py", "x", 65534)
	tools, err := NewTools(root, DefaultToolMarkers, mountedPolicy(t, root))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rel  string
		uid  uint32
		ino  fileID
		want bool
	}{
		{"lib/old.txt", 0, old, false},            // there before the marker
		{"lib/sub/new.py", 0, newer, true},        // after it, same uid
		{"lib/sub/new.py", 65534, newer, false},   // another uid's caller
		{"lib/sub/other.py", 65534, other, false}, // the marker is uid 0's
		{"lib/sub/other.py", 0, other, false},     // the file is another uid's
		{"lib/sub/new.py", 0, old, false},         // the name leads to another inode
	} {
		if got := tools.Exempt(c.rel, c.uid, c.ino.dev, c.ino.ino); got != c.want {
			t.Errorf("Exempt(%s, uid %d) = %v, want %v", c.rel, c.uid, got, c.want)
		}
	}
}

// TestToolsAcceptedMarker: a marker born before the mount exempts its
// whole tree, for every uid, like an accepted ignore rule.
func TestToolsAcceptedMarker(t *testing.T) {
	root := t.TempDir()
	mk(t, root, "node_modules/a/index.js", "x", 0)
	ino := mk(t, root, "node_modules/a/lib/x.js", "x", 0)
	p, err := NewPolicy(root, "") // the span starts now: both are older
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := NewTools(root, DefaultToolMarkers, p)
	if !tools.Exempt("node_modules/a/lib/x.js", 65534, ino.dev, ino.ino) {
		t.Error("a file of a node_modules that predates the mount is guarded")
	}
	none, _ := NewTools(root, nil, p)
	if none.Exempt("node_modules/a/lib/x.js", 0, ino.dev, ino.ino) {
		t.Error("exempt with no markers configured")
	}
}

// TestToolsMarkerContent: CACHEDIR.TAG counts only with its signature; a
// marker is not looked for in the workspace root or through a symbolic
// link.
func TestToolsMarkerContent(t *testing.T) {
	root := t.TempDir()
	mk(t, root, "c/CACHEDIR.TAG", "not the signature\n", 0)
	bad := mk(t, root, "c/x", "x", 0)
	mk(t, root, "d/CACHEDIR.TAG", CacheDirSignature+"\n# made by a tool\n", 0)
	good := mk(t, root, "d/x", "x", 0)
	mk(t, root, "pyvenv.cfg", "", 0)
	top := mk(t, root, "top.txt", "x", 0)
	if err := os.Symlink("d", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	tools, _ := NewTools(root, DefaultToolMarkers, mountedPolicy(t, root))
	for _, c := range []struct {
		rel  string
		ino  fileID
		want bool
	}{{"c/x", bad, false}, {"d/x", good, true}, {"top.txt", top, false}, {"link/x", good, false}} {
		if got := tools.Exempt(c.rel, 0, c.ino.dev, c.ino.ino); got != c.want {
			t.Errorf("Exempt(%s) = %v, want %v", c.rel, got, c.want)
		}
	}
}

// TestToolsKeptAfterMarkerGone: Changing keeps a directory's markers, so
// the files of a venv whose pyvenv.cfg went first stay exempt; another
// directory reusing nothing of it gains nothing.
func TestToolsKeptAfterMarkerGone(t *testing.T) {
	root := t.TempDir()
	mk(t, root, "v/pyvenv.cfg", "", 0)
	ino := mk(t, root, "v/lib/site-packages/p/m.py", "x", 0)
	tools, _ := NewTools(root, DefaultToolMarkers, mountedPolicy(t, root))
	tools.Changing("v/pyvenv.cfg")
	os.Remove(filepath.Join(root, "v/pyvenv.cfg"))
	if !tools.Exempt("v/lib/site-packages/p/m.py", 0, ino.dev, ino.ino) {
		t.Error("the venv's files lost their exemption with pyvenv.cfg")
	}
	ino2 := mk(t, root, "w/m.py", "x", 0)
	if tools.Exempt("w/m.py", 0, ino2.dev, ino2.ino) {
		t.Error("a directory without a marker is exempt")
	}
}

func TestParseToolMarker(t *testing.T) {
	for _, s := range DefaultToolMarkers {
		if err := ParseToolMarker(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "/", "a/b", "../", ".git/", "TAG:", "x/:y"} {
		if ParseToolMarker(s) == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestToolsMoved: a rename or link never gives guarded content a tool
// tree's exemption: an old file or directory given a marker's name, or
// covered content moved below a marker it is not below.
func TestToolsMoved(t *testing.T) {
	root := t.TempDir()
	mk(t, root, "src/main.c", "x", 0)
	mk(t, root, "src/dir/x.c", "x", 0)
	mk(t, root, "o2/a.c", "x", 0)
	mk(t, root, "t/node_modules/pkg/index.js", "x", 0)
	mk(t, root, "t/x/keep", "x", 0)
	mk(t, root, "venv/pyvenv.cfg", "home = /usr/bin\n", 0)
	mk(t, root, "venv/lib/x.py", "x", 0)
	if err := os.Symlink("src", filepath.Join(root, "lnk")); err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(root, "") // its span starts now: all above is accepted
	if err != nil {
		t.Fatal(err)
	}
	nextTick(t, root, "venv/lib/x.py")
	mk(t, root, "s/new.c", "x", 0) // born while mounted
	mk(t, root, "s2/node_modules/a/i.js", "x", 0)
	mk(t, root, "s2/node_modules/b/i.js", "x", 0)
	nextTick(t, root, "s2/node_modules/b/i.js")
	mk(t, root, "s/newer.c", "x", 0) // born after the session's marker
	tools, err := NewTools(root, DefaultToolMarkers, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, dst string
		dir      bool
		uid      uint32
		want     MoveFreed
	}{
		{"src", "node_modules", true, 0, FreesTree},                          // becomes a marker
		{"src", "t/node_modules/src", true, 0, FreesTree},                    // below an accepted marker
		{"src", "s2/node_modules/src", true, 0, FreesTree},                   // below a session's marker
		{"src", "src2", true, 0, FreesNothing},                               // an ordinary name
		{"o2/a.c", "o2/pyvenv.cfg", false, 0, FreesNothing},                  // a file marker counts from the rename (TestToolsMarkerCtime)
		{"src/main.c", "t/node_modules/pkg/main.c", false, 0, FreesFile},     // below an accepted marker
		{"src/main.c", "t/node_modules/pkg/main.c", false, 65534, FreesFile}, // for every uid
		{"src/main.c", "s2/node_modules/a/main.c", false, 0, FreesNothing},   // born before the session's marker
		{"s/newer.c", "s2/node_modules/a/newer.c", false, 0, FreesFile},      // born after it, the marker's uid
		{"s/newer.c", "s2/node_modules/a/newer.c", false, 65534, FreesNothing},
		{"src/main.c", "src/other.c", false, 0, FreesNothing},                        // the same directory
		{"src/main.c", "o2/main.c", false, 0, FreesNothing},                          // no marker
		{"src/main.c", "main.c", false, 0, FreesNothing},                             // to the root
		{"t/node_modules/pkg/index.js", "venv/lib/index.js", false, 0, FreesNothing}, // free where it is
		{"s2/node_modules/b/i.js", "t/node_modules/pkg/i.js", false, 0, FreesFile},   // free where it is by a session's marker only
		{"t/node_modules/pkg", "t/x/node_modules", true, 0, FreesNothing},            // all below it free already
		{"s2/node_modules/a", "s2/node_modules/b/a", true, 0, FreesNothing},          // within one tree
		{"lnk/main.c", "t/node_modules/pkg/main.c", false, 0, FreesNothing},          // through a symbolic link: not read
	} {
		if got := tools.Moved(c.src, c.dst, c.dir, c.uid); got != c.want {
			t.Errorf("Moved(%s, %s, dir %v, uid %d) = %d, want %d", c.src, c.dst, c.dir, c.uid, got, c.want)
		}
	}
	if none, _ := NewTools(root, nil, p); none.Moved("src", "node_modules", true, 0) != FreesNothing {
		t.Error("a tree freed with no markers configured")
	}
}

// BenchmarkToolsMoved: the check of a file renamed into another
// directory four levels down (what a guarded caller's rename across
// directories costs beyond the rename), with no marker above either name
// (dst's side is read alone) and with a node_modules above dst (both).
func BenchmarkToolsMoved(b *testing.B) {
	root := b.TempDir()
	for _, d := range []string{"a/b/c/d", "a/b/c/e", "a/node_modules/c/e"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a/b/c/d/x.c"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	p, err := NewPolicy(root, "")
	if err != nil {
		b.Fatal(err)
	}
	tools, _ := NewTools(root, DefaultToolMarkers, p)
	for _, c := range []struct{ name, dst string }{{"plain", "a/b/c/e/x.c"}, {"marker", "a/node_modules/c/e/x.c"}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				tools.Moved("a/b/c/d/x.c", c.dst, false, 0)
			}
		})
	}
}

// TestToolsMarkerCtime: a file marker counts from its ctime when that is
// later than its birth. An old file renamed to pyvenv.cfg, or an old
// README rewritten to the Go cache's, while mounted, is a session's
// marker, which frees none of the old files beside it; an old marker
// left alone is an accepted one.
func TestToolsMarkerCtime(t *testing.T) {
	root := t.TempDir()
	mk(t, root, "a/x.c", "x", 0)
	sib := mk(t, root, "a/b.c", "b", 0)
	mk(t, root, "r/README", "hello\n", 0)
	rsib := mk(t, root, "r/b.c", "b", 0)
	mk(t, root, "v/pyvenv.cfg", "home = /usr/bin\n", 0)
	vsib := mk(t, root, "v/b.c", "b", 0)
	p, err := NewPolicy(root, "") // its span starts now: all above is accepted
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := NewTools(root, DefaultToolMarkers, p)
	if !tools.Exempt("v/b.c", 0, vsib.dev, vsib.ino) {
		t.Fatal("an untouched marker older than the mount frees nothing")
	}
	// The file system's coarse clock must have passed the span's start.
	for probe := filepath.Join(root, ".probe"); ; {
		os.WriteFile(probe, nil, 0o644)
		var st unix.Statx_t
		unix.Statx(unix.AT_FDCWD, probe, 0, unix.STATX_BTIME, &st)
		os.Remove(probe)
		if p.Held(st.Btime.Sec*1e9 + int64(st.Btime.Nsec)) {
			break
		}
	}
	if err := os.Rename(filepath.Join(root, "a/x.c"), filepath.Join(root, "a/pyvenv.cfg")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "r/README"), []byte(goCacheREADME+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tools.Exempt("a/b.c", 0, sib.dev, sib.ino) {
		t.Error("an old file renamed to pyvenv.cfg frees the old files beside it")
	}
	if tools.Exempt("r/b.c", 0, rsib.dev, rsib.ino) {
		t.Error("an old README rewritten to the Go cache's frees the old files beside it")
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(root, "a/pyvenv.cfg"), &st); err != nil {
		t.Fatal(err)
	}
	if tools.Exempt("a/pyvenv.cfg", 0, uint64(st.Dev), st.Ino) {
		t.Error("an old file renamed to pyvenv.cfg is free as its own tree's")
	}
	// A marker made while mounted, its content written after its birth,
	// belongs to its tree.
	mk(t, root, "n/pyvenv.cfg", "", 0)
	nextTick(t, root, "n/pyvenv.cfg")
	if err := os.WriteFile(filepath.Join(root, "n/pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(root, "n/pyvenv.cfg"), &st); err != nil {
		t.Fatal(err)
	}
	if !tools.Exempt("n/pyvenv.cfg", 0, uint64(st.Dev), st.Ino) {
		t.Error("a session's marker, written after its birth, is not its own tree's")
	}
}
