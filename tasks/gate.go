package tasks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultAskTimeout bounds how long a blocking ask (and a pending approval)
// parks before it gives up: 15 minutes, long enough for a human to notice,
// short enough that a forgotten question does not hold a slot for good
// (docs/DESIGN.md#task-gates).
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

// Gate is a one-shot decision point a task parks on, used for both ask
// gates and approval gates (docs/DESIGN.md#task-gates).
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

// Cancel wakes every Await with ErrCancelled (a stop). It
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

// gateRecord is one ask or approval, kept for late readers.
type gateRecord struct {
	gate     *Gate
	id       int
	question string
	command  string
}

// BeginAsk flips a running entry into the ask state: it stores the gate,
// the question and the blocking flag, and sets blocked_on_parent when the
// task has an owner task (the owner answers) or blocked_on_human otherwise
// (the owner comes from the entry, never from the caller, so a task cannot
// choose who answers it). Errors: ErrNotFound; ErrNotRunning unless the
// status is running (a stopping or terminal task cannot ask); ErrGateBusy
// while another ask or approval is pending.
func (r *Registry) BeginAsk(id string, gate *Gate, askID int, question string, blocking bool) (Status, error) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e, err := r.gateableLocked(id)
	if err != nil {
		return statusOf(e), err
	}
	e.askGate = gate
	e.lastAsk = &gateRecord{gate: gate, id: askID, question: question}
	e.Asking, e.AskID, e.Question, e.AskBlocking = true, askID, question, blocking
	e.Status = StatusBlockedOnHuman
	if e.OwnerTask != "" {
		e.Status = StatusBlockedOnParent
	}
	return e.Status, nil
}

// gateableLocked returns entry id if it may open an ask or approval gate:
// it exists (else ErrNotFound, and a nil entry), has neither pending
// (ErrGateBusy) and is running (ErrNotRunning: a stopping or terminal task
// cannot park). On an error the entry is returned unchanged, for its
// status.
func (r *Registry) gateableLocked(id string) (*entry, error) {
	e := r.entries[id]
	switch {
	case e == nil:
		return nil, ErrNotFound
	case e.askGate != nil || e.approvalGate != nil:
		return e, ErrGateBusy
	case e.Status != StatusRunning:
		return e, fmt.Errorf("%w (it is %s)", ErrNotRunning, e.Status)
	}
	return e, nil
}

// statusOf is e's status, "" for no entry.
func statusOf(e *entry) Status {
	if e == nil {
		return ""
	}
	return e.Status
}

// EndAsk clears the ask state and returns a blocked entry to running (a
// stopping or terminal one keeps its status). Called once the question is
// answered, timed out, or the task unwinds. No-op for an unknown id.
func (r *Registry) EndAsk(id string) {
	r.update(id, endAskLocked)
}

// endAskLocked clears e's ask state and takes a blocked entry back to
// running; r.mu is held.
func endAskLocked(e *entry) {
	e.askGate = nil
	e.Asking, e.AskID, e.Question, e.AskBlocking = false, 0, "", false
	if e.Status == StatusBlockedOnHuman || e.Status == StatusBlockedOnParent {
		e.Status = StatusRunning
	}
}

// DeliverAnswer is the one answer wire (reply from a human or an owner
// task): it pushes AnswerNotePrefix+answer onto the steer queue (so a
// non-blocking ask folds it in at its next turn), decides the ask gate (so
// a blocking ask wakes with the answer), and clears the ask state. All
// three happen under the registry mutex, steer first, so an answer racing
// Complete is either delivered or reported not delivered, never both. False
// for an unknown id, a task with no pending ask, or a terminal task.
func (r *Registry) DeliverAnswer(id, answer string) bool {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil || e.askGate == nil {
		return false
	}
	if !r.steerLocked(id, AnswerNotePrefix+answer) {
		return false
	}
	e.askGate.Decide(answer)
	endAskLocked(e)
	return true
}

// BeginApproval flips a running entry into needs_approval and stores the
// gate, question and command; the task then parks on the gate until a
// human decides (DecideApproval). It returns the previous status. Errors as
// BeginAsk.
func (r *Registry) BeginApproval(id string, gate *Gate, approvalID int, question, command string) (Status, error) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e, err := r.gateableLocked(id)
	prev := statusOf(e)
	if err != nil {
		return prev, err
	}
	e.approvalGate = gate
	e.lastApproval = &gateRecord{gate: gate, id: approvalID, question: question, command: command}
	e.Approving, e.ApprovalID, e.ApprovalQuestion, e.ApprovalCommand = true, approvalID, question, command
	e.Status = StatusNeedsApproval
	return prev, nil
}

// EndApproval clears the approval state and returns a needs_approval entry
// to running. No-op for an unknown id.
func (r *Registry) EndApproval(id string) {
	r.update(id, endApprovalLocked)
}

// endApprovalLocked clears e's approval state and takes a needs_approval
// entry back to running; r.mu is held.
func endApprovalLocked(e *entry) {
	e.approvalGate = nil
	e.Approving, e.ApprovalID, e.ApprovalQuestion, e.ApprovalCommand = false, 0, "", ""
	if e.Status == StatusNeedsApproval {
		e.Status = StatusRunning
	}
}

// DecideApproval decides a pending approval ("yes" or "no", then " " and
// the note when there is one) and clears the approval state, atomically.
// False for an unknown id or no pending approval.
func (r *Registry) DecideApproval(id string, approve bool, note string) bool {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil || e.approvalGate == nil || e.Status.Terminal() {
		return false
	}
	v := "no"
	if approve {
		v = "yes"
	}
	if note != "" {
		v += " " + note
	}
	e.approvalGate.Decide(v)
	endApprovalLocked(e)
	return true
}

// endGate clears the ask or approval state of id if g is still its
// pending gate (a timed-out ask or approval); otherwise a no-op.
func (r *Registry) endGate(id string, g *Gate) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	switch {
	case e == nil:
	case e.askGate == g:
		endAskLocked(e)
	case e.approvalGate == g:
		endApprovalLocked(e)
	}
}

// lastGates returns the most recent ask and approval records (nil when
// none), for readers that arrive after the gate was cleared.
func (r *Registry) lastGates(id string) (ask, approval *gateRecord, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return nil, nil, false
	}
	return e.lastAsk, e.lastApproval, true
}
