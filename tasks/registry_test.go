package tasks

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeWorker records what the registry asked of a task's worker.
type fakeWorker struct {
	mu             sync.Mutex
	cancels, kills int
}

func (w *fakeWorker) Cancel() { w.mu.Lock(); w.cancels++; w.mu.Unlock() }
func (w *fakeWorker) Kill()   { w.mu.Lock(); w.kills++; w.mu.Unlock() }
func (w *fakeWorker) counts() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancels, w.kills
}

func mustReserve(t *testing.T, r *Registry, owner, session string) Task {
	t.Helper()
	tk, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "true", OwnerTask: owner, OwnerSession: session})
	if err != nil {
		t.Fatalf("reserve under %q/%q: %v", owner, session, err)
	}
	return tk
}

func refusal(t *testing.T, err error) string {
	t.Helper()
	var ce *CapError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *CapError, got %v", err)
	}
	return ce.Reason
}

func TestReserveDepthCapRecomputedFromOwner(t *testing.T) {
	r := NewRegistry(Caps{})
	if c := r.Caps(); c != DefaultCaps() || c.MaxDepth != 2 || c.MaxChildrenPerNode != 3 || c.MaxConcurrentTotal != 8 {
		t.Fatalf("default caps: %+v", c)
	}
	top := mustReserve(t, r, "", "default")
	if top.Depth != 0 || top.OwnerSession != "default" || top.Status != StatusRunning {
		t.Fatalf("top: %+v", top)
	}
	// A lying hint is ignored for an owned child.
	kid, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerTask: top.ID, OwnerSession: "default", Depth: -7})
	if err != nil || kid.Depth != 1 || kid.OwnerSession != "task-"+top.ID || kid.OwnerTask != top.ID {
		t.Fatalf("kid: %+v %v", kid, err)
	}
	_, err = r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerTask: kid.ID, Depth: 0})
	if refusal(t, err) != RefusedDepth || r.LastRefusalReason() != RefusedDepth {
		t.Fatalf("grandchild: %v, last %q", err, r.LastRefusalReason())
	}
	if !strings.HasPrefix(err.Error(), "depth: ") {
		t.Errorf("message does not start with the reason: %v", err)
	}
	// A top-level hint past the cap is refused too.
	if _, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerSession: "default", Depth: 2}); refusal(t, err) != RefusedDepth {
		t.Fatalf("deep hint: %v", err)
	}
	mustReserve(t, r, "", "default")
	if r.LastRefusalReason() != "" {
		t.Errorf("a successful reserve keeps the refusal %q", r.LastRefusalReason())
	}
	// Configurable: depth 3 lets the grandchild in.
	r3 := NewRegistry(Caps{MaxDepth: 3})
	a := mustReserve(t, r3, "", "default")
	b := mustReserve(t, r3, a.ID, "x")
	if c := mustReserve(t, r3, b.ID, "x"); c.Depth != 2 {
		t.Fatalf("grandchild depth %d", c.Depth)
	}
}

func TestReservePerOwnerAndGlobalCaps(t *testing.T) {
	r := NewRegistry(Caps{MaxDepth: 3, MaxChildrenPerNode: 3, MaxConcurrentTotal: 8})
	p := mustReserve(t, r, "", "human")
	var kids []Task
	for i := 0; i < 3; i++ {
		kids = append(kids, mustReserve(t, r, p.ID, ""))
	}
	if _, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerTask: p.ID}); refusal(t, err) != RefusedPerOwner {
		t.Fatalf("4th child: %v", err)
	}
	// A finished child frees its slot.
	r.Complete(kids[0].ID, StatusDone, "", "")
	mustReserve(t, r, p.ID, "")
	// Top-level tasks count per session.
	mustReserve(t, r, "", "human")
	mustReserve(t, r, "", "human")
	if _, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerSession: "human"}); refusal(t, err) != RefusedPerOwner {
		t.Fatalf("human's 4th: %v", err)
	}
	// 7 live now; the 8th fits, the 9th is global.
	mustReserve(t, r, "", "other")
	mustReserve(t, r, "", "other")
	if n := len(r.Running()); n != 8 {
		t.Fatalf("live %d, want 8", n)
	}
	if _, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerSession: "third"}); refusal(t, err) != RefusedGlobal {
		t.Fatalf("9th: %v", err)
	}
	if r.LastRefusalReason() != RefusedGlobal {
		t.Fatalf("last refusal %q", r.LastRefusalReason())
	}
	// An owner that is not live cannot spawn.
	r.Complete(p.ID, StatusDone, "", "")
	if _, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerTask: p.ID}); !errors.Is(err, ErrOwnerNotLive) {
		t.Fatalf("spawn under a done owner: %v", err)
	}
	if _, err := r.Reserve(ReserveRequest{Subagent: "sh", Prompt: "x", OwnerTask: "999"}); !errors.Is(err, ErrOwnerNotLive) {
		t.Fatalf("spawn under an unknown owner: %v", err)
	}
}

