package tests

// The change journal through a real mount with real tools: a fresh
// session (`rubinofs run`) on a git repository changes the tree with
// echo, sed -i, mv, rm, cp, a Python atomic save, mkdir -p, chmod, ln -sf,
// a new file and git checkout; `rubinofs changes` and `rubinofs diff` list
// and show it, and `rubinofs rewind` puts the tree back byte for byte
// (docs/DESIGN.md#journal-store).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// realToolsScript is the session's work: every kind of change a Bash
// tool makes. It reads each file it changes first (the guard's rule), and
// changes the ignored directory build/ too, which is not journaled.
const realToolsScript = `set -e
cat notes.txt old.txt gone.txt target.txt run.sh blob.bin build/out.o >/dev/null
echo appended >> notes.txt
sed -i 's/two/TWO/' src/app.txt
mv old.txt renamed.txt
rm gone.txt
cp README.md target.txt
python3 -c '
import json, os, tempfile
d = json.load(open("config.json")); d["b"] = 2
f = tempfile.NamedTemporaryFile("w", dir=".", delete=False)
json.dump(d, f); f.close(); os.replace(f.name, "config.json")'
mkdir -p newdir/sub && echo a > newdir/sub/a.txt && echo b > newdir/b.txt
chmod +x run.sh
printf 'brand new\n' > fresh.txt
printf '\000\011changed' > blob.bin
ln -sfn README.md link
echo junk > build/junk.o && echo more >> build/out.o
git checkout -q feature
echo tools-done`

