package journal

// Planning and applying a rewind: the reverse replay of a session's
// records since a checkpoint (docs/DESIGN.md#journal-rewind).

import (
	"fmt"
	"path"
	"strings"
)

// PlanRewind plans the rewind of session to checkpoint to, from its
// records, against the current state (ins), by the reverse replay and the
// conflict rule of docs/DESIGN.md#journal-rewind. Steps holds what Rewind
// applies, in order: without opt.Force the steps undoing a record that
// names a conflicting path are left out (the path listed in Conflicts),
// with it they stay. A restore
// whose pre-image has no bytes (UnrecoverableTooLarge,
// UnrecoverableOverBudget), or whose blob is missing, short or altered
// (Blobs.Check; listed as UnrecoverableLost: docs/DESIGN.md#journal-sync),
// is left out and listed in Unrecoverable. An
// unknown checkpoint is an error; so is a log that cannot be read.
func (j *Journal) PlanRewind(sessionName, to string, ins Inspector, opt RewindOptions) (Plan, error) {
	recs, err := j.Records(sessionName)
	if err != nil {
		return Plan{}, err
	}
	start := checkpointIndex(recs, to)
	if start < 0 {
		return Plan{}, fmt.Errorf("journal: no checkpoint %q", to)
	}
	plan := Plan{Session: sessionName, To: to}
	rev, err := reverseSteps(recs[start+1:], opt.Paths, newReplaySim(ins))
	if err != nil {
		return Plan{}, err
	}
	steps, err := dropDeadTrees(dropRepeats(fuseMoveAway(rev)), ins)
	if err != nil {
		return Plan{}, err
	}
	kept := steps[:0]
	for _, s := range steps {
		if s.Kind == StepRestore && s.Pre.Kind == KindFile && s.Pre.Blob != "" && j.blobs.Check(s.Pre.Blob, s.Pre.Size) != nil {
			s.Pre.Blob, s.Pre.Unrecoverable = "", UnrecoverableLost
		}
		if s.Kind == StepRestore && s.Pre.Unrecoverable != "" {
			plan.Unrecoverable = append(plan.Unrecoverable, s.Pre)
			continue
		}
		kept = append(kept, s)
	}
	steps = kept
	others, err := j.otherChanges(sessionName)
	if err != nil {
		return Plan{}, err
	}
	cc := newConflictChecker(recs, others, ins)
	badRec := map[int]bool{} // records with a conflicting name: all their steps go
	for _, s := range steps {
		for _, name := range []string{s.Path, s.From} {
			if name == "" {
				continue
			}
			cs, err := cc.check(name)
			if err != nil {
				return Plan{}, err
			}
			for _, c := range cs {
				badRec[s.rec] = true
				if !cc.reported[c.Path] {
					cc.reported[c.Path] = true
					plan.Conflicts = append(plan.Conflicts, c)
				}
			}
		}
	}
	for _, s := range steps {
		if !badRec[s.rec] || opt.Force {
			plan.Steps = append(plan.Steps, s.Step)
		}
	}
	return plan, nil
}

func checkpointIndex(recs []Record, id string) int {
	if id == "" {
		id = "cp000000"
	}
	for i, r := range recs {
		if r.Op == OpCheckpoint && r.ID == id {
			return i
		}
	}
	return -1
}

// isChange says whether r is a change record (not a checkpoint, an
// after-note, a failure note, the end or a stop). A change marked Failed
// is still one: it holds the pre-images it saved.
func isChange(r Record) bool {
	return r.Op != OpCheckpoint && r.Op != OpAfter && r.Op != OpEnd && r.Op != OpStop && r.Op != OpFailed
}

