package branch

// The plan of a branch merge: what each changed path needs in the
// workspace, and which paths conflict (docs/DESIGN.md#branch-merge). The
// plan changes nothing; the CLI applies it through the guard.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/rubinofs/rubinofs/journal"
)

// MergeAction is what a merge does at one path.
type MergeAction string

// The actions of a MergeStep.
const (
	// MergeCreate makes the branch's file, symlink or directory where the
	// workspace has nothing.
	MergeCreate MergeAction = "create"
	// MergeReplace puts the branch's bytes (a symlink's target, or a
	// directory of its type) over a workspace path unchanged since the
	// branch's base.
	MergeReplace MergeAction = "replace"
	// Merge3Way writes the 3-way merge of a text file both sides changed
	// in disjoint hunks.
	Merge3Way MergeAction = "merge"
	// MergeChmod gives the path the branch's permission bits (its content
	// is the same on both sides).
	MergeChmod MergeAction = "chmod"
	// MergeRemove unlinks a file or symlink the branch deleted.
	MergeRemove MergeAction = "remove"
	// MergeRmdir removes a directory the branch deleted, after its
	// entries.
	MergeRmdir MergeAction = "rmdir"
	// MergeSame needs nothing: the workspace already has the branch's
	// state there.
	MergeSame MergeAction = "same"
	// MergeConflict cannot be applied: Why says which side changed what.
	MergeConflict MergeAction = "conflict"
)

// MaxMerge3Way bounds each side of a 3-way merge, in bytes: a text file
// changed on both sides past it is a conflict (the sides are held in
// memory while git merge-file runs).
const MaxMerge3Way = 16 << 20

// MaxMergeChanges bounds how many changed paths one merge plans: a plan
// holds about 0.9 KB a path (its step, the path's base), so a branch of
// 1,000,000 tiny changes would hold about 1 GB in the merging process
// (root's). Past it PlanMerge fails with ErrTooManyChanges before reading
// a base or the workspace (docs/DESIGN.md#branch-merge).
const MaxMergeChanges = 500_000

// maxMergeChanges is MaxMergeChanges; tests lower it.
var maxMergeChanges = MaxMergeChanges

// ErrTooManyChanges is wrapped by PlanMerge's error for a branch changing
// more paths than MaxMergeChanges.
var ErrTooManyChanges = errors.New("too many changed paths for one merge")

// MergeStep is one path of a MergePlan. Path is slash-separated, relative
// to the workspace root. Kind is the branch side's type (journal.KindFile,
// KindDir, KindSymlink) for create, replace and merge; Retype says the
// workspace's path is of another type and is removed first. Perm is the
// branch side's permission bits (fs.ModePerm with setuid, setgid,
// sticky). Declare is the content hash (32 hex digits) to declare read in
// the merging session before the change ("": none): the base's for
// replace, chmod and remove, the workspace bytes merged for merge, so the
// guard refuses the change if the file changed since
// (docs/DESIGN.md#branch-merge). Src is the branch's file (in the upper
// directory) whose bytes or target a create or replace copies; Merged the
// bytes a merge writes; Uid and Gid the branch side's owner. WasLink is
// the target of the workspace's symlink a replace or remove step unlinks
// ("": the path is no symlink), which the guard does not hash: the apply
// checks it just before the unlink. Why says what a conflict is, or what a
// same or merge step found.
type MergeStep struct {
	Path     string
	Action   MergeAction
	Kind     string
	Retype   bool
	Perm     fs.FileMode
	Declare  string
	WasLink  string
	Src      string
	Merged   []byte
	Uid, Gid int
	Why      string
}

// MergePlan is the steps of a merge, sorted by Path (a directory before
// what it holds), and how many are conflicts.
type MergePlan struct {
	Steps     []MergeStep
	Conflicts int
}

