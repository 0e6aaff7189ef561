package tasks

import (
	"sort"
)

// Running returns the live entries (every non-terminal status, including
// needs_approval and stopping), oldest first.
func (r *Registry) Running() []Task {
	return r.filter(func(e *entry) bool { return e.Status.Live() })
}

// List returns every entry, newest first.
func (r *Registry) List() []Task {
	out := r.filter(func(*entry) bool { return true })
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// AwaitingHuman returns the entries parked on a question THE HUMAN answers
// (blocked_on_human only: a blocked_on_parent task is its owner's job).
func (r *Registry) AwaitingHuman() []Task {
	return r.filter(func(e *entry) bool { return e.Status == StatusBlockedOnHuman })
}

// AwaitingApproval returns the entries parked on a human approval.
func (r *Registry) AwaitingApproval() []Task {
	return r.filter(func(e *entry) bool { return e.Status == StatusNeedsApproval })
}

// filter returns snapshots of matching entries in reservation order.
func (r *Registry) filter(keep func(*entry) bool) []Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Task
	for _, e := range r.sortedLocked() {
		if keep(e) {
			out = append(out, e.snapshot())
		}
	}
	return out
}

func (r *Registry) sortedLocked() []*entry {
	es := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].seq < es[j].seq })
	return es
}

// Find returns a snapshot of one entry.
func (r *Registry) Find(id string) (Task, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return Task{}, false
	}
	return e.snapshot(), true
}

// Remove drops an entry (whatever its status) and returns its last
// snapshot. Late events for it (output, Complete) become no-ops.
func (r *Registry) Remove(id string) (Task, bool) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return Task{}, false
	}
	delete(r.entries, id)
	return e.snapshot(), true
}
