package tasks

import (
	"context"
	"fmt"
	"strconv"
)

// ReserveRequest is what Reserve registers.
type ReserveRequest struct {
	Subagent string // the type name, recorded as is
	Prompt   string // recorded as is
	// OwnerTask is the id of the spawning task, "" for a non-task caller.
	// It must name a live task (else ErrOwnerNotLive).
	OwnerTask string
	// OwnerSession is the spawning caller's session; for a task-spawned
	// child it is replaced by "task-<OwnerTask>".
	OwnerSession string
	// OwnerUid is the spawning caller's uid, recorded as Task.OwnerUid for
	// a top-level task; a task-spawned child inherits its owner's.
	OwnerUid uint32
	// ByUid is true when the spawning caller is outside every session (its
	// session is a default session): the per_owner cap then counts its
	// top-level tasks per OwnerUid, not per session, so one uid cannot use
	// up another's (docs/DESIGN.md#task-caps).
	ByUid bool
	// Depth is the caller's hint for a top-level task (OwnerTask == "");
	// for a task-spawned child it is ignored and recomputed from the owner
	// (owner depth + 1), so a stale hint cannot smuggle a child past the
	// depth cap. Negative hints count as 0.
	Depth int
}

// Reserve registers a running entry and returns it (the caller then binds
// its worker with Attach). It is the single enforcement point of the three
// caps (docs/DESIGN.md#task-caps), checked in this order: depth (new depth
// >= MaxDepth), per_owner (the owner already has MaxChildrenPerNode live
// children; the owner is the owner task, or the session for top-level
// tasks, or its uid for a caller outside every session: ReserveRequest.ByUid),
// global (MaxConcurrentTotal live tasks). A refusal returns
// *CapError and records its reason for LastRefusalReason; success clears
// it.
func (r *Registry) Reserve(req ReserveRequest) (Task, error) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	depth := max(req.Depth, 0)
	ownerSession, ownerUid, rootSession := req.OwnerSession, req.OwnerUid, req.OwnerSession
	key := capKeyOf(req)
	if req.OwnerTask != "" {
		owner := r.entries[req.OwnerTask]
		if owner == nil || !owner.Status.Live() {
			return Task{}, fmt.Errorf("%w: %s", ErrOwnerNotLive, req.OwnerTask)
		}
		depth = owner.Depth + 1
		ownerSession = SessionName(req.OwnerTask)
		ownerUid, rootSession = owner.OwnerUid, owner.RootSession
	}
	if err := r.refusalLocked(req.OwnerTask, key, depth); err != nil {
		r.refusal = err.Reason
		return Task{}, err
	}
	r.refusal = ""
	r.nextID++
	e := &entry{
		Task: Task{
			ID: strconv.FormatUint(r.nextID, 10), Subagent: req.Subagent, Prompt: req.Prompt,
			Status: StatusRunning, OwnerTask: req.OwnerTask, OwnerSession: ownerSession,
			OwnerUid: ownerUid, RootSession: rootSession, Depth: depth, Started: r.now(),
		},
		seq:    r.nextID,
		capKey: key,
		done:   make(chan struct{}),
	}
	r.entries[e.ID] = e
	return e.snapshot(), nil
}

// Attach binds the live worker and its process id to a reserved entry, so
// the registry can cancel it. Called after Reserve, so the entry exists
// before the worker can complete. False for an unknown id.
func (r *Registry) Attach(id string, c Canceler, pid int) bool {
	return r.update(id, func(e *entry) { e.canceler, e.Pid = c, pid })
}

// Complete records the terminal state when the worker finishes. status
// must be done, failed or stopped (anything else is recorded as failed); a
// failure landing on a stopping entry is recorded as stopped (a requested
// stop unwinding), never as failed.
//
// The steer queue is drained HERE, under the same mutex that flips the
// status to terminal, and Steer refuses a terminal entry under that mutex
// (docs/DESIGN.md#task-steering).
// A concurrent steer is therefore either queued before the flip (and
// returned here) or refused. The returned notes were never delivered; the
// entry keeps them, minus delivered answers, as Undelivered. Open gates are
// cancelled and Done(id) is closed. Completing an unknown or already
// terminal entry is a no-op returning nil.
func (r *Registry) Complete(id string, status Status, result, errMsg string) []string {
	r.mu.Lock()
	r.bumpLocked()
	e := r.entries[id]
	if e == nil || e.Status.Terminal() {
		r.mu.Unlock()
		return nil
	}
	if !status.Terminal() {
		status = StatusFailed
	}
	if e.Status == StatusStopping && status == StatusFailed {
		status = StatusStopped
	}
	e.Status, e.Result, e.Error, e.Finished = status, result, errMsg, r.now()
	drained := e.steer
	e.steer = nil
	e.Undelivered = keepNotes(FilterUndelivered(drained))
	gates := []*Gate{e.askGate, e.approvalGate}
	e.askGate, e.approvalGate = nil, nil
	e.Asking, e.Approving = false, false
	close(e.done)
	r.mu.Unlock()
	cancelGates(gates)
	return drained
}

