package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// TestSteerVersusCompleteRace is the steer/complete race
// (docs/DESIGN.md#task-steering): notes steered concurrently with Complete
// are either returned by Complete (undelivered), drained by the task
// before, or refused: never accepted and lost.
func TestSteerVersusCompleteRace(t *testing.T) {
	for round := 0; round < 200; round++ {
		r := NewRegistry(Caps{})
		tk := mustReserve(t, r, "", "s")
		const steerers, notes = 4, 25
		var accepted sync.Map
		var delivered []string
		var dmu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < steerers; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				<-start
				for i := 0; i < notes; i++ {
					n := fmt.Sprintf("n%d-%d", g, i)
					if r.Steer(tk.ID, n) {
						accepted.Store(n, true)
					}
				}
			}(g)
		}
		wg.Add(1)
		go func() { // the task folding in notes at its turns
			defer wg.Done()
			<-start
			for i := 0; i < 5; i++ {
				got := r.DrainSteer(tk.ID)
				dmu.Lock()
				delivered = append(delivered, got...)
				dmu.Unlock()
			}
		}()
		var undelivered []string
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			undelivered = r.Complete(tk.ID, StatusDone, "", "")
		}()
		close(start)
		wg.Wait()
		if r.Steer(tk.ID, "after") {
			t.Fatal("steer accepted after complete")
		}
		seen := map[string]int{}
		for _, n := range append(delivered, undelivered...) {
			seen[n]++
		}
		accepted.Range(func(k, _ any) bool {
			if seen[k.(string)] != 1 {
				t.Fatalf("round %d: accepted note %s seen %d times (delivered %d, undelivered %d)", round, k, seen[k.(string)], len(delivered), len(undelivered))
			}
			return true
		})
		for n := range seen {
			if _, ok := accepted.Load(n); !ok {
				t.Fatalf("round %d: note %s refused yet delivered", round, n)
			}
		}
		if got, _ := r.Find(tk.ID); !slices.Equal(got.Undelivered, FilterUndelivered(undelivered)) {
			t.Fatalf("round %d: entry keeps %v, complete returned %v", round, got.Undelivered, undelivered)
		}
	}
}

// TestDeliverAnswerRacingComplete: an answer racing Complete is delivered
// (gate decided, returned true) or not (false, gate untouched), never both
// or neither.
func TestDeliverAnswerRacingComplete(t *testing.T) {
	for round := 0; round < 300; round++ {
		r := NewRegistry(Caps{})
		tk := mustReserve(t, r, "", "s")
		g := NewGate()
		if _, err := r.BeginAsk(tk.ID, g, 1, "q?", true); err != nil {
			t.Fatal(err)
		}
		var ok bool
		var notes []string
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); ok = r.DeliverAnswer(tk.ID, "a") }()
		go func() { defer wg.Done(); notes = r.Complete(tk.ID, StatusDone, "", "") }()
		wg.Wait()
		st, v := g.Outcome()
		if ok {
			if st != GateDecided || v != "a" || !slices.Contains(notes, AnswerNotePrefix+"a") {
				t.Fatalf("round %d: delivered but gate %v %q, notes %v", round, st, v, notes)
			}
			if got, _ := r.Find(tk.ID); len(got.Undelivered) != 0 {
				t.Fatalf("round %d: a delivered answer reported undelivered: %v", round, got.Undelivered)
			}
		} else if st == GateDecided || len(notes) != 0 {
			t.Fatalf("round %d: not delivered but gate %v, notes %v", round, st, notes)
		}
	}
}

