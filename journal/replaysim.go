package journal

// The reverse replay's simulation of which names exist as a rewind's
// planned steps are applied (docs/DESIGN.md#journal-rewind).

import "sort"

// replaySim tracks which names exist as the planned steps are applied in
// order: sim holds the names the steps set, moves the renames made (what
// is now at to came from from), and anything else is read from the
// current tree through ins, mapped back through the moves. Each
// operation costs the depth of its path and the size of the subtree it
// moves or drops, not the number of names the replay knows.
type replaySim struct {
	ins   Inspector
	sim   *treeMap[simState]
	moves []simMove
	byTo  map[string][]int // indices into moves, ascending, by target
}

// simMove is one rename the replay made: what is now at to came from from.
type simMove struct{ to, from string }

// simState is a name's state in the simulation: absent, present, or a
// directory the replay created (nothing below it but what it sets).
type simState int8

const (
	simAbsent simState = iota
	simPresent
	simFreshDir
)

func newReplaySim(ins Inspector) *replaySim {
	return &replaySim{ins: ins, sim: newTreeMap[simState](), byTo: map[string][]int{}}
}

func (r *replaySim) exists(p string) (bool, error) {
	if v, ok := r.sim.get(p); ok {
		return v != simAbsent, nil
	}
	for a := parentOf(p); a != ""; a = parentOf(a) {
		if v, ok := r.sim.get(a); ok && v != simPresent {
			return false, nil
		}
	}
	a, err := r.ins.Lstat(r.origin(p))
	if err != nil {
		return false, err
	}
	return a.Kind != KindAbsent, nil
}

// origin is the current tree's name of what the replay has at p: p
// mapped back through the moves, newest first. Each step back is the
// newest move older than the last one taken whose target is p (as
// mapped so far) or one of its ancestors.
func (r *replaySim) origin(p string) string {
	pos := len(r.moves)
	for {
		best := -1
		for a := p; a != ""; a = parentOf(a) {
			idx := r.byTo[a]
			if k := sort.SearchInts(idx, pos); k > 0 && idx[k-1] > best {
				best = idx[k-1]
			}
		}
		if best < 0 {
			return p
		}
		m := r.moves[best]
		p, pos = m.from+p[len(m.to):], best
	}
}

// set records that a restore made pre.Path what pre says (a directory
// that did not exist is fresh: empty) or removed it and what was below.
func (r *replaySim) set(pre PreImage) error {
	st := simPresent
	switch pre.Kind {
	case KindAbsent:
		r.sim.dropBelow(pre.Path)
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
	r.sim.set(pre.Path, st)
	return nil
}

// move renames from to to in the simulation (to and below replaced).
func (r *replaySim) move(from, to string) {
	root, known := r.sim.get(from)
	if !known {
		root = simPresent
	}
	r.sim.moveBelow(from, to)
	r.moves = append(r.moves, simMove{to: to, from: from})
	r.byTo[to] = append(r.byTo[to], len(r.moves)-1)
	r.sim.set(to, root)
	r.sim.set(from, simAbsent)
}

// exchange swaps a and b in the simulation.
func (r *replaySim) exchange(a, b string) {
	tmp := "\x00exchange"
	r.move(a, tmp)
	r.move(b, a)
	r.move(tmp, b)
}
