package journal

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func seedTree(d *driver) {
	d.seed(map[string]string{
		"README.md":       "hello\n",
		"src/main.go":     "package main\n\nfunc main() {}\n",
		"src/util.go":     "package main\n// util\n",
		"old/a.txt":       "a\n",
		"old/deep/b.txt":  "b\n",
		"notes.txt":       "one\ntwo\nthree\n",
		"bin/tool.sh":     "#!/bin/sh\necho hi\n",
		"pkg/x.txt":       "x\n",
		"pkg/y.txt":       "y\n",
		"left.txt":        "left\n",
		"right.txt":       "right\n",
		"keep/stable.txt": "stable\n",
	})
	os.Symlink("README.md", d.abs("readme-link"))
}

// agentSession runs the realistic sequence of shell and editor changes.
func agentSession(d *driver) {
	d.appendf("README.md", "more\n")                        // echo >>
	d.sedI("notes.txt", "two", "TWO")                       // sed -i
	d.rename("src/util.go", "src/helpers.go")               // mv
	d.unlink("left.txt")                                    // rm
	d.write("right.txt", "copied over\n")                   // cp over
	d.write("src/.main.go.tmp", "package main\n// saved\n") // python atomic save
	d.rename("src/.main.go.tmp", "src/main.go")
	d.mkdirP("gen/a/b") // mkdir -p with files
	d.write("gen/a/b/out.txt", "generated\n")
	d.write("gen/a/top.txt", "top\n")
	d.rmR("old")                              // rm -r of a tree
	d.chmod("bin/tool.sh", 0o755)             // chmod +x
	d.write("new.txt", "brand new\n")         // new file
	d.rename("pkg", "lib")                    // rename a dir with files,
	d.appendf("lib/x.txt", "edited inside\n") // then edits inside it
	d.write("lib/z.txt", "z\n")
	d.unlink("lib/y.txt")
	d.exchange("keep/stable.txt", "README.md") // exchange
	d.link("new.txt", "new-hardlink.txt")      // link
	d.unlink("readme-link")                    // symlink replaced
	d.symlink("notes.txt", "readme-link")
	d.symlink("nowhere", "dangling")
}

func TestRewindToStartRestoresTree(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	before := d.manifest()
	if _, err := j.Checkpoint("agent", "x"); err != nil { // creates cp000000 then cp000001
		t.Fatal(err)
	}
	agentSession(d)
	after := d.manifest()

	plan, res := d.rewind("cp000000", RewindOptions{})
	if len(plan.Conflicts) != 0 || len(plan.Unrecoverable) != 0 {
		t.Fatalf("conflicts %+v unrecoverable %+v", plan.Conflicts, plan.Unrecoverable)
	}
	sameManifest(t, "after the rewind to the start", before, d.manifest())
	if res.Checkpoint == "" || res.Restored == 0 || res.Removed == 0 {
		t.Fatalf("result %+v", res)
	}

	// A rewind of the rewind gives back the pre-rewind tree.
	plan2, _ := d.rewind(res.Checkpoint, RewindOptions{})
	if len(plan2.Conflicts) != 0 {
		t.Fatalf("undo conflicts %+v", plan2.Conflicts)
	}
	sameManifest(t, "after undoing the rewind", after, d.manifest())
}

func TestRewindToMiddleCheckpoint(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	d.write("f.txt", "v1\n")
	d.mkdirP("d1")
	d.write("d1/in.txt", "in1\n")
	cp1, err := j.Checkpoint("agent", "prompt 2")
	if err != nil {
		t.Fatal(err)
	}
	mid := d.manifest()
	d.write("f.txt", "v2\n")
	d.rename("d1", "d2")
	d.appendf("d2/in.txt", "more\n")
	d.rmR("src")
	if _, err := j.Checkpoint("agent", "prompt 3"); err != nil {
		t.Fatal(err)
	}
	d.write("f.txt", "v3\n")
	d.rename("d2/in.txt", "moved.txt")
	d.mkdir("src")
	d.write("src/main.go", "different\n")

	d.rewind(cp1.ID, RewindOptions{})
	sameManifest(t, "after the rewind to the middle", mid, d.manifest())
}

