package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestListChanges(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	d.appendf("README.md", "more\n")
	d.rename("src/util.go", "src/tmp.go")
	d.rename("src/tmp.go", "src/helpers.go")
	d.write("new.txt", "new\n")
	d.unlink("left.txt")
	got, err := j.ListChanges("agent", "", d.ins())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]PathChange{}
	var paths []string
	for _, c := range got {
		by[c.Path] = c
		paths = append(paths, c.Path)
	}
	if strings.Join(paths, " ") != "README.md left.txt new.txt src/helpers.go src/tmp.go src/util.go" {
		t.Fatalf("paths %v", paths)
	}
	r := by["README.md"]
	if r.Before.Kind != KindFile || r.Before.Size != 6 || r.Before.Hash == "" || r.After.Hash == "" ||
		r.Before.Hash == r.After.Hash || strings.Join(r.Ops, ",") != "write" {
		t.Fatalf("README.md %+v", r)
	}
	if h, _ := d.ins().HashOf("README.md"); h != r.After.Hash {
		t.Fatalf("after hash %s, file hash %s", r.After.Hash, h)
	}
	if by["src/helpers.go"].RenamedFrom != "src/util.go" || by["src/helpers.go"].Before.Kind != KindAbsent {
		t.Fatalf("rename target %+v", by["src/helpers.go"])
	}
	if by["left.txt"].After.Kind != KindAbsent || by["new.txt"].Before.Kind != KindAbsent {
		t.Fatalf("left %+v new %+v", by["left.txt"], by["new.txt"])
	}
	if _, err := j.ListChanges("agent", "cp000042", d.ins()); err == nil {
		t.Fatal("an unknown checkpoint listed")
	}
}

// TestListChangesSkipsFailedChanges: a change whose backing operation
// failed (its record followed by a failure note) changed nothing, so the
// list names no path for it alone and shows none of its ops; a path a
// failed and a later successful change named shows the successful op,
// with its state before both.
func TestListChangesSkipsFailedChanges(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	d.failedDo("rmdir", "src", "", func() error { return unix.Rmdir(d.abs("src")) })
	d.failedDo("rename", "README.md", "src", func() error { return unix.Rename(d.abs("README.md"), d.abs("src")) })
	d.appendf("README.md", "more\n")
	got, err := j.ListChanges("agent", "", d.ins())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Path != "README.md" || strings.Join(got[0].Ops, ",") != "write" ||
		got[0].Before.Kind != KindFile || got[0].Before.Size != 6 || got[0].RenamedFrom != "" {
		t.Fatalf("changes after two failed changes and a write: %+v, want README.md alone, written, 6 bytes before", got)
	}
}

func TestDiff(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	d.seed(map[string]string{"blob.bin": "a\x00b", "nonl.txt": "x"})
	d.sedI("notes.txt", "two", "TWO")
	d.write("new.txt", "brand\nnew\n")
	d.unlink("left.txt")
	d.chmod("bin/tool.sh", 0o755)
	d.write("blob.bin", "a\x00c")
	d.write("nonl.txt", "y")
	ins := d.ins()
	out, err := j.Diff("agent", "", nil, ins, ins.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n",
		"diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+brand\n+new\n",
		"diff --git a/left.txt b/left.txt\ndeleted file mode 100644\n--- a/left.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-left\n",
		"diff --git a/bin/tool.sh b/bin/tool.sh\nold mode 100644\nnew mode 100755\n",
		"diff --git a/blob.bin b/blob.bin\nBinary files a/blob.bin and b/blob.bin differ\n",
		"-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks\n%s\nin\n%s", want, out)
		}
	}
	if strings.Contains(out, "sedXYZ") {
		t.Errorf("the temporary file created and renamed away is in the diff:\n%s", out)
	}
	only, err := j.Diff("agent", "", []string{"bin"}, ins, ins.ReadFile)
	if err != nil || !strings.HasPrefix(only, "diff --git a/bin/tool.sh") || strings.Count(only, "diff --git") != 1 {
		t.Fatalf("path-limited diff %q %v", only, err)
	}
}

func TestGCRetentionAndBudget(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := Open(dir, Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	d := newDriver(t, j, "old")
	d.seed(map[string]string{"a": strings.Repeat("a", 1000), "b": strings.Repeat("b", 1000), "c": strings.Repeat("c", 1000)})
	d.write("a", "A")
	d.on(d.root, "mid").write("b", "B")
	d.on(d.root, "live").write("c", "C")
	if err := j.End("old", clock); err != nil {
		t.Fatal(err)
	}
	if err := j.End("mid", clock.Add(10*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if j.Blobs().Used() != 3000 {
		t.Fatalf("used %d", j.Blobs().Used())
	}
	clock = clock.Add(30 * time.Hour)
	res, err := j.GC(GCOptions{Retention: 24 * time.Hour})
	if err != nil || res.Sessions != 1 || res.Blobs != 1 || res.FreedBytes != 1000 || res.StoreBytes != 2000 {
		t.Fatalf("retention GC %+v %v", res, err)
	}
	if _, err := os.Stat(j.LogPath("old")); !os.IsNotExist(err) {
		t.Fatalf("old log kept: %v", err)
	}
	res, err = j.GC(GCOptions{Budget: 1500})
	if err != nil || res.Sessions != 1 || res.StoreBytes != 1000 || j.Blobs().Used() != 1000 {
		t.Fatalf("budget GC %+v %v", res, err)
	}
	if _, err := os.Stat(j.LogPath("live")); err != nil {
		t.Fatalf("a live session's log went: %v", err)
	}
	// A removed session starts a new log at its next use.
	d.on(d.root, "mid").write("b", "BB")
	if recs, _ := j.Records("mid"); len(recs) == 0 || recs[0].ID != "cp000000" {
		t.Fatalf("mid after GC: %+v", recs)
	}
	// Reopening walks the store once to learn its size.
	j2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if j2.Blobs().Used() != j.Blobs().Used() {
		t.Fatalf("reopened used %d, running %d", j2.Blobs().Used(), j.Blobs().Used())
	}
}

func TestNoteAfterAndEndAreGapless(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	d.write("f", "x")
	if err := j.End("agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	recs, err := j.Records("agent")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	if recs[len(recs)-1].Op != OpEnd || recs[len(recs)-2].Op != OpAfter || recs[len(recs)-2].Ref != recs[len(recs)-3].Seq {
		t.Fatalf("records %+v", recs)
	}
	if cps := Checkpoints(recs); cps[0].Changes != 2 {
		t.Fatalf("checkpoint counts after-notes: %+v", cps)
	}
}

// GC removing an open session's log while other sessions record does not
// deadlock, and the session's next record starts a new log.
func TestGCConcurrentWithRecord(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "a")
	d.seed(map[string]string{"f": "x", "g": "y"})
	d.write("f", "1")
	if err := j.End("a", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			if _, err := j.GC(GCOptions{Retention: time.Minute}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	c := func(string) (PreImage, error) { return PreImage{Kind: KindAbsent}, nil }
	for i := 0; i < 200; i++ {
		if _, err := j.Record("b", "write", "g", "", c); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Record("a", "write", "f", "", c); err != nil && err != errRemoved {
			t.Fatal(err)
		}
	}
	<-done
}