// PlanMerge plans merging branch b into the workspace, following
// docs/DESIGN.md#branch-merge: changes are Changes(b.Upper(), b.Lowers()...)
// (the branch's own, against its branch point, as `branch diff` reads them), the
// branch's base of each path is from b.Bases, and the workspace's current
// state is read at ws (the workspace's mountpoint: read by a process whose
// reads count for no session). A path is a conflict when the workspace
// changed it since the branch's base and the change cannot be merged: a
// text file changed on both sides is merged 3-way with `git merge-file`
// (disjoint hunks apply, overlapping ones conflict; no git is a
// conflict). skip reports paths to leave out (the control tree). Errors
// are those of reading the trees or the journal; conflicts are steps, not
// errors. Memory holds the result, merged files' bytes included.
func PlanMerge(b *Branch, ws string, skip func(string) bool) (MergePlan, error) {
	var plan MergePlan
	changes, err := Changes(b.Upper(), b.Lowers()...)
	if err != nil {
		return plan, err
	}
	if len(changes) > maxMergeChanges {
		return plan, fmt.Errorf("it changes %d paths, over the %d one merge plans (about 0.9 KB of memory each): %w; "+
			"merge part of it by hand (`rubinofs branch diff --stat` lists them) or discard it", len(changes), maxMergeChanges, ErrTooManyChanges)
	}
	bases, err := b.Bases()
	if err != nil {
		return plan, fmt.Errorf("reading the branch's journal: %w", err)
	}
	for _, ch := range changes {
		if skip != nil && skip(ch.Path) {
			continue
		}
		base, known := bases[ch.Path]
		var st MergeStep
		if ch.Status == Deleted {
			st, err = planDelete(ws, ch.Path, base, known)
		} else {
			st, err = planPut(ws, ch.Path, filepath.Join(b.Upper(), filepath.FromSlash(ch.Path)), base, known)
		}
		if errors.Is(err, ErrSymlinkOnPath) {
			st, err = conflict(MergeStep{Path: ch.Path}, ErrSymlinkOnPath.Error()+": not followed"), nil
		}
		if err != nil {
			return plan, fmt.Errorf("%s: %w", ch.Path, err)
		}
		plan.Steps = append(plan.Steps, st)
	}
	if err := checkRmdirs(&plan, ws); err != nil {
		return plan, err
	}
	for _, st := range plan.Steps {
		if st.Action == MergeConflict {
			plan.Conflicts++
		}
	}
	return plan, nil
}

// side is one side's state of a path: its kind (journal.Kind* or "other"
// for a device, fifo or socket), permission bits, content hash (files) and
// target (symlinks).
type side struct {
	kind     string
	perm     fs.FileMode
	hash     string
	target   string
	uid, gid int
}

// matchesBase reports whether the workspace side cur still is what the
// branch saw (same kind, bytes, target); a file whose base bytes were not
// kept never matches.
func matchesBase(cur side, base Base) bool {
	if cur.kind != base.Kind {
		return false
	}
	switch cur.kind {
	case journal.KindFile:
		return base.Hash != "" && cur.hash == base.Hash
	case journal.KindSymlink:
		return cur.target == base.Target
	}
	return true
}

// sameState reports whether a and b are the same path state: kind, and
// bytes and permission bits of a file, target of a symlink, permission
// bits of a directory.
func sameState(a, b side) bool {
	return a.kind == b.kind && a.hash == b.hash && a.target == b.target && (a.kind == journal.KindSymlink || a.perm == b.perm)
}

