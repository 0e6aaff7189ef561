package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A blob lost to an OS crash (the flusher had not made it durable) or cut
// short is reported as unrecoverable by the plan and the rewind, and its
// path left as it is; the other paths are restored; GC and diff get
// through it (docs/DESIGN.md#journal-sync).
func TestRewindLostBlobUnrecoverable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j := openJ(t, dir)
	d := newDriver(t, j, "agent")
	d.seed(map[string]string{
		"gone.txt":  "its blob is deleted\n",
		"short.txt": "its blob is cut short\n",
		"kept.txt":  "its blob is intact\n",
	})
	d.write("gone.txt", "changed\n")
	d.write("short.txt", "changed\n")
	d.write("kept.txt", "changed\n")
	recs, err := j.Records("agent")
	if err != nil {
		t.Fatal(err)
	}
	blobOf := map[string]string{}
	for _, r := range recs {
		for _, p := range r.Pre {
			blobOf[p.Path] = p.Blob
		}
	}
	if err := os.Remove(j.Blobs().Path(blobOf["gone.txt"])); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(j.Blobs().Path(blobOf["short.txt"]), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Diff("agent", "cp000000", nil, d.ins(), func(p string) ([]byte, error) { return os.ReadFile(d.abs(p)) }); err != nil {
		t.Fatalf("diff with a lost blob: %v", err)
	}
	if res, err := j.GC(GCOptions{}); err != nil || res.Lost != 2 {
		t.Fatalf("GC with two lost blobs: %+v %v", res, err)
	}
	plan, err := j.PlanRewind("agent", "cp000000", d.ins(), RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	marks := map[string]string{}
	for _, u := range plan.Unrecoverable {
		marks[u.Path] = u.Unrecoverable
	}
	if marks["gone.txt"] != UnrecoverableLost || marks["short.txt"] != UnrecoverableLost || len(marks) != 2 {
		t.Fatalf("unrecoverable %+v", plan.Unrecoverable)
	}
	res, err := j.Rewind(plan, d.applier())
	if err != nil || res.Unrecoverable != 2 || len(res.Errors) > 0 || res.Restored != 1 {
		t.Fatalf("result %+v %v", res, err)
	}
	for p, want := range map[string]string{"gone.txt": "changed\n", "short.txt": "changed\n", "kept.txt": "its blob is intact\n"} {
		if b, _ := os.ReadFile(d.abs(p)); string(b) != want {
			t.Fatalf("%s = %q after the rewind, want %q", p, b, want)
		}
	}
}

// In SyncWrite mode the flusher, kicked by a record, makes the blob and
// the log durable on its own (no Close, no explicit Flush): it empties
// the lists of what is left to sync.
func TestFlusherRunsAfterAWrite(t *testing.T) {
	root := t.TempDir()
	j, err := Open(filepath.Join(root, "journal"), Options{FlushInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	flushed := make(chan struct{}, 16)
	j.fl.afterFlush = func() { flushed <- struct{}{} }
	w := newWS(t)
	w.write("f", strings.Repeat("x", 100))
	mustRecord(t, j, "s", "write", "f", "", w.capture(j))
	<-flushed
	j.fl.dmu.Lock()
	dirty := len(j.fl.dirty)
	j.fl.dmu.Unlock()
	files, dirs := j.blobs.deferred.take()
	if dirty != 0 || len(files) != 0 || len(dirs) != 0 {
		t.Fatalf("after a flush: %d dirty logs, %d blobs and %d dirs unsynced", dirty, len(files), len(dirs))
	}
}

// SyncFsync keeps the request-path fsyncs: no flusher, nothing deferred.
func TestSyncFsyncDefersNothing(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "journal"), Options{Sync: SyncFsync})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.fl != nil || j.blobs.deferSync {
		t.Fatal("SyncFsync started a flusher or defers blob fsyncs")
	}
	w := newWS(t)
	w.write("f", "bytes")
	mustRecord(t, j, "s", "write", "f", "", w.capture(j))
	if files, dirs := j.blobs.deferred.take(); len(files)+len(dirs) != 0 {
		t.Fatalf("deferred %v %v", files, dirs)
	}
}

func TestParseSyncMode(t *testing.T) {
	for in, want := range map[string]SyncMode{"write": SyncWrite, "fsync": SyncFsync} {
		if m, err := ParseSyncMode(in); err != nil || m != want || m.String() != in {
			t.Fatalf("%q: %v %v", in, m, err)
		}
	}
	if _, err := ParseSyncMode("always"); err == nil {
		t.Fatal("always parsed")
	}
}

// A log GC removed (closed) while it was waiting for the flusher is no
// flush failure.
func TestFlushAfterLogRemoved(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	w := newWS(t)
	w.write("f", "bytes")
	mustRecord(t, j, "s", "write", "f", "", w.capture(j))
	if err := j.removeLog("s"); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(); err != nil {
		t.Fatalf("flush after the log was removed: %v", err)
	}
}

// A flush of more blobs than one batch syncs every one, skips a blob
// removed meanwhile (GC), and reports a blob it cannot open (a symlink:
// O_NOFOLLOW) by its path while going on with the rest.
func TestFlushPendingBatches(t *testing.T) {
	dir := t.TempDir()
	var b Blobs
	n := 2*flushBatch + 3
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("b%d", i))
		if err := os.WriteFile(p, []byte(strings.Repeat("x", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		b.deferred.add(p, dir)
	}
	if err := os.Remove(filepath.Join(dir, "b7")); err != nil {
		t.Fatal(err)
	}
	if err := b.flushPending(); err != nil {
		t.Fatalf("flush of %d blobs, one removed: %v", n, err)
	}
	if files, dirs := b.deferred.take(); len(files)+len(dirs) != 0 {
		t.Fatalf("after the flush: %d blobs and %d dirs still pending", len(files), len(dirs))
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "b1"), link); err != nil {
		t.Fatal(err)
	}
	b.deferred.add(filepath.Join(dir, "b0"))
	b.deferred.add(link)
	b.deferred.add(filepath.Join(dir, "b2"))
	err := b.flushPending()
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != link || pe.Op != "open" {
		t.Fatalf("flush with a symlink among the blobs: %v, want the open of %s refused", err, link)
	}
}
