package tasks

// ChildrenOf returns the direct children of id, in spawn order; "" gives
// the top-level tasks (spawned by non-task callers).
func (r *Registry) ChildrenOf(id string) []Task {
	return r.filter(func(e *entry) bool { return e.OwnerTask == id })
}

// DescendantsOf returns every transitive descendant of id in breadth
// order (BFS over owners). Cycle-safe: each id is visited once.
func (r *Registry) DescendantsOf(id string) []Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Task
	for _, e := range r.descendantsLocked(id) {
		out = append(out, e.snapshot())
	}
	return out
}

// descendantsLocked is DescendantsOf with r.mu held, on the entries.
func (r *Registry) descendantsLocked(id string) []*entry {
	if id == "" {
		return nil
	}
	kids := map[string][]*entry{}
	for _, e := range r.sortedLocked() {
		if e.OwnerTask != "" {
			kids[e.OwnerTask] = append(kids[e.OwnerTask], e)
		}
	}
	var out []*entry
	seen := map[string]bool{id: true}
	frontier := kids[id]
	for len(frontier) > 0 {
		var next []*entry
		for _, e := range frontier {
			if seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			out = append(out, e)
			next = append(next, kids[e.ID]...)
		}
		frontier = next
	}
	return out
}

// IsDescendant reports whether desc is a transitive descendant of anc.
func (r *Registry) IsDescendant(anc, desc string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{desc: true}
	cur := r.entries[desc]
	for cur != nil && cur.OwnerTask != "" {
		if cur.OwnerTask == anc {
			return true
		}
		if seen[cur.OwnerTask] {
			return false
		}
		seen[cur.OwnerTask] = true
		cur = r.entries[cur.OwnerTask]
	}
	return false
}

// AncestorsOf returns the chain of ancestors of id, nearest owner first, up
// to the top-level task. Cycle-safe.
func (r *Registry) AncestorsOf(id string) []Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Task
	seen := map[string]bool{id: true}
	e := r.entries[id]
	for e != nil && e.OwnerTask != "" && !seen[e.OwnerTask] {
		seen[e.OwnerTask] = true
		e = r.entries[e.OwnerTask]
		if e != nil {
			out = append(out, e.snapshot())
		}
	}
	return out
}

// OwnedBy reports whether child's direct owner is the task parent.
func (r *Registry) OwnedBy(parent, child string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[child]
	return e != nil && parent != "" && e.OwnerTask == parent
}
