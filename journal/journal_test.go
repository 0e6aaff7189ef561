package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// ws is a workspace directory whose names CaptureAt reads.
type ws struct {
	t   *testing.T
	dir string
	fd  int
}

func newWS(t *testing.T) *ws {
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &ws{t: t, dir: dir, fd: fd}
}

func (w *ws) capture(j *Journal) Capture {
	return func(p string) (PreImage, error) { return CaptureAt(j.Blobs(), w.fd, p) }
}

func (w *ws) write(name, data string) {
	w.t.Helper()
	writeFile(w.t, filepath.Join(w.dir, name), []byte(data))
}

func openJ(t *testing.T, dir string) *Journal {
	t.Helper()
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func mustRecord(t *testing.T, j *Journal, s, op, p, p2 string, c Capture) Record {
	t.Helper()
	r, err := j.Record(s, op, p, p2, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPreImageOncePerInterval(t *testing.T) {
	w := newWS(t)
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	w.write("f", "one")
	r1 := mustRecord(t, j, "s", "write", "f", "", w.capture(j))
	if len(r1.Pre) != 1 || r1.Pre[0].Kind != KindFile || r1.Pre[0].Path != "f" || r1.Pre[0].Size != 3 {
		t.Fatalf("first write: %+v", r1.Pre)
	}
	if got := string(readBlob(t, j.Blobs(), r1.Pre[0].Blob)); got != "one" {
		t.Fatalf("pre-image bytes %q", got)
	}
	w.write("f", "two")
	if r := mustRecord(t, j, "s", "write", "f", "", w.capture(j)); len(r.Pre) != 0 {
		t.Fatalf("second write in the interval saved %+v", r.Pre)
	}
	cp, err := j.Checkpoint("s", "after two")
	if err != nil || cp.ID != "cp000001" {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	r3 := mustRecord(t, j, "s", "write", "f", "", w.capture(j))
	if len(r3.Pre) != 1 || string(readBlob(t, j.Blobs(), r3.Pre[0].Blob)) != "two" {
		t.Fatalf("after the checkpoint: %+v", r3.Pre)
	}
	// Sessions are separate: another session saves its own pre-image.
	if r := mustRecord(t, j, "t", "write", "f", "", w.capture(j)); len(r.Pre) != 1 {
		t.Fatalf("other session: %+v", r.Pre)
	}
}

func TestPreImageKinds(t *testing.T) {
	w := newWS(t)
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	os.Mkdir(filepath.Join(w.dir, "d"), 0o750)
	os.Symlink("some/target", filepath.Join(w.dir, "l"))
	w.write("x", "moved")
	r := mustRecord(t, j, "s", "rmdir", "d", "", w.capture(j))
	if p := r.Pre[0]; p.Kind != KindDir || p.Mode != unix.S_IFDIR|0o750 {
		t.Fatalf("dir: %+v", p)
	}
	r = mustRecord(t, j, "s", "unlink", "l", "", w.capture(j))
	if p := r.Pre[0]; p.Kind != KindSymlink || p.Target != "some/target" {
		t.Fatalf("symlink: %+v", p)
	}
	r = mustRecord(t, j, "s", "create", "new", "", w.capture(j))
	if p := r.Pre[0]; p.Kind != KindAbsent || p.Path != "new" {
		t.Fatalf("absent: %+v", p)
	}
	// A rename saves both names: the source and the target it replaces.
	r = mustRecord(t, j, "s", OpRename, "x", "y", w.capture(j))
	if len(r.Pre) != 2 || r.Pre[0].Kind != KindFile || r.Pre[1].Kind != KindAbsent || r.Pre[1].Path != "y" {
		t.Fatalf("rename: %+v", r.Pre)
	}
}

func TestTooLargeMarkerInRecord(t *testing.T) {
	w := newWS(t)
	j, err := Open(filepath.Join(t.TempDir(), "journal"), Options{MaxBlobSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	w.write("big", "12345")
	r := mustRecord(t, j, "s", "truncate", "big", "", w.capture(j))
	if p := r.Pre[0]; p.Blob != "" || p.Unrecoverable != UnrecoverableTooLarge || p.Size != 5 {
		t.Fatalf("too large: %+v", p)
	}
}

func TestReopenSeesEverything(t *testing.T) {
	w := newWS(t)
	dir := filepath.Join(t.TempDir(), "journal")
	j := openJ(t, dir)
	w.write("a", "A")
	mustRecord(t, j, "s", "write", "a", "", w.capture(j))
	if _, err := j.Checkpoint("s", "one"); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, j, "s", "write", "a", "", w.capture(j))
	j.Close()

	j2 := openJ(t, dir)
	// The interval of cp000001 already has a's pre-image: not saved again.
	if r := mustRecord(t, j2, "s", "write", "a", "", w.capture(j2)); len(r.Pre) != 0 || r.Seq != 5 {
		t.Fatalf("after reopen: %+v", r)
	}
	cp, err := j2.Checkpoint("s", "two")
	if err != nil || cp.ID != "cp000002" {
		t.Fatalf("checkpoint after reopen %+v %v", cp, err)
	}
	recs, err := j2.Records("s")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	cps := Checkpoints(recs)
	if len(cps) != 3 || cps[0].ID != "cp000000" || cps[0].Label != "session start" || cps[0].Changes != 1 || cps[0].Paths != 1 ||
		cps[1].Label != "one" || cps[1].Changes != 2 || cps[1].Paths != 1 || cps[2].Changes != 0 {
		t.Fatalf("checkpoints %+v", cps)
	}
}

func TestTornTailIgnoredAndOverwritten(t *testing.T) {
	w := newWS(t)
	dir := filepath.Join(t.TempDir(), "journal")
	j := openJ(t, dir)
	w.write("a", "A")
	mustRecord(t, j, "s", "write", "a", "", w.capture(j))
	j.Close()
	path := j.LogPath("s")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Longer than the record that follows it, so only a truncation (not
	// the overwrite) leaves the file clean.
	f.WriteString(`{"seq":3,"time":"2026-01-01T00:00:00Z","op":"write","path":"` + strings.Repeat("x", 500))
	f.Close()

	recs, _, err := ReadLog(path)
	if err != nil || len(recs) != 2 {
		t.Fatalf("torn log read: %d records, %v", len(recs), err)
	}
	j2 := openJ(t, dir)
	if r := mustRecord(t, j2, "s", "unlink", "b", "", w.capture(j2)); r.Seq != 3 {
		t.Fatalf("seq after the torn line: %d", r.Seq)
	}
	j2.Close()
	recs, good, err := ReadLog(path)
	if err != nil || len(recs) != 3 || recs[2].Op != "unlink" {
		t.Fatalf("after overwrite: %+v %v", recs, err)
	}
	if st, _ := os.Stat(path); st.Size() != good {
		t.Fatalf("file %d bytes, complete records %d", st.Size(), good)
	}
}

func TestBadLineBeforeTheLastIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeFile(t, path, []byte("{\"seq\":1,\"op\":\"checkpoint\"}\nnot json\n{\"seq\":2,\"op\":\"write\"}\n"))
	if _, _, err := ReadLog(path); err == nil {
		t.Fatal("a bad line in the middle was accepted")
	}
}

func TestSince(t *testing.T) {
	w := newWS(t)
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	c := w.capture(j)
	w.write("a", "A0")
	w.write("b", "B0")
	mustRecord(t, j, "s", "write", "a", "", c)
	w.write("a", "A1")
	cp, _ := j.Checkpoint("s", "mid")
	mustRecord(t, j, "s", "write", "a", "", c)
	w.write("a", "A2")
	mustRecord(t, j, "s", OpExchange, "a", "b", c)
	j.Checkpoint("s", "late")
	mustRecord(t, j, "s", OpRename, "b", "c", c)
	mustRecord(t, j, "s", "mkdir", "d", "", c)

	recs, _ := j.Records("s")
	ch, err := Since(recs, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Change{}
	for _, p := range ch.Paths {
		got[p.Path] = p
	}
	if len(got) != 4 {
		t.Fatalf("paths %+v", ch.Paths)
	}
	if b := got["a"].Pre.Blob; string(readBlob(t, j.Blobs(), b)) != "A1" {
		t.Fatal("a's pre-image at mid is not A1")
	}
	if b := got["b"].Pre.Blob; string(readBlob(t, j.Blobs(), b)) != "B0" {
		t.Fatal("b's pre-image at mid is not B0")
	}
	if got["c"].Pre.Kind != KindAbsent || got["d"].Pre.Kind != KindAbsent {
		t.Fatalf("c %+v d %+v", got["c"], got["d"])
	}
	if len(ch.Renames) != 2 || !ch.Renames[0].Exchange || ch.Renames[1].From != "b" || ch.Renames[1].To != "c" {
		t.Fatalf("renames %+v", ch.Renames)
	}
	if _, err := Since(recs, "cp999999"); err == nil {
		t.Fatal("an unknown checkpoint was accepted")
	}
	all, _ := Since(recs, "cp000000")
	for _, p := range all.Paths {
		if p.Path == "a" && string(readBlob(t, j.Blobs(), p.Pre.Blob)) != "A0" {
			t.Fatal("a's pre-image at the start is not A0")
		}
	}
}

func TestConcurrentAppends(t *testing.T) {
	w := newWS(t)
	dir := filepath.Join(t.TempDir(), "journal")
	j := openJ(t, dir)
	for i := 0; i < 8; i++ {
		w.write(fmt.Sprintf("f%d", i), fmt.Sprintf("content %d", i%3))
	}
	const workers, per = 16, 25
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			sess := fmt.Sprintf("s%d", g%2)
			for i := 0; i < per; i++ {
				if _, err := j.Record(sess, "write", fmt.Sprintf("f%d", (g+i)%8), "", w.capture(j)); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 9 {
					if _, err := j.Checkpoint(sess, "tick"); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	j.Close()
	j2 := openJ(t, dir)
	total := 0
	for _, s := range []string{"s0", "s1"} {
		recs, err := j2.Records(s)
		if err != nil {
			t.Fatal(err)
		}
		changes := 0
		seen := map[string]bool{}
		for i, r := range recs {
			if r.Seq != uint64(i+1) {
				t.Fatalf("%s: record %d has seq %d", s, i, r.Seq)
			}
			if r.Op == OpCheckpoint {
				seen = map[string]bool{}
				continue
			}
			changes++
			for _, p := range r.Pre {
				if seen[p.Path] {
					t.Fatalf("%s: second pre-image of %s in one interval", s, p.Path)
				}
				seen[p.Path] = true
			}
			if !seen[r.Path] {
				t.Fatalf("%s: change of %s without a pre-image in its interval", s, r.Path)
			}
		}
		total += changes
	}
	if total != workers*per {
		t.Fatalf("%d changes recorded, want %d", total, workers*per)
	}
	if n := countBlobs(t, filepath.Join(dir, "blobs")); n != 3 {
		t.Fatalf("%d blobs for 3 distinct contents", n)
	}
}

func TestBadSessionName(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	for _, name := range []string{"", "../x", "a/b", ".hidden"} {
		if _, err := j.Checkpoint(name, "x"); err == nil {
			t.Fatalf("session name %q accepted", name)
		}
	}
}

func TestCaptureErrorRecordsNothing(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	fail := func(string) (PreImage, error) { return PreImage{}, unix.EIO }
	if _, err := j.Record("s", "write", "f", "", fail); err == nil {
		t.Fatal("a failed capture was recorded")
	}
	w := newWS(t)
	w.write("f", "x")
	// The path is still uncaptured: the next change saves its pre-image.
	if r := mustRecord(t, j, "s", "write", "f", "", w.capture(j)); len(r.Pre) != 1 || r.Seq != 2 {
		t.Fatalf("after a failed capture: %+v", r)
	}
}

func TestSessionsListed(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	for _, s := range []string{"b", "a"} {
		if _, err := j.Checkpoint(s, "x"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := j.Sessions()
	if err != nil || len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("sessions %v %v", got, err)
	}
}
