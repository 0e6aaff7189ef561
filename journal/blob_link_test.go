package journal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

var doomedYes = CaptureOptions{Doomed: true, MayLink: func(*unix.Stat_t) bool { return true }}

func inoOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// A doomed file that is its inode's only link is kept by linking that
// inode (no copy); one with another link is copied; after a failed
// removal Unshare gives the blob its own inode, so the file's next change
// leaves the blob as it was.
func TestCaptureDoomedLinksTheInode(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	w := newWS(t)
	w.write("only", "only link\n")
	w.write("two", "two links\n")
	if err := os.Link(filepath.Join(w.dir, "two"), filepath.Join(w.dir, "two-b")); err != nil {
		t.Fatal(err)
	}
	pre, err := CaptureWith(j.Blobs(), w.fd, "only", doomedYes)
	if err != nil || pre.Blob == "" || pre.Size != int64(len("only link\n")) {
		t.Fatalf("pre-image of only: %+v %v", pre, err)
	}
	if a, b := inoOf(t, j.Blobs().Path(pre.Blob)), inoOf(t, filepath.Join(w.dir, "only")); a != b {
		t.Fatalf("blob inode %d, file inode %d: copied, not linked", a, b)
	}
	if err := j.Blobs().Check(pre.Blob, pre.Size); err != nil {
		t.Fatal(err)
	}
	pre2, err := CaptureWith(j.Blobs(), w.fd, "two", doomedYes)
	if err != nil || pre2.Blob == "" {
		t.Fatalf("pre-image of two: %+v %v", pre2, err)
	}
	if inoOf(t, j.Blobs().Path(pre2.Blob)) == inoOf(t, filepath.Join(w.dir, "two")) {
		t.Fatal("a file with two links was linked into the store")
	}
	w.write("open", "open elsewhere\n")
	pre3, err := CaptureWith(j.Blobs(), w.fd, "open", CaptureOptions{Doomed: true, MayLink: func(*unix.Stat_t) bool { return false }})
	if err != nil || inoOf(t, j.Blobs().Path(pre3.Blob)) == inoOf(t, filepath.Join(w.dir, "open")) {
		t.Fatalf("a file mayLink refused was linked into the store (%v)", err)
	}
	// The removal of "only" failed: the file lives on and is changed.
	if err := j.Unshare(Record{Pre: []PreImage{pre, pre2}}); err != nil {
		t.Fatal(err)
	}
	if inoOf(t, j.Blobs().Path(pre.Blob)) == inoOf(t, filepath.Join(w.dir, "only")) {
		t.Fatal("Unshare left the blob on the file's inode")
	}
	w.write("only", "changed after the failed removal\n")
	if err := j.Blobs().Check(pre.Blob, pre.Size); err != nil {
		t.Fatalf("the blob changed with the file: %v", err)
	}
}

// A doomed capture in fsync mode copies, as that mode always did; in
// either mode the blob outlives the removed name with the file's bytes.
func TestCaptureDoomedThenUnlinked(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "journal"), Options{Sync: SyncFsync})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	w := newWS(t)
	w.write("f", "bytes of f\n")
	pre, err := CaptureWith(j.Blobs(), w.fd, "f", doomedYes)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(w.dir, "f")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(j.Blobs().Path(pre.Blob))
	if err != nil || string(b) != "bytes of f\n" || j.Blobs().links.Load() != 0 {
		t.Fatalf("blob %q %v, %d links", b, err, j.Blobs().links.Load())
	}
}

// A file whose address the caller knows (its hash cache) and whose blob is
// stored is neither read nor copied: the capture names the stored blob.
// Without a known address, bytes already stored are found by one read and
// not copied either.
func TestCaptureKnownHashDedups(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	w := newWS(t)
	w.write("a", "same bytes\n")
	first, err := CaptureWith(j.Blobs(), w.fd, "a", CaptureOptions{})
	if err != nil || first.Blob == "" {
		t.Fatalf("%+v %v", first, err)
	}
	w.write("b", "same bytes\n")
	again, err := CaptureWith(j.Blobs(), w.fd, "b", CaptureOptions{})
	if err != nil || again.Blob != first.Blob {
		t.Fatalf("same bytes stored again: %+v %v", again, err)
	}
	// Same size, other bytes, but the caller vouches for the address: it
	// is taken as is (the hash cache's key is the file's stat identity).
	w.write("c", "SAME BYTES\n")
	known, err := CaptureWith(j.Blobs(), w.fd, "c", CaptureOptions{KnownHash: func(*unix.Stat_t) string { return first.Blob }})
	if err != nil || known.Blob != first.Blob {
		t.Fatalf("known address not used: %+v %v", known, err)
	}
	var n int
	j.Blobs().Walk(func(string, int64) error { n++; return nil })
	if n != 1 {
		t.Fatalf("%d blobs stored, want 1", n)
	}
}

// addrOf is the store's address of b (xxh3-128, 32 hex digits).
func addrOf(b string) string { return hexAddr(xxh3.Hash128([]byte(b)).Bytes()) }

