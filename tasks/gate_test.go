package tasks

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

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
