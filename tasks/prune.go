package tasks

import (
	"sort"
)

// Prune bounds the finished tasks (docs/DESIGN.md#task-pruning): it keeps
// the keep terminal entries that finished last (ties: the later
// reservation) and removes every older terminal entry except the ones it
// must keep, and returns the removed entries' last snapshots, oldest first
// (the caller releases what they hold outside the registry, such as log
// files: Runner.prune). keep < 1 counts as 1, so the task that finished
// last is always kept.
//
// Never removed besides: a live task (every non-terminal status: running,
// needs_approval, blocked_*, stopping), and a terminal task with a live
// descendant, so the owner chain of every live task stays complete
// (agents/tree, IsDescendant's authorisation). The terminal entries are
// thus at most keep plus the ancestors of live tasks (at most the live
// tasks times MaxDepth-1); a kept ancestor goes at a later Prune once its
// descendants have finished.
//
// A removed task is gone at once for every lookup (Find, Done, the control
// files: ENOENT); a reader already parked in Await still gets its final
// snapshot. Removal drops the registry's only reference to the entry, so
// its output tail, activity ring, notes and gate records are freed once no
// parked reader holds them. Runs in one critical section (O(n log n) in the
// entries) and does no I/O; safe for concurrent use.
func (r *Registry) Prune(keep int) []Task {
	keep = max(keep, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	var fin []*entry
	for _, e := range r.entries {
		if e.Status.Terminal() {
			fin = append(fin, e)
		}
	}
	if len(fin) <= keep {
		return nil
	}
	// The lineage of every live task: walk owners up, cycle-safe.
	needed := map[string]bool{}
	for _, e := range r.entries {
		if !e.Status.Live() {
			continue
		}
		for o := e.OwnerTask; o != "" && !needed[o]; {
			needed[o] = true
			oe := r.entries[o]
			if oe == nil {
				break
			}
			o = oe.OwnerTask
		}
	}
	sort.Slice(fin, func(i, j int) bool { // oldest finish first
		if !fin[i].Finished.Equal(fin[j].Finished) {
			return fin[i].Finished.Before(fin[j].Finished)
		}
		return fin[i].seq < fin[j].seq
	})
	var out []Task
	for _, e := range fin[:len(fin)-keep] {
		if needed[e.ID] {
			continue
		}
		out = append(out, e.snapshot())
		delete(r.entries, e.ID)
		e.canceler = nil // the worker was reaped; drop the process record
	}
	if len(out) > 0 {
		r.bumpLocked()
	}
	return out
}
