package tasks

import (
	"slices"
	"testing"
	"time"
)

func TestTreeQueries(t *testing.T) {
	r := NewRegistry(Caps{MaxDepth: 4, MaxChildrenPerNode: 5, MaxConcurrentTotal: 20})
	var now time.Time
	r.now = func() time.Time { now = now.Add(time.Second); return now }
	a := mustReserve(t, r, "", "h")
	b1 := mustReserve(t, r, a.ID, "")
	b2 := mustReserve(t, r, a.ID, "")
	c1 := mustReserve(t, r, b1.ID, "")
	d1 := mustReserve(t, r, c1.ID, "")
	x := mustReserve(t, r, "", "h")
	ids := func(ts []Task) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	if got := ids(r.List()); !slices.Equal(got, []string{x.ID, d1.ID, c1.ID, b2.ID, b1.ID, a.ID}) {
		t.Fatalf("list %v", got)
	}
	if got := ids(r.ChildrenOf(a.ID)); !slices.Equal(got, []string{b1.ID, b2.ID}) {
		t.Fatalf("children %v", got)
	}
	if got := ids(r.ChildrenOf("")); !slices.Equal(got, []string{a.ID, x.ID}) {
		t.Fatalf("top level %v", got)
	}
	if got := ids(r.DescendantsOf(a.ID)); !slices.Equal(got, []string{b1.ID, b2.ID, c1.ID, d1.ID}) {
		t.Fatalf("descendants (BFS) %v", got)
	}
	if got := ids(r.AncestorsOf(d1.ID)); !slices.Equal(got, []string{c1.ID, b1.ID, a.ID}) {
		t.Fatalf("ancestors %v", got)
	}
	if !r.OwnedBy(a.ID, b1.ID) || r.OwnedBy(a.ID, c1.ID) || r.OwnedBy("", a.ID) {
		t.Fatal("OwnedBy")
	}
	if !r.IsDescendant(a.ID, d1.ID) || r.IsDescendant(b2.ID, d1.ID) || r.IsDescendant(a.ID, a.ID) || r.IsDescendant(a.ID, x.ID) {
		t.Fatal("IsDescendant")
	}
	// Cycles (impossible through Reserve) do not hang the walks.
	r.mu.Lock()
	r.entries[a.ID].OwnerTask = d1.ID
	r.mu.Unlock()
	if got := r.DescendantsOf(a.ID); len(got) != 4 {
		t.Fatalf("descendants over a cycle: %v", ids(got))
	}
	if got := r.AncestorsOf(a.ID); !slices.Equal(ids(got), []string{d1.ID, c1.ID, b1.ID}) {
		t.Fatalf("ancestors over a cycle: %v", ids(got))
	}
	if r.IsDescendant(x.ID, a.ID) {
		t.Fatal("IsDescendant over a cycle")
	}
	if tk, ok := r.Remove(x.ID); !ok || tk.ID != x.ID {
		t.Fatal("remove")
	}
	if _, ok := r.Find(x.ID); ok {
		t.Fatal("found after remove")
	}
	r.RecordToolOutput(x.ID, "late") // no-ops on a removed id
	r.RecordToolStarted(x.ID, "late")
	if r.Steer(x.ID, "late") || r.Complete(x.ID, StatusDone, "", "") != nil {
		t.Fatal("a removed entry accepted events")
	}
}