// TestJournalRewindRealTools: every change of realToolsScript is listed
// by `rubinofs changes` (text and --json), nothing under .git or the
// ignored build/; `rubinofs diff` shows the edits as git diff does, a
// binary file named as such, and takes a PATH relative to the current
// directory; `rubinofs rewind --to cp000000` returns every non-ignored
// path to its state before, byte for byte and modes included, in the
// backing directory and as seen through the mount, and names the
// automatic checkpoint that undoes it.
func TestJournalRewindRealTools(t *testing.T) {
	m := journalMount(t)
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	if out := s.must(realToolsScript); !strings.Contains(out, "tools-done") {
		t.Fatalf("the tools did not all run:\n%s", out)
	}
	if got := manifest(t, m.ws, "build"); got == before {
		t.Fatal("the tools changed nothing")
	}

	out := s.must("rubinofs changes")
	got := changeLines(t, out)
	want := map[string]string{
		"notes.txt": "M", "gone.txt": "D", "renamed.txt": "R", "old.txt": "R<", "target.txt": "M",
		"newdir": "A", "newdir/sub": "A", "newdir/sub/a.txt": "A", "newdir/b.txt": "A", "run.sh": "M",
		"fresh.txt": "A", "blob.bin": "M", "branch.txt": "M", "feature-gone.txt": "D",
		"feature-new.txt": "A", "feature-dir": "A", "feature-dir/x.txt": "A",
	}
	for path, status := range want {
		if got[path] != status {
			t.Errorf("rubinofs changes: %s has status %q, want %q", path, got[path], status)
		}
	}
	// An atomic save (sed -i, Python's os.replace) renames a temporary
	// file over the old one: listed as modified, the temporary left out.
	for _, path := range []string{"src/app.txt", "config.json"} {
		if st := got[path]; st != "M" {
			t.Errorf("rubinofs changes: %s has status %q, want M (saved through a temporary file)", path, st)
		}
	}
	if st := got["link"]; st != "M" {
		t.Errorf("rubinofs changes: link (ln -sfn) has status %q, want M", st)
	}
	if len(got) != len(want)+3 {
		t.Errorf("rubinofs changes lists %d paths, want %d (temporary files left out):\n%s", len(got), len(want)+3, out)
	}
	for path := range got {
		if strings.HasPrefix(path, ".git") && path != ".gitignore" || strings.HasPrefix(path, "build") || strings.HasPrefix(path, ".rubino") {
			t.Errorf("rubinofs changes lists %s, which is never journaled (.git, ignored, or the control tree)", path)
		}
	}
	if !strings.Contains(out, "100644..100755") {
		t.Errorf("rubinofs changes does not show run.sh's mode change:\n%s", out)
	}
	js := s.must("rubinofs changes --json")
	renamed := false
	for _, line := range strings.Split(strings.TrimSpace(js), "\n") {
		var pc struct {
			Path        string   `json:"path"`
			Ops         []string `json:"ops"`
			RenamedFrom string   `json:"renamed_from"`
		}
		if err := json.Unmarshal([]byte(line), &pc); err != nil {
			t.Fatalf("rubinofs changes --json: %v: %q", err, line)
		}
		if pc.Path == "renamed.txt" {
			renamed = pc.RenamedFrom == "old.txt"
		}
	}
	if !renamed {
		t.Errorf("rubinofs changes --json does not give renamed.txt renamed_from old.txt:\n%s", js)
	}

	diff := s.must("rubinofs diff")
	for _, want := range []string{
		"--- a/notes.txt\n+++ b/notes.txt\n", "+appended\n",
		"--- a/src/app.txt\n+++ b/src/app.txt\n", "-line two\n", "+line TWO\n",
		"Binary files a/blob.bin and b/blob.bin differ",
		"+++ b/fresh.txt\n", "+brand new\n",
		"--- a/gone.txt\n", "-delete me\n",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("rubinofs diff lacks %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "build/") {
		t.Errorf("rubinofs diff shows the ignored build/:\n%s", diff)
	}
	one := s.must("cd src && rubinofs diff app.txt")
	if !strings.Contains(one, "+++ b/src/app.txt") || strings.Contains(one, "notes.txt") {
		t.Errorf("rubinofs diff app.txt in src/: want src/app.txt alone:\n%s", one)
	}

	out = s.must("rubinofs rewind --to cp000000")
	if _, _, conflicts, unrecoverable := rewindCounts(t, out); conflicts != 0 || unrecoverable != 0 {
		t.Errorf("rewind of the session's own changes: conflicts %d, unrecoverable %d\n%s", conflicts, unrecoverable, out)
	}
	if undoRe.FindStringSubmatch(out) == nil {
		t.Errorf("the rewind names no checkpoint to undo it:\n%s", out)
	}
	sameManifest(t, "the backing directory after the rewind", before, manifest(t, m.ws, "build"))
	sameManifest(t, "the mount after the rewind", before, manifest(t, m.mnt, "build"))
	if b, err := os.ReadFile(m.path("build/junk.o")); err != nil || string(b) != "junk\n" {
		t.Errorf("build/junk.o (ignored, not journaled) after the rewind: %q, %v; want it left as the session made it", b, err)
	}
	if out := s.must("rubinofs changes --since " + undoRe.FindStringSubmatch(out)[1]); len(changeLines(t, out)) == 0 {
		t.Errorf("the rewind's own changes are not journaled behind its checkpoint")
	}
}

// TestJournalRewindUndo: a rewind is undone by rewinding to the automatic
// checkpoint it printed: the tree is again the one the session had made.
// The mount runs without the watcher and with one-hour kernel caches, so
// the view through the mount must follow the rewind without the watcher's
// help.
func TestJournalRewindUndo(t *testing.T) {
	m := journalMount(t, "--watch=false", "--cache-timeout", "1h")
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	s.must(realToolsScript)
	made := manifest(t, m.ws, "build")
	sameManifest(t, "through the mount before the rewind", made, manifest(t, m.mnt, "build"))
	out := s.must("rubinofs rewind --to cp000000")
	sameManifest(t, "after the rewind", before, manifest(t, m.ws, "build"))
	sameManifest(t, "after the rewind (through the mount)", before, manifest(t, m.mnt, "build"))
	undo := undoRe.FindStringSubmatch(out)
	if undo == nil {
		t.Fatalf("the rewind names no checkpoint to undo it:\n%s", out)
	}
	out = s.must("rubinofs rewind --to " + undo[1])
	if _, _, conflicts, _ := rewindCounts(t, out); conflicts != 0 {
		t.Errorf("undoing the rewind: %d conflicts\n%s", conflicts, out)
	}
	sameManifest(t, "after undoing the rewind (backing)", made, manifest(t, m.ws, "build"))
	sameManifest(t, "after undoing the rewind (through the mount)", made, manifest(t, m.mnt, "build"))
}

// TestJournalRewindAfterFailedChanges: changes the session's tools tried
// and the file system refused (git checkout's rmdir of a directory that
// still holds an untracked file, an rmdir of a non-empty tracked
// directory, a noclobber create of an existing name, a rename onto a
// non-empty directory) are noted as failed, so a rewind takes nothing from
// them: it reports no conflict and puts the tree back as it was; and
// `rubinofs changes` lists no path only they named.
// Before the failure notes, each failed rmdir was taken for a directory
// removed by the session and then made again outside the mount: a
// conflict, and the directory and what it held stayed.
func TestJournalRewindAfterFailedChanges(t *testing.T) {
	m := journalMount(t)
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	s.must(`mkdir -p made/sub && printf x > made/sub/keep && mkfifo made/sub/fifo
! rmdir made/sub 2>/dev/null
! rmdir src 2>/dev/null
! (set -C; printf y > made/sub/keep) 2>/dev/null
mkdir -p other/full && printf z > other/full/f
! python3 -c 'import os; os.rename("made", "other")' 2>/dev/null
cat notes.txt >/dev/null && printf 'beta\n' >> notes.txt`)
	if b, err := os.ReadFile(filepath.Join(m.ws, "made/sub/keep")); err != nil || string(b) != "x" {
		t.Fatalf("made/sub/keep: %q, %v; want the noclobber create refused", b, err)
	}
	// src was named only by the failed rmdir: `changes` does not list it.
	if out := s.must("rubinofs changes"); regexp.MustCompile(`(?m)^.  src  `).MatchString(out) || !strings.Contains(out, "notes.txt") {
		t.Errorf("rubinofs changes lists a path only a failed change named (src), or misses notes.txt:\n%s", out)
	}
	out := s.must("rubinofs rewind --to cp000000")
	if _, _, conflicts, _ := rewindCounts(t, out); conflicts != 0 {
		t.Errorf("the rewind reported %d conflicts, want none:\n%s", conflicts, out)
	}
	sameManifest(t, "after the rewind", before, manifest(t, m.ws, "build"))
}

// TestJournalRewindAfterTimesSet: tools that set a file's times after
// writing it (tar and unzip extracting, rsync -a, touch -d) leave the
// session's files in a state the journal knows: the rewind finds no
// conflict and gives the tree back. A change of times was not noted, so
// the rule found each such file's mtime other than its last note's and
// took it for a change outside the mount: an unzip of 533 files gave 392
// conflicts.
func TestJournalRewindAfterTimesSet(t *testing.T) {
	m := journalMount(t)
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	tgz := filepath.Join(t.TempDir(), "src.tgz")
	s.must(`set -e
tar czf ` + tgz + ` src
mkdir x && tar xzf ` + tgz + ` -C x
cat notes.txt >/dev/null && touch -d 2001-02-03 notes.txt
printf 'made\n' > made.txt && touch -m -d 2002-03-04 made.txt
rsync -a src/ copy/`)
	out := s.must("rubinofs rewind --to cp000000")
	if _, _, conflicts, _ := rewindCounts(t, out); conflicts != 0 || strings.Contains(out, "errors:") {
		t.Errorf("the rewind reported %d conflicts or failed steps, want none:\n%s", conflicts, out)
	}
	sameManifest(t, "after the rewind", before, manifest(t, m.ws, "build"))
}

// TestJournalRewindOverSpecialFiles: the session replaced regular files
// with a FIFO and, as root, with a character device, and removed a device
// node. The rewind restores the files, byte for byte, and the node with
// its device number, and returns. It used to open the FIFO for
// writing to restore the bytes in place: the open waited for a reader,
// so the rewind (and the CLI) hung, and the bytes went into the pipe. The
// device (1,3, /dev/null's) took the bytes and stayed a device.
func TestJournalRewindOverSpecialFiles(t *testing.T) {
	m := journalMount(t)
	before := manifest(t, m.ws, "build")
	root := os.Geteuid() == 0
	if root { // a device node from before the session, removed by it
		if err := unix.Mknod(filepath.Join(m.ws, "zero.dev"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
			t.Fatal(err)
		}
		before = manifest(t, m.ws, "build")
	}
	s := m.startSession("agent")
	script := "cat notes.txt old.txt >/dev/null && rm notes.txt && mkfifo notes.txt"
	if root {
		script += " && rm old.txt && mknod old.txt c 1 3 && rm zero.dev"
	}
	s.must(script)
	out := s.must("rubinofs rewind --to cp000000")
	if strings.Contains(out, "errors:") {
		t.Errorf("the rewind failed steps:\n%s", out)
	}
	sameManifest(t, "after the rewind", before, manifest(t, m.ws, "build"))
	if root {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(m.ws, "zero.dev"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 5) {
			t.Errorf("zero.dev after the rewind: mode %o, device %d:%d (%v); want the character device 1:5 back",
				st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), err)
		}
	}
}

// TestJournalRewindAfterFsstress: fsstress (a session of four processes
// making, writing, renaming, exchanging and removing files, directories,
// FIFOs and device nodes) and then `rubinofs rewind --to cp000000` give
// the tree back as it was, with no conflict and no failed step. Runs of
// fsstress found three bugs: a restore opened a character device fsstress
// had made to write the file's bytes into it (every run, before the fix);
// a handle released while its file or a directory above it was being
// renamed noted the file under its old name (journal's
// TestRewindReleaseDuringDirRename and journalhook's
// TestReleaseNotesTheFilesNameNow); and a release after a close, logged
// while the same process's exchange of a directory above the file was in
// flight, was read under the other side's name (journalhook's
// TestReleaseNoteWaitsForMoveInFlight; about 1 run in 10 before, with
// four processes). The operations per process stay under what fills the
// journal's budget: past it, pre-images are unrecoverable and the steps
// that need them fail, as reported.
func TestJournalRewindAfterFsstress(t *testing.T) {
	bin := xfstestsTool(t, "fsstress")
	for _, seed := range []int{7, 11, 29, 31} {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			m := journalMount(t)
			before := manifest(t, m.ws, "build")
			s := m.startSession("agent")
			// No mwrite: a store through a shared mapping reaches the
			// file with no request to the daemon, so the journal has no
			// record and no after-note of it, and the rewind rightly
			// reports the file as changed outside the mount.
			// Four processes (fsstressArgs): a handle released (asynchronously, after
			// close) while the same process renames or exchanges a
			// directory above it; journalhook's
			// TestReleaseNoteWaitsForMoveInFlight pins that race.
			args := append(fsstressArgs(seed, 1000, "stress"), "-f", "mwrite=0")
			s.must(shq(bin) + " " + strings.Join(args, " ") + " >/dev/null")
			out := s.must("rubinofs rewind --to cp000000")
			if restored, removed, conflicts, _ := rewindCounts(t, out); conflicts != 0 || strings.Contains(out, "errors:") || removed == 0 {
				t.Errorf("the rewind after fsstress: %d conflicts, %d restored, %d removed, want no conflict or failed step:\n%s",
					conflicts, restored, removed, tail(out, 30))
			}
			sameManifest(t, "after the rewind", before, manifest(t, m.ws, "build"))
		})
	}
}