// within reports whether p is one of roots or below one (nil roots: all).
func within(p string, roots []string) bool {
	if roots == nil {
		return true
	}
	for _, r := range roots {
		r = path.Clean(strings.Trim(r, "/"))
		if r == "" || r == "." || p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// reverseSteps undoes recs in reverse order: a rename is renamed back and
// an exchange exchanged again, then each pre-image the record saved is
// restored. A rename back whose source the replay has already removed is
// left out, and an exchange missing a side is a rename (undoMove): the
// names' pre-images restore the rest. With roots, only records naming a
// path within them count (pathScope): a rename or exchange restores both
// its names, any other record only its names within scope.
func reverseSteps(recs []Record, roots []string, sim *replaySim) ([]planned, error) {
	var out []planned
	sc := pathScope{roots: roots}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if !isChange(r) {
			continue
		}
		both := r.Op == OpRename || r.Op == OpExchange
		if !sc.counts(r, both) {
			continue
		}
		// A failed change moved nothing and left its names as they were:
		// only its pre-images (that state, and perhaps the interval's
		// only pre-image of a name) are restored.
		vacated := "" // the name a rename back just left absent
		if both && r.Path2 != "" && r.Path2 != r.Path && !r.Failed {
			s, intoAbsent, err := undoMove(r, sim)
			if err != nil {
				return nil, err
			}
			if s != nil {
				out = append(out, planned{Step: *s, rec: i, intoAbsent: intoAbsent})
				if s.Kind == StepRename {
					vacated = s.From
				}
			}
		}
		for k := len(r.Pre) - 1; k >= 0; k-- {
			pre := r.Pre[k]
			if !both && !sc.in(pre.Path) {
				continue
			}
			if pre.Path == vacated && pre.Kind == KindAbsent {
				// The rename back left it absent already: no removal
				// step (a plan of `mv a b` listed "remove b" after
				// "rename b -> a", and counted it removed).
				if err := sim.set(pre); err != nil {
					return nil, err
				}
				continue
			}
			out = append(out, planned{Step: restoreStep(pre), rec: i})
			if err := sim.set(pre); err != nil {
				return nil, err
			}
		}
		if pre, ok := impliedPre(r); ok && !r.Failed && sc.in(pre.Path) {
			out = append(out, planned{Step: restoreStep(pre), rec: i})
			if err := sim.set(pre); err != nil {
				return nil, err
			}
		}
		sc.born(r)
	}
	return out, nil
}

// pathScope is which records a rewind with paths undoes, as the reverse
// replay goes back in time: those naming a path within roots, and the
// records of the other name of a rename or exchange undone (the
// temporary file of a `sed -i` or an editor's save of a file within
// roots), back to that name's creation in the interval. Without the
// other name's records a rewind of one file renamed the file back to the
// temporary name and left it there, with the edited bytes. A rename or
// exchange counts through such a name only when both its names are in
// scope, so the scope never spreads to files outside roots; one that
// moves something into or out of such a name ends its scope. A nil roots
// is every path.
type pathScope struct {
	roots []string
	extra []string // the other names of renames and exchanges undone
}

// in reports whether p is within roots or an extra name.
func (sc *pathScope) in(p string) bool {
	return within(p, sc.roots) || len(sc.extra) > 0 && within(p, sc.extra)
}

// counts reports whether r is undone, and takes in the other name of a
// rename or exchange undone because one of its names is within roots.
func (sc *pathScope) counts(r Record, both bool) bool {
	if sc.roots == nil {
		return true
	}
	if both {
		r1, r2 := r.Path != "" && within(r.Path, sc.roots), r.Path2 != "" && within(r.Path2, sc.roots)
		if (r1 || r2) && !r.Failed {
			for _, p := range []string{r.Path, r.Path2} {
				if p != "" && !sc.in(p) {
					sc.extra = append(sc.extra, p)
				}
			}
			return true
		}
		if r1 || r2 || r.Path != "" && r.Path2 != "" && sc.in(r.Path) && sc.in(r.Path2) {
			return true
		}
		// A move between an extra name (or a path below or above it)
		// and a path out of scope: what the name held before came from
		// outside, or went there.
		sc.drop(func(e string) bool {
			return r.Path != "" && (within(r.Path, []string{e}) || within(e, []string{r.Path})) ||
				r.Path2 != "" && (within(r.Path2, []string{e}) || within(e, []string{r.Path2}))
		})
		return false
	}
	return r.Path != "" && sc.in(r.Path) || r.Path2 != "" && sc.in(r.Path2)
}

// born ends the scope of each extra name that r created, or that is below
// a directory r created: before it the name was absent, and what it held
// then is another story.
func (sc *pathScope) born(r Record) {
	name := r.Path
	switch r.Op {
	case "create", "mkdir", "mknod", "symlink":
	case "link":
		name = r.Path2
	default:
		return
	}
	if name != "" {
		sc.drop(func(e string) bool { return within(e, []string{name}) })
	}
}

// drop ends the scope of each extra name hit reports.
func (sc *pathScope) drop(hit func(e string) bool) {
	kept := sc.extra[:0]
	for _, e := range sc.extra {
		if !hit(e) {
			kept = append(kept, e)
		}
	}
	sc.extra = kept
}

// impliedPre is the state a structural change without a saved pre-image
// (its name was already changed earlier in the interval) implies its name
// had just before it: an rmdir's name was a directory (mode 0755: the
// name's own pre-image, restored later in the replay, decides the final
// mode), a create, mkdir, mknod or symlink's name, or a link's new name,
// was absent. The replay needs these intermediate states so that what
// later steps restore below a name, or rename back from it, has a place.
func impliedPre(r Record) (PreImage, bool) {
	name := r.Path
	if r.Op == "link" {
		name = r.Path2
	}
	for _, p := range r.Pre {
		if p.Path == name {
			return PreImage{}, false
		}
	}
	switch r.Op {
	case "rmdir":
		return PreImage{Path: name, Kind: KindDir, Mode: 0o40755}, true
	case "create", "mkdir", "mknod", "symlink", "link":
		return PreImage{Path: name, Kind: KindAbsent}, name != ""
	}
	return PreImage{}, false
}

// undoMove is the step undoing the rename or exchange r, given which names
// exist at that point of the replay: a rename is renamed back when its
// target still exists; an exchange is exchanged again when both names
// exist, and when only one does it is renamed to the other name (the
// missing side's pre-image is restored after). Nil: nothing to move.
// intoAbsent: the step is a rename whose target does not exist at that
// point of the replay.
func undoMove(r Record, sim *replaySim) (s *Step, intoAbsent bool, err error) {
	a, err := sim.exists(r.Path)
	if err != nil {
		return nil, false, err
	}
	b, err := sim.exists(r.Path2)
	if err != nil {
		return nil, false, err
	}
	switch {
	case r.Op == OpExchange && a && b:
		sim.exchange(r.Path, r.Path2)
		return &Step{Kind: StepExchange, Path: r.Path, From: r.Path2}, false, nil
	case r.Op == OpExchange && a:
		sim.move(r.Path, r.Path2)
		return &Step{Kind: StepRename, Path: r.Path2, From: r.Path}, true, nil
	case b:
		sim.move(r.Path2, r.Path)
		return &Step{Kind: StepRename, Path: r.Path, From: r.Path2}, !a, nil
	}
	return nil, false, nil
}

// planned is a step and the index of the record it undoes: a conflict of
// any name of a record leaves out all of that record's steps, so a rename
// is never half undone.
type planned struct {
	Step
	rec        int
	intoAbsent bool // a rename whose target does not exist before it
}

func restoreStep(pre PreImage) Step {
	if pre.Kind == KindAbsent {
		return Step{Kind: StepRemove, Path: pre.Path, Pre: pre}
	}
	return Step{Kind: StepRestore, Path: pre.Path, Pre: pre}
}

// fuseMoveAway turns a rename of A to an absent B, whose next step naming
// B, an ancestor or a path below it is the removal of B, into the removal
// of A (the rename's record's), and drops that removal of B: what the
// rename took from A is removed either way, and B ends absent as it was
// before. This is the undo of a temporary file renamed over a name (an
// editor's save, `sed -i`): without it every such file planned a rename
// back to the temporary name and its removal before the restore of the
// name, three steps where one (the restore, once dropRepeats drops the
// removal of A) does the same.
func fuseMoveAway(steps []planned) []planned {
	pending := newTreeMap[int]() // B -> index of the rename to B
	drop := make([]bool, len(steps))
	for k := range steps {
		s := &steps[k]
		if i, ok := pending.get(s.Path); ok && s.Kind == StepRemove && s.From == "" {
			r := &steps[i]
			r.Step = restoreStep(PreImage{Path: r.From, Kind: KindAbsent})
			drop[k] = true
			pending.del(s.Path)
			continue
		}
		// A step naming a path: no rename to it, below or above it stays fusable.
		pending.dropRelated(s.Path)
		if s.From != "" {
			pending.dropRelated(s.From)
		}
		if s.Kind == StepRename && s.intoAbsent {
			pending.set(s.Path, k)
		}
	}
	out := steps[:0]
	for k, s := range steps {
		if !drop[k] {
			out = append(out, s)
		}
	}
	return out
}

// dropRepeats drops a restore or remove of a path that a later step
// restores or removes again when no step in between names the path, one of
// its ancestors or descendants (a rename or exchange), or a descendant
// (any step): the later step decides the path's state alone.
func dropRepeats(steps []planned) []planned {
	later := newTreeMap[struct{}]()
	keep := make([]bool, len(steps))
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Kind == StepRename || s.Kind == StepExchange {
			keep[i] = true
			later.dropRelated(s.Path)
			later.dropRelated(s.From)
			continue
		}
		if later.has(s.Path) {
			continue
		}
		keep[i] = true
		later.set(s.Path, struct{}{})
		for a := parentOf(s.Path); a != ""; a = parentOf(a) {
			later.del(a)
		}
	}
	var out []planned
	for i, s := range steps {
		if keep[i] {
			out = append(out, s)
		}
	}
	return out
}

