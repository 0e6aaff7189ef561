package tasks

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultAskTimeout bounds how long a blocking ask (and a pending approval)
// parks before it gives up: the seed's ask_parent_timeout, ~900 s.
const DefaultAskTimeout = 900 * time.Second

// ErrCancelled is returned by Gate.Await when the gate was cancelled: the
// task is stopping (its own stop, an ancestor's stop cascade, or teardown).
// Control-file callers see ECANCELED.
var ErrCancelled = errors.New("cancelled: the task is stopping")

// ErrTimeout is returned by Gate.Await when nobody decided within the
// bound. Control-file callers see ETIMEDOUT.
var ErrTimeout = errors.New("timed out waiting for a decision")

// GateState is the outcome of a Gate.
type GateState int

const (
	// GatePending: not decided yet.
	GatePending GateState = iota
	// GateDecided: Decide delivered a value.
	GateDecided
	// GateCancelled: Cancel woke it (a stop).
	GateCancelled
	// GateExpired: an Await timed out before a decision.
	GateExpired
)

// String returns pending, decided, cancelled or expired.
func (s GateState) String() string {
	switch s {
	case GateDecided:
		return "decided"
	case GateCancelled:
		return "cancelled"
	case GateExpired:
		return "timed_out"
	}
	return "pending"
}

// Gate is a one-shot decision point a task parks on: the Go form of the
// seed's Run::ApprovalGate, used for both ask gates and approval gates.
// The first of Decide, Cancel or Expire wins; later calls return false.
// Safe for concurrent use; it never calls back into the Registry, so the
// Registry may decide or cancel it while holding its own mutex.
type Gate struct {
	mu    sync.Mutex
	done  chan struct{}
	state GateState
	value string
}

// NewGate returns a pending gate.
func NewGate() *Gate { return &Gate{done: make(chan struct{})} }

func (g *Gate) finish(st GateState, v string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != GatePending {
		return false
	}
	g.state, g.value = st, v
	close(g.done)
	return true
}

// Decide delivers v (an answer, or "yes"/"no" for an approval) and wakes
// every Await. It returns false when the gate was already finished.
func (g *Gate) Decide(v string) bool { return g.finish(GateDecided, v) }

// Cancel wakes every Await with ErrCancelled (the seed's cancel!). It
// returns false when the gate was already finished. Idempotent.
func (g *Gate) Cancel() bool { return g.finish(GateCancelled, "") }

// Expire finishes the gate as timed out; Await calls it when its bound
// elapses, so later readers see the same outcome.
func (g *Gate) Expire() bool { return g.finish(GateExpired, "") }

// Done is closed when the gate is finished.
func (g *Gate) Done() <-chan struct{} { return g.done }

// Outcome returns the state and, when decided, the value.
func (g *Gate) Outcome() (GateState, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state, g.value
}

// Await parks until the gate is finished, ctx is done, or timeout elapses
// (timeout <= 0 means DefaultAskTimeout). It returns the decided value, or
// ErrCancelled, ErrTimeout (the gate is then expired for everyone), or
// ctx.Err() (the gate stays pending: the caller may await again).
func (g *Gate) Await(ctx context.Context, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = DefaultAskTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-g.done:
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		g.Expire()
	}
	return g.result()
}

func (g *Gate) result() (string, error) {
	st, v := g.Outcome()
	switch st {
	case GateDecided:
		return v, nil
	case GateCancelled:
		return "", ErrCancelled
	case GateExpired:
		return "", ErrTimeout
	}
	return "", errors.New("gate still pending")
}