// TestJournalRewindPathAfterFsstress: after fsstress (four processes,
// each in a directory of its own, pN), `rubinofs rewind --to cp000000
// stress/p1` gives stress/p1 back as it was at the start, and leaves p0,
// p2 and p3 as fsstress left them, with no conflict and no failed step.
func TestJournalRewindPathAfterFsstress(t *testing.T) {
	bin := xfstestsTool(t, "fsstress")
	for _, seed := range []int{41, 46} {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			m := journalMount(t)
			p1 := filepath.Join(m.ws, "stress", "p1")
			if err := os.MkdirAll(p1, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p1, "keep.txt"), []byte("kept\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p1Before := manifest(t, p1)
			s := m.startSession("agent")
			args := append(fsstressArgs(seed, 1000, "stress"), "-f", "mwrite=0")
			s.must(shq(bin) + " " + strings.Join(args, " ") + " >/dev/null")
			others := manifest(t, m.ws, "build", "stress/p1")
			if manifest(t, p1) == p1Before {
				t.Fatal("fsstress changed nothing in stress/p1")
			}
			out := s.must("rubinofs rewind --to cp000000 stress/p1")
			if _, _, conflicts, _ := rewindCounts(t, out); conflicts != 0 || strings.Contains(out, "errors:") {
				t.Errorf("the rewind of stress/p1: %d conflicts or failed steps, want none:\n%s", conflicts, tail(out, 30))
			}
			sameManifest(t, "stress/p1 after its rewind", p1Before, manifest(t, p1))
			sameManifest(t, "the rest after the rewind of stress/p1", others, manifest(t, m.ws, "build", "stress/p1"))
		})
	}
}

