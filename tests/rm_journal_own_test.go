package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRmJournalLinkedIsOwn: `rm -rf` of a tree the session read, with
// the journal on, links each doomed file into the journal's store (the
// blob is the file's own inode) and removes it as the daemon's own
// change: the watcher takes none of the removals, nor the journal's
// links, for an outside edit (docs/DESIGN.md#own-bracket-journal). An
// outside write racing with the session (between its read and its rm) is
// still reported as external, and the guard refuses the rm of the file
// that changed since the read.
func TestRmJournalLinkedIsOwn(t *testing.T) {
	files := map[string]string{"race.txt": "v1\n"}
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		files["tree/"+n+".txt"] = "file " + n + "\n"
		files["tree/sub/"+n+".go"] = "package " + n + "\n"
	}
	m := newMount(t, files, nil)
	inos := map[uint64]string{}
	for rel := range files {
		if st, err := os.Lstat(m.backing(rel)); err == nil {
			inos[st.Sys().(*syscall.Stat_t).Ino] = rel
		}
	}
	m.mustSh("cat tree/*.txt tree/sub/*.go race.txt >/dev/null")
	// cat's handles are released in the background: a file still open
	// through the mount is copied into the store, not linked (its handle
	// may write more), and a CI run saw 11 of the 12 linked.
	m.waitHandlesReleased()
	m.mustSh("rm -rf tree")
	if _, err := os.Lstat(m.backing("tree")); !os.IsNotExist(err) {
		t.Fatalf("tree after rm -rf: %v", err)
	}
	linked := 0
	filepath.WalkDir(filepath.Join(m.state, "journal"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if st, err := os.Lstat(p); err == nil && inos[st.Sys().(*syscall.Stat_t).Ino] != "" {
				linked++
			}
		}
		return nil
	})
	if linked != 12 {
		t.Errorf("%d of the 12 removed files are linked in the journal's store, want all", linked)
	}
	m.drainWatcher("sentinel-1")
	m.assertNoExternal()

	// An outside write between the read and the rm: reported, and the rm refused.
	mark := m.appliedMark()
	m.writeBacking("race.txt", "outside\n")
	if out := m.mustFail("rm race.txt"); !strings.Contains(out, "ermission") && !strings.Contains(out, "not permitted") {
		t.Errorf("rm of a file changed outside since the read: %q, want a refusal", out)
	}
	m.waitApplied(mark, "race.txt")
	if got := m.readBacking("race.txt"); got != "outside\n" {
		t.Fatalf("race.txt = %q after the refused rm", got)
	}
}
