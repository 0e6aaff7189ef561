package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func absentCapture(string) (PreImage, error) { return PreImage{Kind: KindAbsent}, nil }

// A deep tree costs linear space: each level's mkdir names its path by the
// id of its parent plus its name (docs/DESIGN.md#journal-paths), and the
// paths read back whole.
func TestPathTableDeepTreeLinear(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const levels, nameLen = 1000, 200
	var p string
	var want []string
	for i := 0; i < levels; i++ {
		name := fmt.Sprintf("%03d", i) + strings.Repeat("d", nameLen-3)
		if p == "" {
			p = name
		} else {
			p += "/" + name
		}
		if _, err := j.Record("s", "mkdir", p, "", absentCapture); err != nil {
			t.Fatal(err)
		}
		if err := j.NoteAfter("s", uint64(i+2), []After{{Path: p, Kind: KindDir, Mode: 0o40755}}); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	st, err := os.Stat(j.LogPath("s"))
	if err != nil {
		t.Fatal(err)
	}
	// One 200-byte name per level plus two short lines: far below the
	// 300 KB per level of whole paths at this depth.
	if per := st.Size() / levels; per > 800 {
		t.Fatalf("log is %d bytes for %d levels: %d bytes per level, want at most 800", st.Size(), levels, per)
	}
	j.Close()
	// Read back, and reopened: the same paths, and no pre-image again.
	var got []string
	if _, err := ScanLog(j.LogPath("s"), func(r Record) error {
		if r.Op == "mkdir" {
			if len(r.Pre) != 1 || r.Pre[0].Path != r.Path || r.PID != 0 || r.Defs != nil {
				return fmt.Errorf("record %d: %+v", r.Seq, r.Pre)
			}
			got = append(got, r.Path)
		}
		if r.Op == OpAfter && r.After[0].Path != got[len(got)-1] {
			return fmt.Errorf("after-note %d names %.40q", r.Seq, r.After[0].Path)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != levels || got[levels-1] != want[levels-1] || got[0] != want[0] {
		t.Fatalf("read %d paths back", len(got))
	}
	j2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	rec, err := j2.Record("s", "chmod", want[500], "", func(string) (PreImage, error) {
		t.Fatal("captured a path already captured in the interval")
		return PreImage{}, nil
	})
	if err != nil || len(rec.Pre) != 0 {
		t.Fatalf("chmod after reopen: %+v %v", rec, err)
	}
	// A new name below a known directory defines only itself.
	before, _ := os.Stat(j2.LogPath("s"))
	if _, err := j2.Record("s", "create", want[levels-1]+"/f", "", absentCapture); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(j2.LogPath("s"))
	if d := after.Size() - before.Size(); d > 300 {
		t.Fatalf("a create at depth %d took %d bytes", levels+1, d)
	}
}

// A log of the older format (whole paths, no ids) still reads, and the
// mount appends records of the new format to it; both read back.
func TestPathTableOldFormatLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"seq":1,"time":"2026-01-01T00:00:00Z","op":"checkpoint","id":"cp000000","label":"session start"}
{"seq":2,"time":"2026-01-01T00:00:01Z","op":"mkdir","path":"a","pre":[{"path":"a","kind":"absent"}]}
{"seq":3,"time":"2026-01-01T00:00:02Z","op":"after","after":[{"path":"a","kind":"dir","mode":16877}]}
{"seq":4,"time":"2026-01-01T00:00:03Z","op":"rename","path":"a/x","path2":"a/y","pre":[{"path":"a/x","kind":"file","mode":33188,"size":3,"blob":"00112233445566778899aabbccddeeff"},{"path":"a/y","kind":"absent"}]}
`
	if err := os.WriteFile(filepath.Join(dir, "sessions", "s.jsonl"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	// a/y was captured in the interval: no second pre-image.
	if rec, err := j.Record("s", "write", "a/y", "", absentCapture); err != nil || len(rec.Pre) != 0 {
		t.Fatalf("write a/y: %+v %v", rec, err)
	}
	if rec, err := j.Record("s", "create", "a/z", "", absentCapture); err != nil || len(rec.Pre) != 1 {
		t.Fatalf("create a/z: %+v %v", rec, err)
	}
	recs, err := j.Records("s")
	if err != nil || len(recs) != 6 {
		t.Fatalf("records %d %v", len(recs), err)
	}
	if recs[3].Path2 != "a/y" || recs[3].Pre[0].Blob == "" || recs[4].Path != "a/y" || recs[5].Path != "a/z" || recs[5].Pre[0].Path != "a/z" {
		t.Fatalf("records %+v", recs[3:])
	}
	raw, _ := os.ReadFile(j.LogPath("s"))
	if !strings.Contains(string(raw), `"defs":[{"i":1,"d":0,"n":"a"}`) {
		t.Fatalf("new records not in the path-table format:\n%s", raw)
	}
	ch, err := Since(recs, "cp000000")
	if err != nil || len(ch.Paths) != 4 || len(ch.Renames) != 1 {
		t.Fatalf("since %+v %v", ch, err)
	}
}

// A torn last line that defines paths defines nothing: the next append
// defines them again, and the log reads back whole.
func TestPathTableTornTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record("s", "mkdir", "a", "", absentCapture); err != nil {
		t.Fatal(err)
	}
	j.Close()
	f, err := os.OpenFile(j.LogPath("s"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":3,"time":"2026-01-01T00:00:00Z","op":"mkdir","defs":[{"i":2,"d":1,"n":"b"}],"pid":2,"pre":[{"pid":2,"kind":"absent"}]}`)
	f.Close()
	j2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if _, err := j2.Record("s", "mkdir", "a/b", "", absentCapture); err != nil {
		t.Fatal(err)
	}
	if _, err := j2.Record("s", "create", "a/b/c", "", absentCapture); err != nil {
		t.Fatal(err)
	}
	recs, err := j2.Records("s")
	if err != nil || len(recs) != 4 || recs[2].Path != "a/b" || recs[3].Path != "a/b/c" {
		t.Fatalf("records %+v %v", recs, err)
	}
	// An id used before its definition is a bad line (here the last:
	// ignored as torn, as any unparsable last line).
	tab := newPathTable()
	if err := tab.resolve(&Record{PID: 7}); err == nil {
		t.Fatal("an undefined id resolved")
	}
}

// less orders ids as their paths compare as strings.
func TestPathTableOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	names := []string{"a", "a-b", "a.b", "ab", "b", "a b", "a0", "~", "A"}
	tab := newPathTable()
	seen := map[string]bool{}
	var paths []string
	for i := 0; i < 400; i++ {
		n := 1 + r.Intn(4)
		var parts []string
		for k := 0; k < n; k++ {
			parts = append(parts, names[r.Intn(len(names))])
		}
		p := strings.Join(parts, "/")
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	ids := make([]uint64, len(paths))
	for i, p := range paths {
		ids[i] = tab.intern(p)
	}
	sort.Slice(ids, func(a, b int) bool { return tab.less(ids[a], ids[b]) })
	sort.Strings(paths)
	for i, id := range ids {
		if got, _ := tab.path(id); got != paths[i] {
			t.Fatalf("position %d: %q, want %q", i, got, paths[i])
		}
	}
}

// The budget counts the logs: a session whose log alone reaches it is
// stopped (an OpStop record), stays stopped when reopened, and a
// checkpoint under a larger budget restarts it
// (docs/DESIGN.md#journal-budget).
func TestBudgetStopsOnLogGrowth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := Open(dir, Options{Budget: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var stopErr error
	n := 0
	for ; n < 1000 && stopErr == nil; n++ {
		_, stopErr = j.Record("s", "create", fmt.Sprintf("f%04d", n), "", absentCapture)
	}
	if !errors.Is(stopErr, ErrStopped) || !strings.Contains(stopErr.Error(), "budget of 4096 bytes is spent") {
		t.Fatalf("after %d records: %v", n, stopErr)
	}
	if _, logs := j.Used(); logs < 4096 || logs > 4096+1024 {
		t.Fatalf("logs hold %d bytes", logs)
	}
	if j.Stopped("s") == "" || j.StoppedSessions()["s"] == "" {
		t.Fatal("the session is not reported stopped")
	}
	size := func() int64 { st, _ := os.Stat(j.LogPath("s")); return st.Size() }
	was := size()
	if _, err := j.Record("s", "create", "later", "", absentCapture); !errors.Is(err, ErrStopped) {
		t.Fatalf("a stopped session recorded: %v", err)
	}
	if err := j.NoteAfter("s", 1, []After{{Path: "later", Kind: KindFile}}); err != nil || size() != was {
		t.Fatalf("a stopped session noted: %v, %d -> %d bytes", err, was, size())
	}
	// A checkpoint over the budget does not restart it.
	if _, err := j.Checkpoint("s", "still over"); err != nil {
		t.Fatal(err)
	}
	if j.Stopped("s") == "" {
		t.Fatal("a checkpoint over the budget restarted the journal")
	}
	j.Close()
	j2, err := Open(dir, Options{Budget: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j2.Record("s", "create", "x", "", absentCapture); !errors.Is(err, ErrStopped) {
		t.Fatalf("reopened: %v", err)
	}
	cps, err := j2.CheckpointList("s")
	if err != nil || len(cps) != 2 || cps[0].Stopped == "" || cps[1].Stopped == "" {
		t.Fatalf("checkpoints %+v %v", cps, err)
	}
	j2.Close()
	j3, err := Open(dir, Options{Budget: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j3.Close()
	if _, err := j3.Checkpoint("s", "room again"); err != nil {
		t.Fatal(err)
	}
	if _, err := j3.Record("s", "create", "y", "", absentCapture); err != nil || j3.Stopped("s") != "" {
		t.Fatalf("after a checkpoint under the budget: %v", err)
	}
}

// TestPathBytesRoundTrip: a path whose names are not valid UTF-8, and a
// symlink target that is not, come back from the log byte for byte (a
// JSON string alone would turn each bad byte into U+FFFD, and a rewind
// would make a file of another name), after a reopen too.
func TestPathBytesRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() }) // a second Close is ErrClosed
	const p, p2, target = "d\xff/n\xfe\x80", "ok/é", "t\xff\xfe"
	symlink := func(string) (PreImage, error) { return PreImage{Kind: KindSymlink, Target: target}, nil }
	if _, err := j.Record("s", "rename", p, p2, symlink); err != nil {
		t.Fatal(err)
	}
	check := func(recs []Record) {
		t.Helper()
		r := recs[len(recs)-1]
		if r.Path != p || r.Path2 != p2 || len(r.Pre) != 2 || r.Pre[0].Path != p || r.Pre[0].Target != target || r.Pre[0].TargetX != "" {
			t.Fatalf("read back %q %q %+v", r.Path, r.Path2, r.Pre)
		}
	}
	recs, err := j.Records("s")
	if err != nil {
		t.Fatal(err)
	}
	check(recs)
	j.Close()
	raw, _ := os.ReadFile(filepath.Join(dir, "sessions", "s.jsonl"))
	if !strings.Contains(string(raw), `"x":"6efe80"`) || !strings.Contains(string(raw), `"target_x":"74fffe"`) {
		t.Fatalf("the log lacks the names' bytes:\n%s", raw)
	}
	j2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	// The reopened table knows the path: a new record of it defines
	// nothing again.
	if _, err := j2.Record("s", "write", p, "", absentCapture); err != nil {
		t.Fatal(err)
	}
	if recs, err = j2.Records("s"); err != nil {
		t.Fatal(err)
	}
	if r := recs[len(recs)-1]; r.Path != p || len(r.Defs) != 0 {
		t.Fatalf("after a reopen: %q", r.Path)
	}
	check(recs[:len(recs)-1])
}

// TestStepJSONKeepsBytes: a rewind plan's step read by another process (a
// branch made from a checkpoint) names the files by their bytes, whatever
// they are; a valid UTF-8 name is written as it always was.
func TestStepJSONKeepsBytes(t *testing.T) {
	in := Step{Kind: StepRename, Path: "a\xff/b", From: "c\xfe", Pre: PreImage{Path: "a\xff/b", Kind: KindSymlink, Target: "t\x80"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Step
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %+v, want %+v (%s)", out, in, b)
	}
	b, _ = json.Marshal(Step{Kind: StepRemove, Path: "ok/é"})
	if string(b) != `{"kind":"remove","path":"ok/é","pre":{"kind":""}}` {
		t.Fatalf("a valid name's step: %s", b)
	}
}