// TestJournalDryRun: `rewind --dry-run` prints the plan (a removal for a
// created file, a rename back, a restore) and the counts, and changes
// nothing: the tree is as the session left it and no checkpoint was
// taken. Before any change, changes and diff print nothing and a rewind
// has nothing to do. A checkpoint's label and id come back from `rubinofs checkpoint`,
// and a rewind limited to a PATH leaves the rest.
func TestJournalDryRun(t *testing.T) {
	m := journalMount(t)
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	for _, cmd := range []string{"rubinofs changes", "rubinofs diff", "rubinofs changes --json"} {
		if out := s.must(cmd); out != "" {
			t.Errorf("%s before any change: %q, want nothing", cmd, out)
		}
	}
	if out := s.must("rubinofs rewind --to cp000000"); !strings.Contains(out, "nothing to do") || undoRe.MatchString(out) {
		t.Errorf("a rewind before any change: want nothing to do and no checkpoint taken:\n%s", out)
	}
	s.must("cat notes.txt old.txt >/dev/null && echo more >> notes.txt && mv old.txt renamed.txt && echo new > fresh.txt")
	made := manifest(t, m.ws, "build")
	out, code := s.run("rubinofs rewind --dry-run --to cp000000")
	if code != 0 {
		t.Fatalf("a dry run without conflicts: exit %d\n%s", code, out)
	}
	for _, want := range []string{"dry run", "remove    fresh.txt", "rename    renamed.txt -> old.txt", "restore   notes.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run's plan lacks %q:\n%s", want, out)
		}
	}
	if restored, removed, _, _ := rewindCounts(t, out); restored < 2 || removed < 1 {
		t.Errorf("the dry run's counts: restored %d, removed %d; want >= 2 and >= 1\n%s", restored, removed, out)
	}
	if undoRe.MatchString(out) {
		t.Errorf("a dry run names an undo checkpoint:\n%s", out)
	}
	sameManifest(t, "after the dry run", made, manifest(t, m.ws, "build"))
	if ids, _ := checkpointIDs(t, s.must("cat .rubino/self/checkpoints")); len(ids) != 1 {
		t.Errorf("checkpoints after a dry run: %v, want cp000000 alone", ids)
	}

	cp := strings.TrimSpace(s.must("rubinofs checkpoint before the second edit"))
	ids, labels := checkpointIDs(t, s.must("cat .rubino/self/checkpoints"))
	if len(ids) != 2 || ids[1] != cp || labels[1] != "before the second edit" {
		t.Errorf("rubinofs checkpoint printed %q; checkpoints %v %q", cp, ids, labels)
	}
	if out := s.must("rubinofs checkpoints"); !regexp.MustCompile(`(?m)^` + cp + ` .* before the second edit$`).MatchString(out) {
		t.Errorf("rubinofs checkpoints does not list %s with its label:\n%s", cp, out)
	}
	s.must("echo again >> notes.txt && echo other > fresh.txt")
	s.must("rubinofs rewind --to " + cp + " notes.txt")
	if b, _ := os.ReadFile(filepath.Join(m.ws, "notes.txt")); string(b) != "alpha\nmore\n" {
		t.Errorf("notes.txt after a rewind to %s limited to it: %q, want its state at the checkpoint", cp, b)
	}
	if b, _ := os.ReadFile(filepath.Join(m.ws, "fresh.txt")); string(b) != "other\n" {
		t.Errorf("fresh.txt after a rewind limited to notes.txt: %q, want it untouched", b)
	}
	s.must("rubinofs rewind --to cp000000")
	sameManifest(t, "after the rewind to the start", before, manifest(t, m.ws, "build"))
}