// planPut plans a path the branch has (added, modified or retyped): src is
// its upper file; the workspace's side is rel under ws.
func planPut(ws, rel, src string, base Base, known bool) (MergeStep, error) {
	st := MergeStep{Path: rel, Src: src}
	// The branch's side is read as the workspace's is, no symlink on its
	// way followed: an agent in the branch may swap a directory of its
	// upper directory for a symlink while the plan reads it.
	theirs, err := wsStateOf(upperRoot(st), rel)
	if errors.Is(err, ErrSymlinkOnPath) {
		return conflict(st, ErrBranchChanged.Error()), nil
	}
	if err != nil {
		return st, err
	}
	st.Kind, st.Perm, st.Uid, st.Gid = theirs.kind, theirs.perm, theirs.uid, theirs.gid
	if theirs.kind == "other" {
		return conflict(st, "the branch made a device, fifo or socket here: not merged"), nil
	}
	ours, err := wsStateOf(ws, rel)
	if err != nil {
		return st, err
	}
	switch {
	case sameState(ours, theirs):
		st.Action, st.Why = MergeSame, "the workspace already has it"
		return st, nil
	case ours.kind == journal.KindDir && theirs.kind == journal.KindDir && (!known || base.Kind != journal.KindDir):
		st.Action, st.Why = MergeSame, "a directory on both sides (the workspace's permissions kept)"
		return st, nil
	case ours.kind == journal.KindAbsent:
		if known && base.Kind != journal.KindAbsent {
			return conflict(st, "deleted in the workspace since the branch read it; the branch changed it"), nil
		}
		st.Action = MergeCreate
		return st, nil
	case !known:
		return conflict(st, "the workspace has it, and the branch's journal has no pre-image of it (the branch kept no journal, or the path was made on both sides)"), nil
	case base.Kind == journal.KindAbsent:
		return conflict(st, "created on both sides"), nil
	}
	if matchesBase(ours, base) {
		if ours.kind == journal.KindDir && theirs.kind != journal.KindDir {
			return conflict(st, "the branch replaced a directory with a non-directory: not merged"), nil
		}
		st.Retype = ours.kind != theirs.kind
		st.Declare = ours.hash // the base's, which it matches; "" for non-files
		st.WasLink = ours.target
		st.Action = MergeReplace
		if !st.Retype && ours.kind == journal.KindFile && ours.hash == theirs.hash {
			st.Action = MergeChmod
		}
		if ours.kind == journal.KindDir && theirs.kind == journal.KindDir {
			st.Action = MergeChmod
		}
		return st, nil
	}
	if ours.kind == journal.KindFile && theirs.kind == journal.KindFile && base.Blob != "" {
		return plan3Way(st, ws, base.Blob, src, ours.perm)
	}
	return conflict(st, "changed in the workspace since the branch read it"), nil
}

// planDelete plans a path the branch deleted; the workspace's side is rel
// under ws.
func planDelete(ws, rel string, base Base, known bool) (MergeStep, error) {
	st := MergeStep{Path: rel}
	ours, err := wsStateOf(ws, rel)
	if err != nil {
		return st, err
	}
	switch {
	case ours.kind == journal.KindAbsent:
		st.Action, st.Why = MergeSame, "already gone from the workspace"
		return st, nil
	case !known:
		return conflict(st, "the branch deleted it but never saw this one: the workspace made it after (or the branch kept no journal)"), nil
	case !matchesBase(ours, base):
		return conflict(st, "changed in the workspace since the branch read it; the branch deleted it"), nil
	}
	st.Kind = ours.kind
	if ours.kind == journal.KindDir {
		st.Action = MergeRmdir
		return st, nil
	}
	st.Action, st.Declare, st.WasLink = MergeRemove, ours.hash, ours.target
	return st, nil
}