// A doomed file whose address the caller knows (its hash cache) is linked
// into the store by its name: the blob is the file's inode, and the file
// is never opened (no read, no copy). Refused a link (MayLink), it is
// opened and copied, as before.
func TestCaptureDoomedKnownLinksByName(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	w := newWS(t)
	w.write("f", "bytes of f\n")
	known := func(*unix.Stat_t) string { return addrOf("bytes of f\n") }
	pre, err := CaptureWith(j.Blobs(), w.fd, "f", CaptureOptions{Doomed: true, MayLink: doomedYes.MayLink, KnownHash: known})
	if err != nil || pre.Blob != addrOf("bytes of f\n") {
		t.Fatalf("pre-image of f: %+v %v", pre, err)
	}
	b := j.Blobs()
	if a, f := inoOf(t, b.Path(pre.Blob)), inoOf(t, filepath.Join(w.dir, "f")); a != f {
		t.Fatalf("blob inode %d, file inode %d: copied, not linked", a, f)
	}
	if b.opens.Load() != 0 || b.named.Load() != 1 || b.links.Load() != 1 {
		t.Fatalf("opens %d, named %d, links %d: want the file linked by name, never opened", b.opens.Load(), b.named.Load(), b.links.Load())
	}
	if err := b.Check(pre.Blob, pre.Size); err != nil {
		t.Fatal(err)
	}
	w.write("g", "bytes of g\n")
	pre2, err := CaptureWith(b, w.fd, "g", CaptureOptions{Doomed: true, MayLink: func(*unix.Stat_t) bool { return false },
		KnownHash: func(*unix.Stat_t) string { return addrOf("bytes of g\n") }})
	if err != nil || pre2.Blob != addrOf("bytes of g\n") || inoOf(t, b.Path(pre2.Blob)) == inoOf(t, filepath.Join(w.dir, "g")) {
		t.Fatalf("a file MayLink refused was linked: %+v %v", pre2, err)
	}
	if b.opens.Load() != 1 || b.named.Load() != 1 {
		t.Fatalf("opens %d, named %d after a refused link: want one open", b.opens.Load(), b.named.Load())
	}
}

// A doomed file changed between its lstat and its link by name (here by
// the hash lookup itself) is not kept under the address it had: the link
// is taken away and the file captured by descriptor, with its bytes now.
func TestCaptureLinkNamedChangedFallsBack(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	w := newWS(t)
	w.write("f", "old\n")
	calls := 0
	known := func(*unix.Stat_t) string {
		calls++
		if calls > 1 {
			return ""
		}
		w.write("f", "new and longer\n")
		return addrOf("old\n")
	}
	pre, err := CaptureWith(j.Blobs(), w.fd, "f", CaptureOptions{Doomed: true, MayLink: doomedYes.MayLink, KnownHash: known})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(j.Blobs().Path(addrOf("old\n"))); !os.IsNotExist(err) {
		t.Fatalf("the changed file stayed in the store under its old address (%v)", err)
	}
	if pre.Blob != addrOf("new and longer\n") || j.Blobs().Check(pre.Blob, pre.Size) != nil || j.Blobs().named.Load() != 0 {
		t.Fatalf("pre-image %+v (named %d), want the file's bytes now", pre, j.Blobs().named.Load())
	}
}

// A pre-image kept by linking the doomed inode leaves its bytes to the
// kernel's writeback (the file's own schedule): the flusher owes its
// directory's new name, not an fsync of the blob. A copied pre-image (the
// file has a second link) is still owed its fsync
// (docs/DESIGN.md#journal-link-durable).
func TestLinkedBlobOwesTheFlusherItsNameOnly(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	if !j.blobs.deferSync {
		t.Fatal("openJ's journal does not defer its syncs (SyncWrite)")
	}
	w := newWS(t)
	w.write("only", "only link, linked\n")
	w.write("two", "two links, copied\n")
	if err := os.Link(filepath.Join(w.dir, "two"), filepath.Join(w.dir, "two-b")); err != nil {
		t.Fatal(err)
	}
	j.blobs.deferred.take() // what the workspace's setup left
	linked, err := CaptureWith(j.Blobs(), w.fd, "only", doomedYes)
	if err != nil || inoOf(t, j.Blobs().Path(linked.Blob)) != inoOf(t, filepath.Join(w.dir, "only")) {
		t.Fatalf("only was not linked: %+v %v", linked, err)
	}
	files, dirs := j.blobs.deferred.take()
	if len(files) != 0 {
		t.Fatalf("a linked blob is owed an fsync: %v", files)
	}
	if _, ok := dirs[filepath.Dir(j.Blobs().Path(linked.Blob))]; !ok {
		t.Fatalf("the linked blob's directory is not owed its fsync: %v", dirs)
	}
	copied, err := CaptureWith(j.Blobs(), w.fd, "two", doomedYes)
	if err != nil || copied.Blob == "" {
		t.Fatalf("two: %+v %v", copied, err)
	}
	files, _ = j.blobs.deferred.take()
	if len(files) != 1 || files[0] != j.Blobs().Path(copied.Blob) {
		t.Fatalf("the copied blob is owed %v, want its fsync", files)
	}
}