// TestJournalDryRunCountsAsApplied: a dry run's counts line is the one
// the applied rewind then prints. `sed -i` renames its temporary file
// over the file it edits, so the plan renames the file back to the
// temporary name and removes that name later: counted by step, the dry run
// reported the temporary name restored as well as removed (one restore
// too many per `sed -i`), where the rewind counts each path once, by the
// last step applied to it.
func TestJournalDryRunCountsAsApplied(t *testing.T) {
	m := journalMount(t)
	s := m.startSession("agent")
	s.must("cat notes.txt old.txt config.json >/dev/null && sed -i 's/alpha/ALPHA/' notes.txt && sed -i 's/a/A/' config.json && mv old.txt renamed.txt && echo new > fresh.txt")
	dry := s.must("rubinofs rewind --dry-run --to cp000000")
	applied := s.must("rubinofs rewind --to cp000000")
	dr, dm, dc, du := rewindCounts(t, dry)
	ar, am, ac, au := rewindCounts(t, applied)
	if dr != ar || dm != am || dc != ac || du != au {
		t.Errorf("the dry run counted restored %d, removed %d, conflicts %d, unrecoverable %d; the rewind then %d, %d, %d, %d\ndry run:\n%s\nrewind:\n%s",
			dr, dm, dc, du, ar, am, ac, au, dry, applied)
	}
	if ar < 3 || am < 1 {
		t.Errorf("the rewind counted restored %d, removed %d; want at least notes.txt, config.json and old.txt restored, fresh.txt removed\n%s", ar, am, applied)
	}
}

