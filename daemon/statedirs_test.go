package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stateFixture makes a state directory name under root: with a lock file
// (lock), a marker naming ws ("" none), and extra files; every entry's
// mtime and the directory's set to used.
func stateFixture(t *testing.T, root, name string, lock bool, ws string, used time.Time, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(dir, "journal", "blobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "journal", "blobs", "x"), []byte("pre-image"), 0o600)
	if lock {
		os.WriteFile(filepath.Join(dir, LockFileName), []byte("pid 1\nmountpoint /m\n"), 0o600)
	}
	if ws != "" {
		if err := writeMarker(dir, ws, "/m"); err != nil {
			t.Fatal(err)
		}
	}
	for n, c := range files {
		os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.Chtimes(filepath.Join(dir, e.Name()), used, used)
	}
	os.Chtimes(dir, used, used)
	return dir
}

// TestStateDirSelection: of the directories under a state root, a prune
// selects exactly those rubinofs made (marker, or with --legacy a lock
// file) whose workspace is gone, that no mount holds, and that were
// unused for --older-than; it removes them and keeps every other.
func TestStateDirSelection(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "root")
	os.Mkdir(root, 0o700)
	live := filepath.Join(tmp, "live-ws")
	os.Mkdir(live, 0o755)
	goneWS := filepath.Join(tmp, "gone-ws")
	old := time.Now().Add(-40 * 24 * time.Hour)
	now := time.Now()

	dirs := map[string]string{
		"gone-old":    stateFixture(t, root, "gone-old", true, goneWS, old, nil),
		"gone-recent": stateFixture(t, root, "gone-recent", true, goneWS+"2", now, nil),
		"live":        stateFixture(t, root, "live", true, live, old, nil),
		"in-use":      stateFixture(t, root, "in-use", true, goneWS+"3", old, nil),
		"foreign":     stateFixture(t, root, "foreign", false, "", old, map[string]string{"notes": "mine"}),
		// Made before the marker: a lock file, no record.
		"legacy-gone": stateFixture(t, root, "nonexistent-rubinofs-test-dir", true, "", old, nil),
		"legacy-name": stateFixture(t, root, strings.ReplaceAll(strings.Trim(live, "/"), "/", "-"), true, "", old, nil),
		"legacy-log": stateFixture(t, root, "nonexistent-rubinofs-logged", true, "", old, map[string]string{
			"rubinofs.log": "time=2026-01-01T00:00:00Z level=INFO msg=mounted workspace=" + live + " mountpoint=/m\n"}),
	}
	// A symlink in the root is never followed, nor its target removed.
	target := stateFixture(t, tmp, "elsewhere", true, goneWS+"4", old, nil)
	os.Symlink(target, filepath.Join(root, "link"))
	held, err := lockState(dirs["in-use"], "/live-mount")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	infos, err := ScanStateRoot(root, os.Geteuid(), false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		dirs["gone-old"]: StateGone, dirs["gone-recent"]: StateGone, dirs["live"]: StateLive,
		dirs["in-use"]: StateInUse, dirs["foreign"]: StateForeign, dirs["legacy-gone"]: StateLegacyGone,
		dirs["legacy-name"]: StateLegacy, dirs["legacy-log"]: StateLegacy,
	}
	if len(infos) != len(want) {
		t.Errorf("scanned %d directories, want %d: %+v", len(infos), len(want), infos)
	}
	for _, i := range infos {
		if want[i.Dir] != i.Kind {
			t.Errorf("%s: kind %q, want %q", i.Dir, i.Kind, want[i.Dir])
		}
		if i.Kind == StateInUse && (i.HolderPid != os.Getpid() || i.Workspace != goneWS+"3") {
			t.Errorf("in use: pid %d workspace %q, want %d and its record", i.HolderPid, i.Workspace, os.Getpid())
		}
		if i.Dir == dirs["legacy-name"] && i.Workspace != live {
			t.Errorf("legacy by name: workspace %q, want %s", i.Workspace, live)
		}
	}

	exists := func(d string) bool { _, err := os.Lstat(d); return err == nil }
	// A dry run removes nothing.
	sel, err := PruneStateRoot(PruneOptions{Root: root, UID: os.Geteuid(), OlderThan: 24 * time.Hour, DryRun: true})
	if err != nil || len(sel) != 1 || sel[0].Dir != dirs["gone-old"] || sel[0].Size <= 0 || !exists(dirs["gone-old"]) {
		t.Fatalf("dry run: %v %+v", err, sel)
	}
	// Older than a day: the old gone one only.
	if got, err := PruneStateRoot(PruneOptions{Root: root, UID: os.Geteuid(), OlderThan: 24 * time.Hour}); err != nil || len(got) != 1 {
		t.Fatalf("prune --older-than 24h: %v %+v", err, got)
	}
	if exists(dirs["gone-old"]) || !exists(dirs["gone-recent"]) {
		t.Fatalf("after --older-than 24h: gone-old exists %v, gone-recent exists %v", exists(dirs["gone-old"]), exists(dirs["gone-recent"]))
	}
	// Any age, with legacy: the recent gone one and the legacy gone one.
	if got, err := PruneStateRoot(PruneOptions{Root: root, UID: os.Geteuid(), Legacy: true}); err != nil || len(got) != 2 {
		t.Fatalf("prune --legacy: %v %+v", err, got)
	}
	for name, d := range dirs {
		kept := !strings.HasPrefix(name, "gone") && name != "legacy-gone"
		if exists(d) != kept {
			t.Errorf("%s: exists %v, want %v", name, exists(d), kept)
		}
	}
	if !exists(target) || !exists(filepath.Join(root, "link")) {
		t.Error("a symlink in the state root was followed")
	}
	if ents, _ := os.ReadDir(root); len(ents) != 6 { // in-use, live, foreign, two legacy, link
		t.Errorf("root holds %d entries after pruning, want 6", len(ents))
	}
}