// dropDeadTrees drops the steps of each tree the session made and removed
// again inside the interval: a path R absent now whose removal is the
// plan's last step naming R, a path below it or an ancestor of it, with no
// rename or exchange naming R, a path below it or an ancestor. Every
// step on R and below it then makes or removes things that the last one
// removes again, from a state where R is already absent, so the tree ends
// as it would with them; without this, `git worktree add` then `remove`
// planned about 2,400 steps (each directory restored, each file's removal
// of a name that does not exist, each directory removed) that changed
// nothing. Errors are ins's.
func dropDeadTrees(steps []planned, ins Inspector) ([]planned, error) {
	movedName := map[string]bool{} // the names of renames and exchanges
	movedAnc := map[string]bool{}  // those and their ancestors
	for _, s := range steps {
		if s.Kind == StepRename || s.Kind == StepExchange {
			for _, p := range []string{s.Path, s.From} {
				movedName[p] = true
				for a := p; a != ""; a = parentOf(a) {
					movedAnc[a] = true
				}
			}
		}
	}
	// moved: a rename or exchange names p, a path below it or an ancestor.
	moved := func(p string) bool {
		if movedAnc[p] {
			return true
		}
		for a := parentOf(p); a != ""; a = parentOf(a) {
			if movedName[a] {
				return true
			}
		}
		return false
	}
	laterNamed := map[string]bool{} // paths named by a later step
	laterAnc := map[string]bool{}   // those and their ancestors
	var dead []string
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Kind == StepRemove && !laterAnc[s.Path] && !moved(s.Path) {
			last := true
			for a := parentOf(s.Path); a != ""; a = parentOf(a) {
				if laterNamed[a] {
					last = false
					break
				}
			}
			if last {
				a, err := ins.Lstat(s.Path)
				if err != nil {
					return nil, err
				}
				if a.Kind == KindAbsent {
					dead = append(dead, s.Path)
				}
			}
		}
		for _, p := range []string{s.Path, s.From} {
			if p == "" {
				continue
			}
			laterNamed[p] = true
			for a := p; a != "" && !laterAnc[a]; a = parentOf(a) {
				laterAnc[a] = true
			}
		}
	}
	if len(dead) == 0 {
		return steps, nil
	}
	isDead := map[string]bool{}
	for _, r := range dead {
		isDead[r] = true
	}
	inDead := func(p string) bool {
		for a := p; a != ""; a = parentOf(a) {
			if isDead[a] {
				return true
			}
		}
		return false
	}
	out := steps[:0]
	for _, s := range steps {
		if !inDead(s.Path) {
			out = append(out, s)
		}
	}
	return out, nil
}