func TestRewindPathFilter(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	start := d.manifest()
	d.appendf("README.md", "x\n")
	d.write("pkg/x.txt", "changed\n")
	d.write("pkg/new.txt", "new\n")
	d.rename("src/main.go", "pkg/main.go") // the rename's target is inside pkg
	mid := d.manifest()

	d.rewind("", RewindOptions{Paths: []string{"pkg"}})
	// README.md is outside the filter: kept.
	sameManifest(t, "after the path-filtered rewind", keptFrom(start, mid, "README.md"), d.manifest())
}

func TestRewindConflicts(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	start := d.manifest()
	d.write("notes.txt", "agent edit\n")
	d.write("pkg/x.txt", "agent edit\n")
	d.write("left.txt", "agent edit\n")
	other := d.on(d.root, "other")
	other.write("notes.txt", "other session's later edit\n")
	if err := os.WriteFile(d.abs("pkg/x.txt"), []byte("edited outside the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	plan, err := j.PlanRewind("agent", "cp000000", d.ins(), RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]string{}
	for _, c := range plan.Conflicts {
		by[c.Path] = c.By + "|"
	}
	if len(plan.Conflicts) != 2 || by["notes.txt"] != "other|" || by["pkg/x.txt"] != "|" {
		t.Fatalf("conflicts %+v", plan.Conflicts)
	}
	res, err := j.Rewind(plan, d.applier())
	if err != nil || len(res.Errors) > 0 || res.Conflicts != 2 {
		t.Fatalf("rewind %+v %v", res, err)
	}
	got := d.manifest()
	if got["left.txt"] != start["left.txt"] {
		t.Fatalf("left.txt not restored: %s", got["left.txt"])
	}
	if b, _ := os.ReadFile(d.abs("notes.txt")); string(b) != "other session's later edit\n" {
		t.Fatalf("the other session's edit was overwritten: %q", b)
	}
	if b, _ := os.ReadFile(d.abs("pkg/x.txt")); string(b) != "edited outside the mount\n" {
		t.Fatalf("the outside edit was overwritten: %q", b)
	}

	// Force restores them too.
	plan, _ = d.rewind("cp000000", RewindOptions{Force: true})
	if len(plan.Conflicts) != 2 {
		t.Fatalf("forced plan conflicts %+v", plan.Conflicts)
	}
	sameManifest(t, "after the forced rewind", start, d.manifest())
}

func TestRewindUnrecoverable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	// The budget counts the log too (docs/DESIGN.md#journal-budget): a
	// few hundred bytes here, well under the 3000 less one blob.
	j, err := Open(dir, Options{MaxBlobSize: 2000, Budget: 3000})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	d := newDriver(t, j, "agent")
	d.seed(map[string]string{
		"big.bin": strings.Repeat("B", 2500),
		"a.txt":   strings.Repeat("a", 1300),
		"b.txt":   strings.Repeat("b", 1300),
	})
	d.write("big.bin", "small now")
	d.write("a.txt", "A")
	d.write("b.txt", "B") // 1300+1300+the log > 3000: over budget
	if got := j.Blobs().Used(); got != 1300 {
		t.Fatalf("store holds %d bytes, want 1300", got)
	}
	plan, err := j.PlanRewind("agent", "cp000000", d.ins(), RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	marks := map[string]string{}
	for _, u := range plan.Unrecoverable {
		marks[u.Path] = u.Unrecoverable
	}
	if marks["big.bin"] != UnrecoverableTooLarge || marks["b.txt"] != UnrecoverableOverBudget || len(marks) != 2 {
		t.Fatalf("unrecoverable %+v", plan.Unrecoverable)
	}
	res, err := j.Rewind(plan, DirApplier{Root: d.root})
	if err != nil || res.Unrecoverable != 2 || len(res.Errors) > 0 {
		t.Fatalf("result %+v %v", res, err)
	}
	if b, _ := os.ReadFile(d.abs("a.txt")); string(b) != strings.Repeat("a", 1300) {
		t.Fatalf("a.txt %q", b)
	}
}

// A log torn by a kill mid-append (a partial line, then a page of NULs
// that never reached the disk) still plans and rewinds after reopening.
func TestRewindAfterTornLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, j, "agent")
	seedTree(d)
	start := d.manifest()
	agentSession(d)
	j.Close()
	f, err := os.OpenFile(j.LogPath("agent"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":999,"op":"wri`)
	f.Close()

	j2 := openJ(t, dir)
	d.j = j2
	d.rewind("cp000000", RewindOptions{})
	sameManifest(t, "after the rewind of a torn log", start, d.manifest())

	f, _ = os.OpenFile(j2.LogPath("agent"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 4096))
	f.Close()
	if _, err := j2.Records("agent"); err != nil {
		t.Fatalf("a NUL tail: %v", err)
	}
}

// Another session's edit below a directory the session renamed is a
// conflict of the rename back (it would move the edit), kept without Force.
// TestRewindDropsTreesMadeAndRemoved: a tree the session made and
// removed again inside the interval (git worktree add, then remove) gets
// no steps: the plan neither restores its directories nor removes its
// names, and the rewind still gives the tree as it was. A tree that a
// rename moved a file into keeps its steps, since the file must come back
// from it.
func TestRewindDropsTreesMadeAndRemoved(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	before := d.manifest()
	d.mkdirP("wt/a/b")
	d.write("wt/a/b/f", "f\n")
	d.write("wt/g", "g\n")
	d.write("wt/g", "g2\n")
	d.rmR("wt")
	d.mkdirP("moved/in")
	d.rename("left.txt", "moved/in/left.txt")
	d.rmR("moved")
	d.appendf("README.md", "x\n")
	plan, _ := d.rewind("", RewindOptions{})
	var kept []string
	for _, s := range plan.Steps {
		if s.Path == "wt" || strings.HasPrefix(s.Path, "wt/") {
			t.Errorf("a step on a tree made and removed in the interval: %s %s", s.Kind, s.Path)
		}
		if strings.HasPrefix(s.Path, "moved") || s.Path == "left.txt" || s.From == "left.txt" {
			kept = append(kept, s.Kind+" "+s.Path)
		}
	}
	if len(kept) == 0 {
		t.Errorf("no steps for the tree a file was moved into; want left.txt back from it")
	}
	sameManifest(t, "after the rewind", before, d.manifest())
}

// TestRewindReleaseDuringDirRename: a handle of a file in a directory is
// released while the session renames the directory: the handle's
// after-note (by the file's name when it was opened) lands between the
// rename's record and the rename's after-note, and describes the file
// before the move. fsstress found this: the conflict rule took the note
// for a file still at the old name, found that name absent, and reported
// a change outside the mount. The note is the moving file's, at its new
// name: no conflict, and the rewind gives the tree back.
func TestRewindReleaseDuringDirRename(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	before := d.manifest()
	d.mkdir("d")
	d.write("d/f", "first\n")
	capture := func(name string) (PreImage, error) {
		fd, leaf, err := OpenParent(d.root, name)
		if err != nil {
			return PreImage{}, err
		}
		defer unix.Close(fd)
		return CaptureAt(j.Blobs(), fd, leaf)
	}
	// A handle writes d/f and is released while d is renamed to e.
	if _, err := j.Record(d.s, "write", "d/f", "", capture); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.abs("d/f"), []byte("second, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := j.Record(d.s, OpRename, "d", "e", capture)
	if err != nil {
		t.Fatal(err)
	}
	released, err := d.ins().Lstat("d/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.NoteAfter(d.s, 0, []After{released}); err != nil { // the release, before the move
		t.Fatal(err)
	}
	if err := os.Rename(d.abs("d"), d.abs("e")); err != nil {
		t.Fatal(err)
	}
	var afters []After
	for _, p := range []string{"d", "e"} {
		a, err := d.ins().Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		afters = append(afters, a)
	}
	if err := j.NoteAfter(d.s, rec.Seq, afters); err != nil {
		t.Fatal(err)
	}
	plan, _ := d.rewind("", RewindOptions{})
	if len(plan.Conflicts) > 0 {
		t.Errorf("conflicts %+v, want none: every change was the session's", plan.Conflicts)
	}
	sameManifest(t, "after the rewind", before, d.manifest())
}

func TestRewindConflictBelowRenamedDir(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	d.rename("pkg", "lib")
	d.on(d.root, "other").write("lib/x.txt", "theirs\n")
	plan, err := j.PlanRewind("agent", "", d.ins(), RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Conflicts) != 1 || plan.Conflicts[0].Path != "lib/x.txt" || plan.Conflicts[0].By != "other" {
		t.Fatalf("conflicts %+v", plan.Conflicts)
	}
	if len(plan.Steps) != 0 {
		t.Fatalf("steps of the conflicting rename planned: %+v", plan.Steps)
	}
	if _, err := j.Rewind(plan, d.applier()); err != nil {
		t.Fatal(err)
	}
	if d.exists("pkg") || !d.exists("lib/x.txt") {
		t.Fatal("the rename was half undone")
	}
}

// TestRewindOfTempFileSavesPlansOneStep: an edit saved through a
// temporary file renamed over the name (`sed -i`, an editor) is undone by
// one restore of the name, and a new file saved that way by one removal:
// no rename back to the temporary name and removal of it. A plain `mv` is
// undone by its rename back alone.
func TestRewindOfTempFileSavesPlansOneStep(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	before := d.manifest()
	d.sedI("README.md", "a", "b")
	d.write("new.tmp", "new\n")
	d.rename("new.tmp", "new.txt")
	d.rename("left.txt", "moved.txt") // mv: renamed back, its bytes restored, no removal of moved.txt
	plan, res := d.rewind("", RewindOptions{})
	got := stepNames(plan)
	sort.Strings(got)
	if want := []string{"remove new.txt", "rename left.txt", "restore README.md", "restore left.txt"}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	if res.Restored != 2 || res.Removed != 1 {
		t.Errorf("result restored %d removed %d, want 2 and 1", res.Restored, res.Removed)
	}
	sameManifest(t, "after the rewind", before, d.manifest())
}

// TestRewindPathOfTempFileSave: a rewind of one path that `sed -i`
// replaced (a temporary file renamed over it) restores the path and
// leaves no temporary file behind, even when the same temporary name then
// replaced a file outside the paths, which stays as it is. The rewind
// used to rename the path back to the temporary name and leave it there,
// with the edited bytes.
func TestRewindPathOfTempFileSave(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	seedTree(d)
	start := d.manifest()
	d.sedI("README.md", "hello", "HELLO")
	d.sedI("left.txt", "l", "L") // the same temporary name, sedXYZ
	mid := d.manifest()
	plan, _ := d.rewind("", RewindOptions{Paths: []string{"README.md"}})
	// left.txt is outside the paths: kept.
	sameManifest(t, "after the rewind of README.md", keptFrom(start, mid, "left.txt"), d.manifest())
	if got, want := stepNames(plan), []string{"restore README.md"}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
}

// keptFrom is the manifest start with the paths kept taken from mid: the
// tree a path-filtered rewind should leave.
func keptFrom(start, mid map[string]string, kept ...string) map[string]string {
	want := map[string]string{}
	for p, v := range start {
		want[p] = v
	}
	for _, p := range kept {
		want[p] = mid[p]
	}
	return want
}

// stepNames are plan's steps as "KIND PATH", in plan order.
func stepNames(plan Plan) []string {
	var out []string
	for _, s := range plan.Steps {
		out = append(out, s.Kind+" "+s.Path)
	}
	return out
}