// plan3Way merges the workspace's bytes of st.Path under ws, the base's
// at basePath and the branch's at src with `git merge-file`. The step
// declares the hash of the workspace bytes it merged; the workspace's
// permission bits stay.
func plan3Way(st MergeStep, ws, basePath, src string, perm fs.FileMode) (MergeStep, error) {
	var sides [3][]byte
	var declare string
	for i, p := range []string{"", basePath, src} {
		var err error
		switch i {
		case 0:
			sides[0], declare, err = readWorkspaceFile(ws, st.Path)
			if errors.Is(err, ErrBranchChanged) {
				return conflict(st, "changed in the workspace while the plan read it"), nil
			}
		case 2: // the branch's: no symlink followed, no fifo waited on
			sides[2], _, err = readWorkspaceFile(upperRoot(st), st.Path)
			if errors.Is(err, ErrSymlinkOnPath) || errors.Is(err, ErrBranchChanged) {
				return conflict(st, ErrBranchChanged.Error()), nil
			}
		default:
			var fi fs.FileInfo
			if fi, err = os.Stat(p); err == nil && fi.Size() <= MaxMerge3Way {
				sides[i], err = os.ReadFile(p)
			} else if err == nil {
				sides[i] = make([]byte, MaxMerge3Way+1) // only its length is looked at
			}
		}
		if err != nil {
			return st, err
		}
		if len(sides[i]) > MaxMerge3Way {
			return conflict(st, fmt.Sprintf("changed on both sides; over %d MiB, not merged 3-way", MaxMerge3Way>>20)), nil
		}
		if bytes.IndexByte(sides[i][:min(len(sides[i]), 8000)], 0) >= 0 {
			return conflict(st, "changed on both sides (binary)"), nil
		}
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return conflict(st, "changed on both sides; a 3-way merge needs git (git merge-file), not found"), nil
	}
	merged, n, err := mergeFile(git, sides)
	if err != nil {
		return st, err
	}
	if n > 0 {
		return conflict(st, fmt.Sprintf("changed on both sides: %d overlapping hunk(s)", n)), nil
	}
	st.Action, st.Merged, st.Perm, st.Declare = Merge3Way, merged, perm, declare
	st.Why = "changed on both sides in disjoint hunks"
	return st, nil
}

// mergeFile runs `git merge-file -p` on ours, base and theirs (copied to
// temporary files: the workspace's bytes were read once, and are the
// ones declared) and returns the result and git's count of conflicts.
func mergeFile(git string, sides [3][]byte) ([]byte, int, error) {
	dir, err := os.MkdirTemp("", "rubinofs-merge-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	names := [3]string{"ours", "base", "theirs"}
	args := []string{"merge-file", "-p", "-q"}
	for i, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, sides[i], 0o600); err != nil {
			return nil, 0, err
		}
		args = append(args, p)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(git, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), 0, nil
	case errors.As(err, &ee) && ee.ExitCode() > 0 && ee.ExitCode() < 128:
		return nil, ee.ExitCode(), nil
	}
	return nil, 0, fmt.Errorf("git merge-file: %v: %s", err, strings.TrimSpace(errb.String()))
}

// conflict marks st a conflict for why.
func conflict(st MergeStep, why string) MergeStep {
	st.Action, st.Why, st.Declare, st.Merged = MergeConflict, why, "", nil
	return st
}

// checkRmdirs turns into a conflict each rmdir whose workspace directory
// holds an entry the plan does not remove (the workspace added it, or its
// removal conflicts), so no rmdir fails half-way through the apply.
func checkRmdirs(plan *MergePlan, ws string) error {
	removed := map[string]bool{}
	for _, st := range plan.Steps {
		if st.Action == MergeRemove || st.Action == MergeRmdir {
			removed[st.Path] = true
		}
	}
	// Deepest first, so a conflict below reaches every directory above.
	for i := len(plan.Steps) - 1; i >= 0; i-- {
		st := &plan.Steps[i]
		if st.Action != MergeRmdir {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(ws, st.Path))
		if err != nil {
			return fmt.Errorf("%s: %w", st.Path, err)
		}
		for _, e := range ents {
			if child := path.Join(st.Path, e.Name()); !removed[child] {
				*st = conflict(*st, fmt.Sprintf("the branch deleted the directory; the workspace's %s stays (made since, or its removal conflicts)", child))
				delete(removed, st.Path)
				break
			}
		}
	}
	return nil
}
