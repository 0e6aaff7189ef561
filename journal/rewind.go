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
	rev, err := reverseSteps(recs[start+1:], opt.Paths, &replaySim{ins: ins, sim: map[string]simState{}})
	if err != nil {
		return Plan{}, err
	}
	steps, err := dropDeadTrees(dropRepeats(rev), ins)
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
// names' pre-images restore the rest. With roots, only records naming a path within them count; a
// rename or exchange restores both its names, any other record only its
// names within roots.
func reverseSteps(recs []Record, roots []string, sim *replaySim) ([]planned, error) {
	var out []planned
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if !isChange(r) {
			continue
		}
		in1, in2 := r.Path != "" && within(r.Path, roots), r.Path2 != "" && within(r.Path2, roots)
		if !in1 && !in2 {
			continue
		}
		both := r.Op == OpRename || r.Op == OpExchange
		// A failed change moved nothing and left its names as they were:
		// only its pre-images (that state, and perhaps the interval's
		// only pre-image of a name) are restored.
		if both && r.Path2 != "" && r.Path2 != r.Path && !r.Failed {
			s, err := undoMove(r, sim)
			if err != nil {
				return nil, err
			}
			if s != nil {
				out = append(out, planned{*s, i})
			}
		}
		for k := len(r.Pre) - 1; k >= 0; k-- {
			pre := r.Pre[k]
			if !both && !within(pre.Path, roots) {
				continue
			}
			out = append(out, planned{restoreStep(pre), i})
			if err := sim.set(pre); err != nil {
				return nil, err
			}
		}
		if pre, ok := impliedPre(r); ok && !r.Failed && within(pre.Path, roots) {
			out = append(out, planned{restoreStep(pre), i})
			if err := sim.set(pre); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
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
func undoMove(r Record, sim *replaySim) (*Step, error) {
	a, err := sim.exists(r.Path)
	if err != nil {
		return nil, err
	}
	b, err := sim.exists(r.Path2)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Op == OpExchange && a && b:
		sim.exchange(r.Path, r.Path2)
		return &Step{Kind: StepExchange, Path: r.Path, From: r.Path2}, nil
	case r.Op == OpExchange && a:
		sim.move(r.Path, r.Path2)
		return &Step{Kind: StepRename, Path: r.Path2, From: r.Path}, nil
	case b:
		sim.move(r.Path2, r.Path)
		return &Step{Kind: StepRename, Path: r.Path, From: r.Path2}, nil
	}
	return nil, nil
}

// replaySim tracks which names exist as the planned steps are applied in
// order: sim holds the names the steps set, moves the renames made (what
// is now at to came from from), and anything else is read from the
// current tree through ins, mapped back through the moves.
type replaySim struct {
	ins   Inspector
	sim   map[string]simState
	moves [][2]string // {to, from}
}

// simState is a name's state in the simulation: absent, present, or a
// directory the replay created (nothing below it but what it sets).
type simState int8

const (
	simAbsent simState = iota
	simPresent
	simFreshDir
)

func (r *replaySim) exists(p string) (bool, error) {
	if v, ok := r.sim[p]; ok {
		return v != simAbsent, nil
	}
	for a := parentOf(p); a != ""; a = parentOf(a) {
		if v, ok := r.sim[a]; ok && v != simPresent {
			return false, nil
		}
	}
	real := p
	for i := len(r.moves) - 1; i >= 0; i-- {
		to, from := r.moves[i][0], r.moves[i][1]
		if real == to || strings.HasPrefix(real, to+"/") {
			real = from + real[len(to):]
		}
	}
	a, err := r.ins.Lstat(real)
	if err != nil {
		return false, err
	}
	return a.Kind != KindAbsent, nil
}

// set records that a restore made pre.Path what pre says (a directory
// that did not exist is fresh: empty) or removed it and what was below.
func (r *replaySim) set(pre PreImage) error {
	st := simPresent
	switch pre.Kind {
	case KindAbsent:
		r.dropBelow(pre.Path)
		st = simAbsent
	case KindDir:
		had, err := r.exists(pre.Path)
		if err != nil {
			return err
		}
		if !had {
			st = simFreshDir
		}
	}
	r.sim[pre.Path] = st
	return nil
}

func (r *replaySim) dropBelow(p string) {
	for k := range r.sim {
		if strings.HasPrefix(k, p+"/") {
			delete(r.sim, k)
		}
	}
}

// move renames from to to in the simulation (to and below replaced).
func (r *replaySim) move(from, to string) {
	root, known := r.sim[from]
	if !known {
		root = simPresent
	}
	moved := map[string]simState{}
	for k, v := range r.sim {
		if strings.HasPrefix(k, from+"/") {
			moved[to+k[len(from):]] = v
			delete(r.sim, k)
		}
	}
	r.dropBelow(to)
	for k, v := range moved {
		r.sim[k] = v
	}
	r.moves = append(r.moves, [2]string{to, from})
	r.sim[to] = root
	r.sim[from] = simAbsent
}

// exchange swaps a and b in the simulation.
func (r *replaySim) exchange(a, b string) {
	tmp := "\x00exchange"
	r.move(a, tmp)
	r.move(b, a)
	r.move(tmp, b)
}

// planned is a step and the index of the record it undoes: a conflict of
// any name of a record leaves out all of that record's steps, so a rename
// is never half undone.
type planned struct {
	Step
	rec int
}

func restoreStep(pre PreImage) Step {
	if pre.Kind == KindAbsent {
		return Step{Kind: StepRemove, Path: pre.Path, Pre: pre}
	}
	return Step{Kind: StepRestore, Path: pre.Path, Pre: pre}
}

// dropRepeats drops a restore or remove of a path that a later step
// restores or removes again when no step in between names the path, one of
// its ancestors or descendants (a rename or exchange), or a descendant
// (any step): the later step decides the path's state alone.
func dropRepeats(steps []planned) []planned {
	later := map[string]bool{}
	keep := make([]bool, len(steps))
	forget := func(p string) {
		for k := range later {
			if k == p || strings.HasPrefix(k, p+"/") || strings.HasPrefix(p, k+"/") {
				delete(later, k)
			}
		}
	}
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Kind == StepRename || s.Kind == StepExchange {
			keep[i] = true
			forget(s.Path)
			forget(s.From)
			continue
		}
		if later[s.Path] {
			continue
		}
		keep[i] = true
		later[s.Path] = true
		for a := parentOf(s.Path); a != ""; a = parentOf(a) {
			delete(later, a)
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