// SetResult records the result the task declared (its result file). False
// for an unknown or terminal entry.
func (r *Registry) SetResult(id, result string) bool {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil || e.Status.Terminal() {
		return false
	}
	e.DeclaredResult = result
	return true
}

// Done returns a channel closed when the task reaches a terminal state,
// or nil for an unknown id.
func (r *Registry) Done(id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		return e.done
	}
	return nil
}

// RequestStop marks a stop request on a live entry (status stopping), so
// listings show it at once while the worker unwinds; Complete then maps a
// failure to stopped. True when the entry flipped; false for an unknown or
// terminal entry.
func (r *Registry) RequestStop(id string) bool {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil || !e.Status.Live() {
		return false
	}
	e.Status = StatusStopping
	return true
}

// StopEntry is the one stop body shared by every stop path (the ctl file's
// stop, an owner's exit, CancelAll). It marks the stop, cancels the task's
// own approval and ask gates, cancels the ask gates of ALL its descendants
// (the stop cascade, CancelDescendantAskGates), and cancels the worker.
// Because tasks are separate processes, nothing else would reach the
// descendants, so they are stopped as well (marked stopping, approval
// gates cancelled, workers cancelled): docs/DESIGN.md#task-lifecycle.
// Idempotent and safe on an unknown, terminal or never blocked entry.
func (r *Registry) StopEntry(id string) {
	r.mu.Lock()
	r.bumpLocked()
	e := r.entries[id]
	if e == nil {
		r.mu.Unlock()
		return
	}
	var gates []*Gate
	var workers []Canceler
	stop := func(x *entry) {
		if !x.Status.Live() {
			return
		}
		x.Status = StatusStopping
		gates = append(gates, x.askGate, x.approvalGate)
		x.askGate, x.approvalGate = nil, nil
		x.Asking, x.Approving = false, false
		if x.canceler != nil {
			workers = append(workers, x.canceler)
		}
	}
	stop(e)
	desc := r.descendantsLocked(id)
	for _, d := range desc { // the cascade: every descendant's ask gate first
		gates = append(gates, d.askGate)
	}
	for _, d := range desc {
		stop(d)
	}
	r.mu.Unlock()
	cancelGates(gates)
	for _, w := range workers {
		w.Cancel()
	}
}

// CancelDescendantAskGates cancels the ask gates of every descendant of id
// (the stop cascade, docs/DESIGN.md#task-lifecycle), so a blocking ask
// anywhere in the subtree wakes at once. Safe with no descendants or none
// blocked.
func (r *Registry) CancelDescendantAskGates(id string) {
	r.mu.Lock()
	var gates []*Gate
	for _, d := range r.descendantsLocked(id) {
		gates = append(gates, d.askGate)
	}
	r.mu.Unlock()
	cancelGates(gates)
}

func cancelGates(gates []*Gate) {
	for _, g := range gates {
		if g != nil {
			g.Cancel()
		}
	}
}

// CancelAll is the teardown seam: StopEntry on every live task (a snapshot
// of Running, taken without holding the mutex across the stops), then Kill
// every attached worker synchronously, so no process group survives the
// call. Idempotent; a no-op with no live tasks. Runner.CancelAll also
// waits for the workers to be reaped.
func (r *Registry) CancelAll() {
	live := r.Running()
	for _, t := range live {
		r.StopEntry(t.ID)
	}
	r.mu.Lock()
	var workers []Canceler
	for _, t := range live {
		if e := r.entries[t.ID]; e != nil && e.canceler != nil {
			workers = append(workers, e.canceler)
		}
	}
	r.mu.Unlock()
	for _, w := range workers {
		w.Kill()
	}
}

// Await blocks until task id is terminal and returns its final snapshot.
// The entry is held from the call on, so a reader parked here gets the
// outcome even if Prune removes the task meanwhile; a task already unknown
// (never reserved, or pruned) gives ErrNotFound at once. ctx ending gives
// ctx.Err() (unless the task is terminal by then). Safe for concurrent use;
// the mutex is not held while parked.
func (r *Registry) Await(ctx context.Context, id string) (Task, error) {
	wait, err := r.watch(id)
	if err != nil {
		return Task{}, err
	}
	return wait(ctx)
}

// watch is Await's first half: it takes hold of the entry (ErrNotFound if
// none) and returns the wait. Split out so tests can prune in between.
func (r *Registry) watch(id string) (func(context.Context) (Task, error), error) {
	r.mu.Lock()
	e := r.entries[id]
	r.mu.Unlock()
	if e == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return func(ctx context.Context) (Task, error) {
		select {
		case <-e.done:
		case <-ctx.Done():
			select {
			case <-e.done: // both ready: the outcome wins
			default:
				return Task{}, ctx.Err()
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return e.snapshot(), nil
	}, nil
}
