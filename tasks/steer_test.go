package tasks

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

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
