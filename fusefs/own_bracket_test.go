package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/journal"
)

// TestMutateOwnBracketCoversJournalLink: the own-change bracket of an
// unlink opens before the journal links the doomed file into its store
// (docs/DESIGN.md#own-bracket-journal): when the bracket begins the file
// still has its one link (the watcher needs no O_PATH open to follow it
// under another name), the journal's link is made inside the bracket, and
// the name is gone when it ends.
func TestMutateOwnBracketCoversJournalLink(t *testing.T) {
	f, j, ws := journalFS(t, guard.ModeEnforce, map[string]string{"a/f": "content\n"})
	p := filepath.Join(ws, "a/f")
	old := time.Now().Add(-time.Hour) // not racy: the hash cache trusts it
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	h, err := f.cfg.Guard.Hashes().Sum(guard.StatOf(&st), func() (*os.File, error) { return os.Open(p) })
	if err != nil {
		t.Fatal(err)
	}
	blob := j.Blobs().Path(h.String())
	var atBegin syscall.Stat_t
	began, blobAtBegin, nameAtEnd, blobAtEnd := false, true, true, false
	f.oc.begin = func(rels ...string) func() {
		if len(rels) == 1 && rels[0] == "a/f" {
			began = syscall.Lstat(p, &atBegin) == nil
			_, err := os.Lstat(blob)
			blobAtBegin = err == nil
		}
		return func() {
			_, err := os.Lstat(p)
			nameAtEnd = err == nil
			_, err = os.Lstat(blob)
			blobAtEnd = err == nil
		}
	}
	m := unlinkMutation(ws, "a/f")
	c := caller{session: "s1"}
	m.by, m.kind = &c, rewind
	if errno := f.mutate(context.Background(), m); errno != 0 {
		t.Fatal(errno)
	}
	if !began || atBegin.Nlink != 1 || blobAtBegin {
		t.Errorf("at the bracket's begin: found %v, nlink %d, blob stored %v; want the file with one link, the blob not yet stored", began, atBegin.Nlink, blobAtBegin)
	}
	if nameAtEnd || !blobAtEnd {
		t.Errorf("at the bracket's end: name present %v, blob stored %v; want the name gone, the blob stored", nameAtEnd, blobAtEnd)
	}
	var bst syscall.Stat_t
	if err := syscall.Lstat(blob, &bst); err != nil || bst.Ino != st.Ino {
		t.Fatalf("blob %s: %v, inode %d; want the doomed file's inode %d linked", blob, err, bst.Ino, st.Ino)
	}
	if recs := changeRecords(t, j, "s1"); len(recs) != 2 || recs[1].Pre[0].Blob != h.String() {
		t.Fatalf("records %+v, want the unlink with blob %s", recs, h)
	}
}

// TestMutateRmdirInJournalDir: a journaled rmdir (no lock step, so no
// parent descriptor of its own) removes the directory through the parent
// descriptor the journal captured it in, not a second resolution of the
// path (docs/DESIGN.md#own-bracket-journal).
func TestMutateRmdirInJournalDir(t *testing.T) {
	f, j, ws := journalFS(t, guard.ModeEnforce, map[string]string{"a/keep": "x"})
	if err := os.Mkdir(filepath.Join(ws, "a/d"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := caller{session: "s1"}
	got := -1
	m := mutation{kind: fresh, subject: subject{names: freshNames([]string{"a/d"})}, jop: jRmdir, by: &c,
		run: func(at []dirFd) syscall.Errno {
			got = at[0].FD
			if got < 0 {
				return syscall.Rmdir(filepath.Join(ws, "a/d")).(syscall.Errno)
			}
			return (&Node{fs: f}).removeIn(at[0], "a", "d", unix.AT_REMOVEDIR)
		}}
	if errno := f.mutate(context.Background(), m); errno != 0 {
		t.Fatal(errno)
	}
	if got < 0 {
		t.Errorf("the rmdir got no parent descriptor: it resolved a/ again")
	}
	if _, err := os.Lstat(filepath.Join(ws, "a/d")); !os.IsNotExist(err) {
		t.Fatalf("a/d after the rmdir: %v", err)
	}
	if recs := changeRecords(t, j, "s1"); len(recs) != 2 || recs[1].Op != jRmdir || recs[1].Pre[0].Kind != journal.KindDir {
		t.Fatalf("records %+v, want the rmdir with its directory pre-image", recs)
	}
}

// TestMakeNewInJournalDir: a journaled new entry (makeNew: mkdir, symlink,
// mknod, link; Create likewise) is made through the parent descriptor the
// journal captured its name in (Node.inDir), so the parent is resolved
// once, and the entry lands in the directory whose entry was captured as
// absent even when that directory is renamed between the capture and the
// creation; a second resolution of the path would not find a/ at all.
func TestMakeNewInJournalDir(t *testing.T) {
	f, j, ws := journalFS(t, guard.ModeEnforce, map[string]string{"a/keep": "x"})
	n := lookupNode(t, f, "a")
	var got dirFd
	errno := n.makeNew(context.Background(), jMkdir, func(at dirFd) syscall.Errno {
		got = at
		if err := os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "b")); err != nil {
			t.Error(err)
		}
		d, errno := n.inDir(at, "a")
		if errno != 0 {
			return errno
		}
		defer d.Close()
		return fs.ToErrno(unix.Mkdirat(d.FD, "d", 0o755))
	}, "a/d")
	if errno != 0 {
		t.Fatalf("mkdir: %v (parent descriptor %d)", errno, got.FD)
	}
	if got.FD < 0 {
		t.Errorf("the new entry got no parent descriptor: it resolved a/ again")
	}
	if st, err := os.Lstat(filepath.Join(ws, "b/d")); err != nil || !st.IsDir() {
		t.Fatalf("b/d after the mkdir: %v; want the directory made in the captured parent, now b/", err)
	}
	// The caller is the test's own process (no FUSE context): whichever
	// session it resolves to, its log holds the mkdir.
	names, err := j.Sessions()
	if err != nil || len(names) != 1 {
		t.Fatalf("journal sessions %v, %v; want one", names, err)
	}
	if recs := changeRecords(t, j, names[0]); len(recs) != 2 || recs[1].Op != jMkdir || recs[1].Pre[0].Kind != journal.KindAbsent {
		t.Fatalf("records %+v, want the mkdir with an absent pre-image", recs)
	}
}