func TestStatusesAndStopMapping(t *testing.T) {
	r := NewRegistry(Caps{})
	a := mustReserve(t, r, "", "s")
	if !r.RequestStop(a.ID) {
		t.Fatal("request stop on a live task")
	}
	if tk, _ := r.Find(a.ID); tk.Status != StatusStopping || !tk.Status.Live() {
		t.Fatalf("status %s", tk.Status)
	}
	r.Complete(a.ID, StatusFailed, "", "signal: terminated")
	tk, _ := r.Find(a.ID)
	if tk.Status != StatusStopped || tk.Error != "signal: terminated" || tk.Finished.IsZero() {
		t.Fatalf("a failure while stopping: %+v", tk)
	}
	if r.RequestStop(a.ID) {
		t.Fatal("request stop on a terminal task flipped it")
	}
	if r.Complete(a.ID, StatusDone, "late", "") != nil {
		t.Fatal("a second complete returned notes")
	}
	if tk, _ := r.Find(a.ID); tk.Status != StatusStopped || tk.Result != "" {
		t.Fatalf("a second complete changed the entry: %+v", tk)
	}
	// A stopping task that still exits 0 is done.
	b := mustReserve(t, r, "", "s")
	r.RequestStop(b.ID)
	r.Complete(b.ID, StatusDone, "ok", "")
	if tk, _ := r.Find(b.ID); tk.Status != StatusDone || tk.Result != "ok" {
		t.Fatalf("%+v", tk)
	}
	c := mustReserve(t, r, "", "s")
	r.Complete(c.ID, StatusFailed, "", "exit status 1")
	if tk, _ := r.Find(c.ID); tk.Status != StatusFailed {
		t.Fatalf("%+v", tk)
	}
	d := mustReserve(t, r, "", "s")
	r.Complete(d.ID, StatusRunning, "", "bogus")
	if tk, _ := r.Find(d.ID); tk.Status != StatusFailed {
		t.Fatalf("a non-terminal completion status: %+v", tk)
	}
	select {
	case <-r.Done(d.ID):
	default:
		t.Fatal("Done not closed after Complete")
	}
	for _, s := range []Status{StatusRunning, StatusNeedsApproval, StatusBlockedOnHuman, StatusBlockedOnParent, StatusStopping} {
		if !s.Live() || s.Terminal() {
			t.Errorf("%s should be live", s)
		}
	}
	for _, s := range []Status{StatusStopped, StatusDone, StatusFailed} {
		if s.Live() || !s.Terminal() {
			t.Errorf("%s should be terminal", s)
		}
	}
}

