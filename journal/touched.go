package journal

// The interval's captured set: the path ids with a pre-image since the
// last checkpoint, indexed by their ancestors so that a rename forgets
// the names below it at the cost of those names, never of the whole set
// (docs/DESIGN.md#journal-interval-cost).

// touchedSet is the set of path ids (of one log's pathTable) that have a
// pre-image in the current checkpoint interval. Besides membership it
// keeps, for every id on the path from a member up to the root, how many
// members lie strictly below it and which of its children lead to one,
// so that forgetBelow(a) visits only the members below a. Adding or
// removing a member costs its depth; membership costs one map lookup.
// Not safe for concurrent use: the session mutex guards it.
type touchedSet struct {
	tab   *pathTable
	in    map[uint64]struct{}
	below map[uint64]int32               // members strictly below an id
	kids  map[uint64]map[uint64]struct{} // children that are members or have members below
	// steps counts ids visited (the work done), for the test that a
	// change's cost does not grow with the log.
	steps int
}

func newTouchedSet(tab *pathTable) *touchedSet {
	return &touchedSet{tab: tab, in: map[uint64]struct{}{},
		below: map[uint64]int32{}, kids: map[uint64]map[uint64]struct{}{}}
}

// has reports whether id has a pre-image in the interval.
func (s *touchedSet) has(id uint64) bool {
	_, ok := s.in[id]
	return ok
}

// len is the number of members.
func (s *touchedSet) len() int { return len(s.in) }

// add makes id a member.
func (s *touchedSet) add(id uint64) {
	if id == 0 || s.has(id) {
		return
	}
	s.in[id] = struct{}{}
	for c := id; c != 0; {
		s.steps++
		n := s.tab.node(c)
		if n == nil {
			return
		}
		p := n.dir
		s.below[p]++
		k := s.kids[p]
		if k == nil {
			k = map[uint64]struct{}{}
			s.kids[p] = k
		}
		k[c] = struct{}{}
		c = p
	}
}

// remove drops member id, pruning the ancestor index.
func (s *touchedSet) remove(id uint64) {
	if !s.has(id) {
		return
	}
	delete(s.in, id)
	for c := id; c != 0; {
		s.steps++
		n := s.tab.node(c)
		if n == nil {
			return
		}
		p := n.dir
		if s.below[p]--; s.below[p] <= 0 {
			delete(s.below, p)
		}
		if !s.has(c) && s.below[c] == 0 {
			if k := s.kids[p]; k != nil {
				delete(k, c)
				if len(k) == 0 {
					delete(s.kids, p)
				}
			}
		}
		c = p
	}
}

// forgetBelow drops every member strictly below anc.
func (s *touchedSet) forgetBelow(anc uint64) {
	if s.below[anc] == 0 {
		return
	}
	var members []uint64
	stack := []uint64{anc}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := range s.kids[d] {
			s.steps++
			if s.has(c) {
				members = append(members, c)
			}
			if s.below[c] > 0 {
				stack = append(stack, c)
			}
		}
	}
	for _, m := range members {
		s.remove(m)
	}
}