func parentOf(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}

// Rewind takes the automatic checkpoint "before rewind to TO" (Result.
// Checkpoint, the undo point), then applies plan's steps in order with a
// (each a journaled change of the session when a journals, as the mount's
// applier and a DirApplier with J set do). A failed step is reported in
// Result.Errors ("KIND PATH: error") and the rest goes on. Restored and
// Removed count distinct paths by the last step applied to each (a
// rename's or exchange's names count as restored); Conflicts and
// Unrecoverable are the plan's. The error is only the
// checkpoint's (then nothing was applied).
func (j *Journal) Rewind(plan Plan, a Applier) (Result, error) {
	cp, err := j.Checkpoint(plan.Session, "before rewind to "+plan.To)
	if err != nil {
		return Result{}, err
	}
	res := Result{Checkpoint: cp.ID, Conflicts: len(plan.Conflicts), Unrecoverable: len(plan.Unrecoverable)}
	var t Tally
	for _, s := range plan.Steps {
		var err error
		switch s.Kind {
		case StepRename:
			err = a.Rename(s.From, s.Path)
		case StepExchange:
			err = a.Exchange(s.Path, s.From)
		default:
			err = a.Restore(s.Path, s.Pre, j.blobs)
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s %s: %v", s.Kind, s.Path, err))
			continue
		}
		t.Add(s)
	}
	res.Restored, res.Removed = t.Counts()
	return res, nil
}

// Tally counts the paths a sequence of rewind steps leaves restored or
// removed, each path once, by the last step that names it: a remove
// counts it removed; a restore, the target of a rename, and both names
// of an exchange count it restored (a rename's source, left absent, is
// not counted). An applied rewind counts the steps that succeeded
// (Result.Restored, Result.Removed), a dry run the steps it would apply,
// so the two agree. The zero value is ready to use; not safe for
// concurrent use.
type Tally struct {
	final map[string]bool // path -> removed (false: restored)
}

// Add counts step s, after every step added before it.
func (t *Tally) Add(s Step) {
	if t.final == nil {
		t.final = map[string]bool{}
	}
	t.final[s.Path] = s.Kind == StepRemove
	if s.Kind == StepExchange {
		t.final[s.From] = false
	}
}

// Counts returns how many distinct paths end restored and removed.
func (t *Tally) Counts() (restored, removed int) {
	for _, rm := range t.final {
		if rm {
			removed++
		} else {
			restored++
		}
	}
	return restored, removed
}