// TestStopCascadeThreeLevels stops the top of a three-level tree: every
// descendant's ask gate is cancelled, every level is stopping, and every
// worker is cancelled once.
func TestStopCascadeThreeLevels(t *testing.T) {
	r := NewRegistry(Caps{MaxDepth: 3})
	a := mustReserve(t, r, "", "human")
	b := mustReserve(t, r, a.ID, "")
	c := mustReserve(t, r, b.ID, "")
	other := mustReserve(t, r, "", "human")
	workers := map[string]*fakeWorker{}
	for _, id := range []string{a.ID, b.ID, c.ID, other.ID} {
		workers[id] = &fakeWorker{}
		r.Attach(id, workers[id], 0)
	}
	ga, gb, gc, gother := NewGate(), NewGate(), NewGate(), NewGate()
	r.BeginApproval(a.ID, ga, 1, "ok?", "deploy")
	r.BeginAsk(b.ID, gb, 2, "b?", true)
	r.BeginAsk(c.ID, gc, 3, "c?", true)
	r.BeginAsk(other.ID, gother, 4, "other?", true)
	woken := make(chan error, 2)
	for _, g := range []*Gate{gb, gc} {
		go func(g *Gate) { _, err := g.Await(context.Background(), time.Hour); woken <- err }(g)
	}
	r.StopEntry(a.ID)
	for i := 0; i < 2; i++ {
		if err := <-woken; !errors.Is(err, ErrCancelled) {
			t.Fatalf("a parked descendant woke with %v", err)
		}
	}
	if st, _ := ga.Outcome(); st != GateCancelled {
		t.Fatalf("own approval gate: %v", st)
	}
	for _, id := range []string{a.ID, b.ID, c.ID} {
		tk, _ := r.Find(id)
		if tk.Status != StatusStopping || tk.Asking || tk.Approving {
			t.Errorf("task %s after the cascade: %+v", id, tk)
		}
		if cs, _ := workers[id].counts(); cs != 1 {
			t.Errorf("task %s cancelled %d times", id, cs)
		}
	}
	if st, _ := gother.Outcome(); st != GatePending {
		t.Fatal("the cascade reached an unrelated task")
	}
	if cs, _ := workers[other.ID].counts(); cs != 0 {
		t.Fatal("an unrelated worker was cancelled")
	}
	// The stops unwind as failures and record as stopped.
	for _, id := range []string{c.ID, b.ID, a.ID} {
		r.Complete(id, StatusFailed, "", "signal: terminated")
		if tk, _ := r.Find(id); tk.Status != StatusStopped {
			t.Errorf("task %s: %s", id, tk.Status)
		}
	}
	// Idempotent on a stopped tree; CancelDescendantAskGates alone.
	r.StopEntry(a.ID)
	r.StopEntry("404")
	g := NewGate()
	d := mustReserve(t, r, other.ID, "")
	r.BeginAsk(d.ID, g, 5, "d?", true)
	r.CancelDescendantAskGates(other.ID)
	if st, _ := g.Outcome(); st != GateCancelled {
		t.Fatal("CancelDescendantAskGates")
	}
	if tk, _ := r.Find(other.ID); tk.Status != StatusBlockedOnHuman {
		t.Fatalf("CancelDescendantAskGates touched the node itself: %s", tk.Status)
	}
}

func TestCancelAllStopsAndKillsLiveWorkers(t *testing.T) {
	r := NewRegistry(Caps{})
	a, b, c := mustReserve(t, r, "", "s"), mustReserve(t, r, "", "s"), mustReserve(t, r, "", "s")
	wa, wb, wc := &fakeWorker{}, &fakeWorker{}, &fakeWorker{}
	r.Attach(a.ID, wa, 0)
	r.Attach(b.ID, wb, 0)
	r.Attach(c.ID, wc, 0)
	r.Complete(c.ID, StatusDone, "", "")
	g := NewGate()
	r.BeginAsk(a.ID, g, 1, "q", true)
	r.CancelAll()
	for name, w := range map[string]*fakeWorker{"a": wa, "b": wb} {
		if cs, ks := w.counts(); cs != 1 || ks != 1 {
			t.Errorf("%s: cancel %d kill %d", name, cs, ks)
		}
	}
	if cs, ks := wc.counts(); cs+ks != 0 {
		t.Error("a finished worker was signalled")
	}
	if st, _ := g.Outcome(); st != GateCancelled {
		t.Error("CancelAll left a gate parked")
	}
	r.CancelAll() // safe again: workers' Cancel and Kill are idempotent
	if tk, _ := r.Find(a.ID); tk.Status != StatusStopping {
		t.Errorf("after a second CancelAll: %s", tk.Status)
	}
}

func TestChangedWakesWatchers(t *testing.T) {
	r := NewRegistry(Caps{})
	ch := r.Changed()
	tk := mustReserve(t, r, "", "s")
	select {
	case <-ch:
	default:
		t.Fatal("Reserve did not signal a change")
	}
	ch = r.Changed()
	r.Steer(tk.ID, "n")
	<-ch
}