// nameless is a session's work on files without a name: a file written
// while unlinked and still open, and an O_TMPFILE file written and then
// named with linkat of its /proc/self/fd link (the write-then-name
// pattern of atomic saves), over a file that existed; and a file whose
// name only looks like go-fuse's placeholder of a nameless node.
const nameless = `set -e
cat notes.txt >/dev/null
printf 'a name, not a placeholder\n' > .go-fuse.1
python3 -c '
import ctypes, os
fd = os.open("notes.txt", os.O_RDWR)
os.unlink("notes.txt")
os.ftruncate(fd, 1); os.pwrite(fd, b"changed while unlinked", 0); os.close(fd)
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o640)
os.write(fd, b"from a tmpfile\n")
libc = ctypes.CDLL(None, use_errno=True)  # linkat(AT_SYMLINK_FOLLOW): os.link calls link(2)
if libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, b"named.txt", 0x400) != 0:
    raise OSError(ctypes.get_errno(), "linkat")
os.close(fd)'
echo nameless-done`

// TestJournalRewindNameless: writes and truncations through the handle of
// a file unlinked while open, and an O_TMPFILE file named by linkat,
// succeed as natively with the journal on (they were refused with EIO:
// the journal tried to take a pre-image under go-fuse's placeholder path
// of a nameless node). A rewind restores the unlinked file's bytes and
// removes the name given to the tmpfile, byte for byte; a workspace file
// named like the placeholder (".go-fuse.1") is journaled like any other.
func TestJournalRewindNameless(t *testing.T) {
	m := journalMount(t, "--watch=false")
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	s.must(nameless)
	if b, err := os.ReadFile(filepath.Join(m.ws, "named.txt")); err != nil || string(b) != "from a tmpfile\n" {
		t.Fatalf("named.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(m.ws, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("notes.txt after the unlink: %v", err)
	}
	out := s.must("rubinofs rewind --to cp000000")
	if _, _, conflicts, unrec := rewindCounts(t, out); conflicts != 0 || unrec != 0 {
		t.Fatalf("rewind: %d conflicts, %d unrecoverable\n%s", conflicts, unrec, out)
	}
	sameManifest(t, "after the rewind", before, manifest(t, m.ws, "build"))
	sameManifest(t, "after the rewind (through the mount)", before, manifest(t, m.mnt, "build"))
}

// namedThenWritten writes an O_TMPFILE file, names it with linkat,
// takes a checkpoint (printing its id after "cp="), and writes on
// through the same handle.
const namedThenWritten = `set -e
python3 -c '
import ctypes, os, subprocess
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o640)
os.write(fd, b"at the checkpoint\n")
libc = ctypes.CDLL(None, use_errno=True)
if libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, b"later.txt", 0x400) != 0:
    raise OSError(ctypes.get_errno(), "linkat")
cp = subprocess.run(["rubinofs", "checkpoint", "named"], check=True, capture_output=True, text=True).stdout.strip()
os.write(fd, b"after the checkpoint\n")
os.close(fd)
print("cp=" + cp)'`

// TestJournalRewindTmpfileWrittenAfterNaming: an O_TMPFILE handle's
// writes after linkat named its file are journaled like any write of a
// named file: whether a handle's file is journaled is decided at its
// first change with a name, not while it has none. A rewind to a
// checkpoint taken between the naming and the later write restores the
// bytes the file had at the checkpoint.
func TestJournalRewindTmpfileWrittenAfterNaming(t *testing.T) {
	m := journalMount(t, "--watch=false")
	s := m.startSession("agent")
	out := s.must(namedThenWritten)
	cp := regexp.MustCompile(`cp=(cp[0-9]+)`).FindStringSubmatch(out)
	if cp == nil {
		t.Fatalf("no checkpoint id in:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(m.ws, "later.txt")); string(b) != "at the checkpoint\nafter the checkpoint\n" {
		t.Fatalf("later.txt before the rewind: %q", b)
	}
	out = s.must("rubinofs rewind --to " + cp[1])
	if _, _, conflicts, unrec := rewindCounts(t, out); conflicts != 0 || unrec != 0 {
		t.Fatalf("rewind: %d conflicts, %d unrecoverable\n%s", conflicts, unrec, out)
	}
	if b, err := os.ReadFile(filepath.Join(m.ws, "later.txt")); err != nil || string(b) != "at the checkpoint\n" {
		t.Fatalf("later.txt after the rewind to %s: %q, %v; want its bytes at the checkpoint", cp[1], b, err)
	}
}