// TestStateDirRemovable: the selection rule alone.
func TestStateDirRemovable(t *testing.T) {
	now := time.Now()
	old, recent := now.Add(-31*24*time.Hour), now.Add(-time.Hour)
	for _, c := range []struct {
		kind   string
		used   time.Time
		older  time.Duration
		legacy bool
		want   bool
	}{
		{StateGone, old, 30 * 24 * time.Hour, false, true},
		{StateGone, recent, 30 * 24 * time.Hour, false, false},
		{StateGone, recent, 0, false, true},
		{StateLegacyGone, old, 0, false, false},
		{StateLegacyGone, old, 0, true, true},
		{StateInUse, old, 0, true, false},
		{StateLive, old, 0, true, false},
		{StateLegacy, old, 0, true, false},
		{StateForeign, old, 0, true, false},
	} {
		i := StateDirInfo{Kind: c.kind, LastUse: c.used}
		if got := i.Removable(now, c.older, c.legacy); got != c.want {
			t.Errorf("%q used %v ago, older-than %v, legacy %v: removable %v, want %v", c.kind, now.Sub(c.used).Round(time.Hour), c.older, c.legacy, got, c.want)
		}
	}
}

// TestStateRootTrust: a prune refuses a root another uid owns or others
// may write, and skips entries another uid owns.
func TestStateRootTrust(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	os.Mkdir(root, 0o700)
	stateFixture(t, root, "gone", true, "/nonexistent/rubinofs/ws", time.Now(), nil)
	if _, err := PruneStateRoot(PruneOptions{Root: root, UID: os.Geteuid() + 1}); err == nil || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("another uid's root: %v", err)
	}
	if infos, err := ScanStateRoot(root, os.Geteuid(), false); err != nil || len(infos) != 1 {
		t.Fatalf("own root: %v %+v", err, infos)
	}
	os.Chmod(root, 0o777)
	if _, err := PruneStateRoot(PruneOptions{Root: root, UID: os.Geteuid()}); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a root others may write: %v", err)
	}
	os.Chmod(root, 0o700)
	if os.Geteuid() == 0 {
		os.Lchown(filepath.Join(root, "gone"), 65534, 65534)
		if infos, _ := ScanStateRoot(root, 0, false); len(infos) != 0 {
			t.Errorf("an entry of uid 65534 was listed in root's state root: %+v", infos)
		}
	}
}

// TestLegacyWorkspaceGuess: a legacy directory's workspace from its log
// (text or JSON records, a quoted value) and from its name.
func TestLegacyWorkspaceGuess(t *testing.T) {
	for line, want := range map[string]string{
		`time=x level=INFO msg=mounted workspace=/a/b mountpoint=/m`:        "/a/b",
		`time=x level=INFO msg=mounted workspace="/a b/c" mountpoint=/m`:    "/a b/c",
		`{"time":"x","level":"INFO","msg":"mounted","workspace":"/j/k"}`:    "/j/k",
		`time=x level=INFO msg="read state restored" workspace=/no`:         "",
		`time=x level=INFO msg=mounted workspace=relative mountpoint=/m`:    "",
		`{"time":"x","level":"INFO","msg":"unmounting","workspace":"/j/k"}`: "",
	} {
		if got := mountedWorkspace(line); got != want {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "my-proj", "sub-dir")
	os.MkdirAll(ws, 0o755)
	name := strings.ReplaceAll(strings.Trim(ws, "/"), "/", "-")
	if got, found, sure := decodeStateName(name); !found || !sure || got != ws {
		t.Errorf("decode %s: %q %v %v, want %s", name, got, found, sure, ws)
	}
	os.RemoveAll(ws)
	if got, found, sure := decodeStateName(name); found || !sure {
		t.Errorf("decode %s after removal: %q %v %v, want not found, sure", name, got, found, sure)
	}
}

// TestMarkerKeepsCreated: a remount rewrites the marker with its first
// creation time.
func TestMarkerKeepsCreated(t *testing.T) {
	dir := t.TempDir()
	if err := writeMarker(dir, "/w", "/m"); err != nil {
		t.Fatal(err)
	}
	first, _ := readMarker(dir)
	if err := writeMarker(dir, "/w", "/m2"); err != nil {
		t.Fatal(err)
	}
	m, err := readMarker(dir)
	if err != nil || !m.Created.Equal(first.Created) || m.Mountpoint != "/m2" || m.Workspace != "/w" {
		t.Errorf("marker after a remount: %+v %v (first %+v)", m, err, first)
	}
}