func TestAskGates(t *testing.T) {
	r := NewRegistry(Caps{})
	top := mustReserve(t, r, "", "human")
	kid := mustReserve(t, r, top.ID, "")
	g := NewGate()
	st, err := r.BeginAsk(top.ID, g, 7, "which branch?", true)
	if err != nil || st != StatusBlockedOnHuman {
		t.Fatalf("begin ask: %v %v", st, err)
	}
	if _, err := r.BeginAsk(top.ID, NewGate(), 8, "again?", true); !errors.Is(err, ErrGateBusy) {
		t.Fatalf("second ask: %v", err)
	}
	if _, err := r.BeginApproval(top.ID, NewGate(), 9, "q", "rm"); !errors.Is(err, ErrGateBusy) {
		t.Fatalf("approval during an ask: %v", err)
	}
	kst, err := r.BeginAsk(kid.ID, NewGate(), 10, "parent?", false)
	if err != nil || kst != StatusBlockedOnParent {
		t.Fatalf("owned ask: %v %v", kst, err)
	}
	if hs := r.AwaitingHuman(); len(hs) != 1 || hs[0].ID != top.ID || hs[0].Question != "which branch?" || !hs[0].AskBlocking {
		t.Fatalf("awaiting human: %+v", hs)
	}
	// A blocking reader parks until the answer.
	got := make(chan string, 1)
	go func() {
		v, err := g.Await(context.Background(), time.Hour)
		if err != nil {
			v = err.Error()
		}
		got <- v
	}()
	if !r.DeliverAnswer(top.ID, "main") {
		t.Fatal("deliver answer")
	}
	if v := <-got; v != "main" {
		t.Fatalf("await got %q", v)
	}
	tk, _ := r.Find(top.ID)
	if tk.Status != StatusRunning || tk.Asking || tk.Question != "" || tk.Queued != 1 {
		t.Fatalf("after the answer: %+v", tk)
	}
	if notes := r.DrainSteer(top.ID); !slices.Equal(notes, []string{AnswerNotePrefix + "main"}) {
		t.Fatalf("steer copy: %v", notes)
	}
	if r.DeliverAnswer(top.ID, "again") {
		t.Fatal("answer with no pending ask was delivered")
	}
	// The answer copy stays out of the undelivered report; a real note stays in.
	r.DeliverAnswer(kid.ID, "yes")
	r.Steer(kid.ID, "real note")
	notes := r.Complete(kid.ID, StatusDone, "", "")
	if len(notes) != 2 {
		t.Fatalf("drained %v", notes)
	}
	if k, _ := r.Find(kid.ID); !slices.Equal(k.Undelivered, []string{"real note"}) {
		t.Fatalf("undelivered %v", k.Undelivered)
	}
	// Stopping or finished tasks cannot ask; EndAsk keeps stopping.
	r.RequestStop(top.ID)
	if _, err := r.BeginAsk(top.ID, NewGate(), 11, "q", true); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("ask while stopping: %v", err)
	}
	r.EndAsk(top.ID)
	if tk, _ := r.Find(top.ID); tk.Status != StatusStopping {
		t.Fatalf("EndAsk changed stopping to %s", tk.Status)
	}
	if _, err := r.BeginAsk("404", NewGate(), 1, "q", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestGateTimeoutAndCancel(t *testing.T) {
	g := NewGate()
	if _, err := g.Await(context.Background(), time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("timeout: %v", err)
	}
	if st, _ := g.Outcome(); st != GateExpired || g.Decide("late") {
		t.Fatal("an expired gate accepted a decision")
	}
	g2 := NewGate()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g2.Await(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("ctx: %v", err)
	}
	if st, _ := g2.Outcome(); st != GatePending {
		t.Fatal("an interrupted await finished the gate")
	}
	g2.Cancel()
	if _, err := g2.Await(context.Background(), time.Hour); !errors.Is(err, ErrCancelled) {
		t.Fatalf("cancelled: %v", err)
	}
	if g2.Cancel() || g2.Decide("x") {
		t.Fatal("a cancelled gate finished twice")
	}
}

func TestApprovalGates(t *testing.T) {
	r := NewRegistry(Caps{})
	tk := mustReserve(t, r, "", "human")
	g := NewGate()
	prev, err := r.BeginApproval(tk.ID, g, 3, "may I?", "rm -rf build")
	if err != nil || prev != StatusRunning {
		t.Fatalf("begin approval: %v %v", prev, err)
	}
	if as := r.AwaitingApproval(); len(as) != 1 || as[0].ApprovalCommand != "rm -rf build" || as[0].Status != StatusNeedsApproval {
		t.Fatalf("awaiting approval: %+v", as)
	}
	if len(r.AwaitingHuman()) != 0 {
		t.Fatal("an approval counted as a question")
	}
	if !r.DecideApproval(tk.ID, false, "use make clean") {
		t.Fatal("decide")
	}
	if st, v := g.Outcome(); st != GateDecided || v != "no use make clean" {
		t.Fatalf("outcome %v %q", st, v)
	}
	if got, _ := r.Find(tk.ID); got.Status != StatusRunning || got.Approving {
		t.Fatalf("after the decision: %+v", got)
	}
	if r.DecideApproval(tk.ID, true, "") {
		t.Fatal("decided with nothing pending")
	}
	r.BeginApproval(tk.ID, NewGate(), 4, "", "make")
	r.EndApproval(tk.ID)
	if got, _ := r.Find(tk.ID); got.Status != StatusRunning {
		t.Fatalf("EndApproval: %s", got.Status)
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

func TestActivityRingAndOutputTail(t *testing.T) {
	r := NewRegistry(Caps{})
	tk := mustReserve(t, r, "", "s")
	for i := 1; i <= 8; i++ {
		r.RecordToolStarted(tk.ID, fmt.Sprintf("tool %d", i))
		r.RecordToolFinished(tk.ID, fmt.Sprintf("done %d", i))
	}
	got, _ := r.Find(tk.ID)
	if got.ToolCount != 8 || got.LastActivity != "tool 8" || !slices.Equal(got.Activity, []string{"done 3", "done 4", "done 5", "done 6", "done 7", "done 8"}) {
		t.Fatalf("ring: %+v", got)
	}
	// The tail: complete lines plus the partial, across chunks.
	r.RecordToolOutput(tk.ID, "l1\nl2\r\nl3")
	r.RecordToolOutput(tk.ID, "-more\n")
	got, _ = r.Find(tk.ID)
	if !slices.Equal(got.Output, []string{"l1", "l2", "l3-more", ""}) {
		t.Fatalf("tail %q", got.Output)
	}
	for i := 4; i <= 10; i++ {
		r.RecordToolOutput(tk.ID, fmt.Sprintf("l%d\n", i))
	}
	r.RecordToolOutput(tk.ID, "partial")
	got, _ = r.Find(tk.ID)
	if !slices.Equal(got.Output, []string{"l5", "l6", "l7", "l8", "l9", "l10", "partial"}) {
		t.Fatalf("tail %q", got.Output)
	}
	// A newline-free stream is cut at 200 bytes, on a rune boundary.
	r.RecordToolOutput(tk.ID, "\n"+strings.Repeat("é", 150))
	r.RecordToolOutput(tk.ID, strings.Repeat("x", 5000))
	got, _ = r.Find(tk.ID)
	last := got.Output[len(got.Output)-1]
	if len(last) != 200 || last != strings.Repeat("é", 100) {
		t.Fatalf("cut line: %d bytes %q", len(last), last[:10])
	}
	// A huge chunk of lines keeps the bounds.
	r.RecordToolOutput(tk.ID, strings.Repeat("y\n", 100000))
	got, _ = r.Find(tk.ID)
	if len(got.Output) != OutputTailMax+1 || got.Output[OutputTailMax] != "" {
		t.Fatalf("tail bounds: %q", got.Output)
	}
	// A finished tool wipes the tail.
	r.RecordToolFinished(tk.ID, "ran")
	if got, _ = r.Find(tk.ID); got.Output != nil {
		t.Fatalf("tail after finish: %q", got.Output)
	}
	if n, ok := r.RecordLiveProbe(tk.ID); !ok || n != 1 {
		t.Fatal("probe")
	}
	if got, _ = r.Find(tk.ID); got.ProbeCount != 1 || got.LastProbe.IsZero() {
		t.Fatal("probe not recorded")
	}
	if _, ok := r.RecordLiveProbe("404"); ok {
		t.Fatal("probe of an unknown id")
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
