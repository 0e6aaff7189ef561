package tasks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Status is a task's state. Live statuses hold a concurrency slot; terminal
// ones never change again.
type Status string

// The statuses of the seed registry.
const (
	StatusRunning         Status = "running"           // live: working
	StatusNeedsApproval   Status = "needs_approval"    // live: parked on a human approval
	StatusBlockedOnHuman  Status = "blocked_on_human"  // live: asked, and the human answers (no owner task)
	StatusBlockedOnParent Status = "blocked_on_parent" // live: asked, and its owner task answers
	StatusStopping        Status = "stopping"          // live: a stop was requested, unwinding
	StatusStopped         Status = "stopped"           // terminal: stopped (a failure while stopping)
	StatusDone            Status = "done"              // terminal: exited 0
	StatusFailed          Status = "failed"            // terminal: anything else
)

// Live reports whether s holds a slot: every non-terminal status, including
// needs_approval, the blocked states and stopping (the seed's live_status?).
func (s Status) Live() bool {
	switch s {
	case StatusRunning, StatusNeedsApproval, StatusBlockedOnHuman, StatusBlockedOnParent, StatusStopping:
		return true
	}
	return false
}

// Terminal reports whether s is done, failed or stopped.
func (s Status) Terminal() bool {
	return s == StatusDone || s == StatusFailed || s == StatusStopped
}

// Glyph is the one-character mark the tree and the CLI show for s (the
// seed's card glyphs: ● running, ◌ stopping, ✗ failed, ⛔ waiting on you).
func (s Status) Glyph() string {
	switch s {
	case StatusRunning:
		return "●"
	case StatusNeedsApproval:
		return "?"
	case StatusBlockedOnHuman:
		return "⛔"
	case StatusBlockedOnParent:
		return "↑"
	case StatusStopping:
		return "◌"
	case StatusStopped:
		return "■"
	case StatusDone:
		return "✓"
	case StatusFailed:
		return "✗"
	}
	return " "
}

// Bounds of the live views, as in the seed.
const (
	// ActivityLogMax is how many recent activity lines the ring keeps.
	ActivityLogMax = 6
	// OutputTailMax is how many complete output lines the tail keeps; the
	// buffer holds one more slot for the in-flight partial line.
	OutputTailMax = 6
	// OutputTailLineMax is the byte cap of one buffered output line (cut on
	// a UTF-8 boundary), so a newline-free stream cannot grow a line.
	OutputTailLineMax = 200
)

// AnswerNotePrefix is stamped on the steer-queue copy of an answer that
// DeliverAnswer also delivered through the ask gate. FilterUndelivered drops
// notes carrying it from the undelivered report, so a delivered answer is
// never reported undelivered; a real steer note never carries it.
const AnswerNotePrefix = "[parent answer] "

// ChildAskPrefix starts the note pushed onto an owner task's steer queue
// when one of its children asks (the owner answers with `reply`):
// "[child ID asks] QUESTION".
const ChildAskPrefix = "[child "

// Caps are the three nesting caps, all enforced in Reserve. Zero fields
// mean the defaults (DefaultCaps).
type Caps struct {
	// MaxDepth: a new task whose depth (0 for a top-level task, owner's
	// depth + 1 otherwise) is >= MaxDepth is refused ("depth"). Default 2.
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxChildrenPerNode: an owner (a task, or a non-task session for
	// top-level tasks) with this many live children is refused
	// ("per_owner"). Default 3.
	MaxChildrenPerNode int `json:"max_children_per_node,omitempty"`
	// MaxConcurrentTotal: with this many live tasks in the whole registry a
	// spawn is refused ("global"). Default 8.
	MaxConcurrentTotal int `json:"max_concurrent_total,omitempty"`
}

// DefaultCaps are the seed's built-in defaults: depth 2, 3 children per
// node, 8 in total.
func DefaultCaps() Caps { return Caps{MaxDepth: 2, MaxChildrenPerNode: 3, MaxConcurrentTotal: 8} }

// withDefaults fills zero fields from DefaultCaps.
func (c Caps) withDefaults() Caps {
	d := DefaultCaps()
	if c.MaxDepth <= 0 {
		c.MaxDepth = d.MaxDepth
	}
	if c.MaxChildrenPerNode <= 0 {
		c.MaxChildrenPerNode = d.MaxChildrenPerNode
	}
	if c.MaxConcurrentTotal <= 0 {
		c.MaxConcurrentTotal = d.MaxConcurrentTotal
	}
	return c
}

// Refusal reasons recorded by Reserve (the seed's :depth, :per_owner,
// :global).
const (
	RefusedDepth    = "depth"
	RefusedPerOwner = "per_owner"
	RefusedGlobal   = "global"
)

// CapError is Reserve's refusal: Reason is RefusedDepth, RefusedPerOwner or
// RefusedGlobal. Control-file callers see EAGAIN and the message, which
// starts with the reason.
type CapError struct {
	Reason string // RefusedDepth, RefusedPerOwner or RefusedGlobal
	Msg    string // the readable detail (counts and the cap)
}

// Error implements error.
func (e *CapError) Error() string { return e.Reason + ": " + e.Msg }

// Registry errors. Control-file callers see ENOENT for ErrNotFound, EPERM
// for ErrOwnerNotLive and EINVAL for the others.
var (
	ErrNotFound     = errors.New("no such task")
	ErrOwnerNotLive = errors.New("the owner task is not live")
	ErrNotRunning   = errors.New("the task is not running")
	ErrGateBusy     = errors.New("the task already has a pending question or approval")
)

// Canceler is what Attach binds to a reserved task: its live worker (the
// seed binds the worker thread and the child runner). The Runner's process
// implements it.
type Canceler interface {
	// Cancel asks the worker to stop (the seed's runner.cancel!): for a
	// process, SIGTERM to its process group and SIGKILL after a grace. It
	// must be idempotent and must not block.
	Cancel()
	// Kill ends the worker and everything it started at once (SIGKILL to
	// its process group), synchronously: the seed's kill_all_groups.
	Kill()
}

// Task is a snapshot of one registry entry. Slices are copies.
type Task struct {
	ID       string // decimal, assigned by Reserve in order; never a path
	Subagent string // the type name ("sh", or a configured one)
	Prompt   string // as spawned
	Status   Status // see the Status constants
	// OwnerTask is the id of the task that spawned this one ("" when a
	// non-task session did: a top-level task).
	OwnerTask string
	// OwnerSession is the session that spawned it: "task-<OwnerTask>" for
	// a task-spawned child, else the spawning caller's session.
	OwnerSession string
	// Depth is 0 for a top-level task, owner's depth + 1 otherwise.
	Depth    int
	Started  time.Time // when Reserve registered it
	Finished time.Time // when Complete recorded it; zero while live
	Result   string    // set by Complete: the result of a done task
	Error    string    // set by Complete: why it failed or stopped
	// DeclaredResult is what the task wrote to its result file (wins over
	// the output on success).
	DeclaredResult string

	ToolCount    int      // RecordToolStarted calls
	LastActivity string   // the last RecordToolStarted activity
	Activity     []string // the ring, oldest first, at most ActivityLogMax
	// Output is the live tail: up to OutputTailMax complete lines, then the
	// partial line (possibly ""). nil before any output.
	Output []string

	// Queued is how many steer notes wait in the queue.
	Queued int
	// Undelivered are the steer notes Complete drained (never delivered),
	// without delivered answers (FilterUndelivered).
	Undelivered []string

	Asking      bool   // an ask gate is pending
	AskID       int    // the pending ask's id
	Question    string // the pending ask's question
	AskBlocking bool   // whether the asker parks on the answer

	Approving        bool   // an approval gate is pending
	ApprovalID       int    // the pending approval's id
	ApprovalQuestion string // what the task asks the human
	ApprovalCommand  string // what it wants to run

	ProbeCount int       // RecordLiveProbe calls
	LastProbe  time.Time // the last probe; zero if none

	Pid int // the process group (and POSIX session) leader; 0 before Attach
}

// entry is the registry's mutable record.
type entry struct {
	Task
	seq      uint64
	steer    []string
	canceler Canceler
	done     chan struct{}

	askGate      *Gate
	approvalGate *Gate
	// lastAsk / lastApproval remember the most recent gate and its
	// question after End*, so a reader arriving late sees the outcome.
	lastAsk      *gateRecord
	lastApproval *gateRecord
}

// gateRecord is one ask or approval, kept for late readers.
type gateRecord struct {
	gate     *Gate
	id       int
	question string
	command  string
}

func (e *entry) snapshot() Task {
	t := e.Task
	t.Activity = append([]string(nil), e.Activity...)
	if e.Output != nil {
		t.Output = append([]string(nil), e.Output...)
	}
	t.Undelivered = append([]string(nil), e.Undelivered...)
	t.Queued = len(e.steer)
	return t
}

// Registry is the process-wide table of tasks (the seed's
// BackgroundTasks). All state is guarded by one mutex; methods are safe for
// concurrent use. Methods that wake gates or cancel workers collect them
// under the mutex and act after releasing it, except where noted (gates
// never call back into the Registry, so deciding one under the mutex is
// safe).
type Registry struct {
	mu      sync.Mutex
	caps    Caps
	entries map[string]*entry
	nextID  uint64
	refusal string
	now     func() time.Time
	changed chan struct{} // closed and replaced at every state change
}

// NewRegistry returns an empty registry with caps (zero fields default).
func NewRegistry(caps Caps) *Registry {
	return &Registry{caps: caps.withDefaults(), entries: map[string]*entry{}, now: time.Now, changed: make(chan struct{})}
}

// Changed returns a channel closed at the next state change of any task
// (status, gates, queue, activity, output). Take it before checking a
// condition, then wait on it: nothing is missed. For watchers and tests.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *Registry) bumpLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Caps returns the effective caps.
func (r *Registry) Caps() Caps { return r.caps }

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
	// Depth is the caller's hint for a top-level task (OwnerTask == "");
	// for a task-spawned child it is ignored and recomputed from the owner
	// (owner depth + 1), so a stale hint cannot smuggle a child past the
	// depth cap. Negative hints count as 0.
	Depth int
}

// Reserve registers a running entry and returns it (the caller then binds
// its worker with Attach). It is the single enforcement point of the three
// caps, checked in the seed's order: depth (new depth >= MaxDepth),
// per_owner (the owner already has MaxChildrenPerNode live children; the
// owner is the owner task, or the session for top-level tasks), global
// (MaxConcurrentTotal live tasks). A refusal returns *CapError and records
// its reason for LastRefusalReason; success clears it.
func (r *Registry) Reserve(req ReserveRequest) (Task, error) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	depth := max(req.Depth, 0)
	ownerSession := req.OwnerSession
	if req.OwnerTask != "" {
		owner := r.entries[req.OwnerTask]
		if owner == nil || !owner.Status.Live() {
			return Task{}, fmt.Errorf("%w: %s", ErrOwnerNotLive, req.OwnerTask)
		}
		depth = owner.Depth + 1
		ownerSession = SessionName(req.OwnerTask)
	}
	if err := r.refusalLocked(req.OwnerTask, ownerSession, depth); err != nil {
		r.refusal = err.Reason
		return Task{}, err
	}
	r.refusal = ""
	r.nextID++
	e := &entry{
		Task: Task{
			ID: strconv.FormatUint(r.nextID, 10), Subagent: req.Subagent, Prompt: req.Prompt,
			Status: StatusRunning, OwnerTask: req.OwnerTask, OwnerSession: ownerSession,
			Depth: depth, Started: r.now(),
		},
		seq:  r.nextID,
		done: make(chan struct{}),
	}
	r.entries[e.ID] = e
	return e.snapshot(), nil
}

func (r *Registry) refusalLocked(ownerTask, ownerSession string, depth int) *CapError {
	if depth >= r.caps.MaxDepth {
		return &CapError{RefusedDepth, fmt.Sprintf("a task at depth %d is past max_depth %d", depth, r.caps.MaxDepth)}
	}
	kids, total := 0, 0
	for _, e := range r.entries {
		if !e.Status.Live() {
			continue
		}
		total++
		if e.OwnerTask == ownerTask && (ownerTask != "" || e.OwnerSession == ownerSession) {
			kids++
		}
	}
	if kids >= r.caps.MaxChildrenPerNode {
		who := ownerSession
		if ownerTask != "" {
			who = "task " + ownerTask
		}
		return &CapError{RefusedPerOwner, fmt.Sprintf("%s already has %d live children (max_children_per_node %d)", who, kids, r.caps.MaxChildrenPerNode)}
	}
	if total >= r.caps.MaxConcurrentTotal {
		return &CapError{RefusedGlobal, fmt.Sprintf("%d tasks are live (max_concurrent_total %d)", total, r.caps.MaxConcurrentTotal)}
	}
	return nil
}

// LastRefusalReason is why the most recent Reserve was refused (depth,
// per_owner or global), or "" when it succeeded.
func (r *Registry) LastRefusalReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusal
}

// Attach binds the live worker and its process id to a reserved entry, so
// the registry can cancel it. Called after Reserve, so the entry exists
// before the worker can complete. False for an unknown id.
func (r *Registry) Attach(id string, c Canceler, pid int) bool {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return false
	}
	e.canceler, e.Pid = c, pid
	return true
}

// Complete records the terminal state when the worker finishes. status
// must be done, failed or stopped (anything else is recorded as failed); a
// failure landing on a stopping entry is recorded as stopped (a requested
// stop unwinding), never as failed.
//
// H5: the steer queue is drained HERE, under the same mutex that flips the
// status to terminal, and Steer refuses a terminal entry under that mutex.
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

// UndeliveredKeptMax bounds, in bytes, the undelivered steer notes a
// finished entry keeps for its activity file (the queue itself may hold
// MaxQueuedNotes notes of up to MaxCtl bytes: 4 MiB). Whole notes are kept,
// oldest first; the rest become one "[N more undelivered notes (B bytes)
// not kept]" line. Complete still returns every drained note.
const UndeliveredKeptMax = 64 << 10

// keepNotes applies UndeliveredKeptMax.
func keepNotes(notes []string) []string {
	size := 0
	for i, n := range notes {
		if size+len(n) > UndeliveredKeptMax {
			rest := 0
			for _, m := range notes[i:] {
				rest += len(m)
			}
			return append(notes[:i:i], fmt.Sprintf("[%d more undelivered notes (%d bytes) not kept]", len(notes)-i, rest))
		}
		size += len(n)
	}
	return notes
}

// FilterUndelivered drops notes carrying AnswerNotePrefix (answers already
// delivered through their ask gate) from an undelivered report.
func FilterUndelivered(notes []string) []string {
	var out []string
	for _, n := range notes {
		if !strings.HasPrefix(n, AnswerNotePrefix) {
			out = append(out, n)
		}
	}
	return out
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
// Because tasks are separate processes rather than nested runners, the
// descendants are stopped as well (marked stopping, approval gates
// cancelled, workers cancelled), which the seed gets from its nested
// cancel tokens. Idempotent and safe on an unknown, terminal or never
// blocked entry.
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
// (the seed's stop cascade, S5a), so a blocking ask anywhere in the subtree
// wakes at once. Safe with no descendants or none blocked.
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

// Prune bounds the finished tasks: it keeps the keep terminal entries that
// finished last (ties: the later reservation) and removes every older
// terminal entry except the ones it must keep, and returns the removed
// entries' last snapshots, oldest first (the caller releases what they hold
// outside the registry, such as log files: Runner.prune). keep < 1 counts as
// 1, so the task that finished last is always kept.
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

// ChildrenOf returns the direct children of id, in spawn order; "" gives
// the top-level tasks (spawned by non-task callers).
func (r *Registry) ChildrenOf(id string) []Task {
	return r.filter(func(e *entry) bool { return e.OwnerTask == id })
}

// DescendantsOf returns every transitive descendant of id in breadth
// order (BFS over owners). Cycle-safe: each id is visited once.
func (r *Registry) DescendantsOf(id string) []Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Task
	for _, e := range r.descendantsLocked(id) {
		out = append(out, e.snapshot())
	}
	return out
}

func (r *Registry) descendantsLocked(id string) []*entry {
	if id == "" {
		return nil
	}
	kids := map[string][]*entry{}
	for _, e := range r.sortedLocked() {
		if e.OwnerTask != "" {
			kids[e.OwnerTask] = append(kids[e.OwnerTask], e)
		}
	}
	var out []*entry
	seen := map[string]bool{id: true}
	frontier := kids[id]
	for len(frontier) > 0 {
		var next []*entry
		for _, e := range frontier {
			if seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			out = append(out, e)
			next = append(next, kids[e.ID]...)
		}
		frontier = next
	}
	return out
}

// IsDescendant reports whether desc is a transitive descendant of anc.
func (r *Registry) IsDescendant(anc, desc string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{desc: true}
	cur := r.entries[desc]
	for cur != nil && cur.OwnerTask != "" {
		if cur.OwnerTask == anc {
			return true
		}
		if seen[cur.OwnerTask] {
			return false
		}
		seen[cur.OwnerTask] = true
		cur = r.entries[cur.OwnerTask]
	}
	return false
}

// AncestorsOf returns the chain of ancestors of id, nearest owner first, up
// to the top-level task. Cycle-safe.
func (r *Registry) AncestorsOf(id string) []Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Task
	seen := map[string]bool{id: true}
	e := r.entries[id]
	for e != nil && e.OwnerTask != "" && !seen[e.OwnerTask] {
		seen[e.OwnerTask] = true
		e = r.entries[e.OwnerTask]
		if e != nil {
			out = append(out, e.snapshot())
		}
	}
	return out
}

// OwnedBy reports whether child's direct owner is the task parent.
func (r *Registry) OwnedBy(parent, child string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[child]
	return e != nil && parent != "" && e.OwnerTask == parent
}

// RecordToolStarted records a tool starting: bumps the tool counter and
// sets the last activity. No-op for an unknown id.
func (r *Registry) RecordToolStarted(id, activity string) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		e.ToolCount++
		e.LastActivity = activity
	}
}

// RecordToolFinished appends line to the activity ring (at most
// ActivityLogMax, oldest dropped) and clears the output tail, which belonged
// to the tool that finished. No-op for an unknown id.
func (r *Registry) RecordToolFinished(id, line string) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		e.Activity = appendRing(e.Activity, line)
		e.Output = nil
	}
}

// noteActivity appends a runner event to the ring without touching the
// tool counter or the output tail.
func (r *Registry) noteActivity(id, line string) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		e.Activity = appendRing(e.Activity, line)
	}
}

func appendRing(ring []string, line string) []string {
	ring = append(ring, line)
	if len(ring) > ActivityLogMax {
		ring = append(ring[:0:0], ring[len(ring)-ActivityLogMax:]...)
	}
	return ring
}

// RecordToolOutput folds a chunk of streamed output into the live tail: it
// splits on "\n" (a trailing "\r" is dropped, as Ruby's chomp), appends to
// the in-flight partial line, cuts every line at OutputTailLineMax bytes,
// and keeps OutputTailMax complete lines plus the partial one. No-op for an
// unknown id.
func (r *Registry) RecordToolOutput(id, chunk string) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		e.Output = appendTail(e.Output, chunk)
	}
}

func appendTail(tail []string, chunk string) []string {
	if len(tail) == 0 {
		tail = []string{""}
	}
	for len(chunk) > 0 {
		line, nl := chunk, false
		if i := strings.IndexByte(chunk, '\n'); i >= 0 {
			line, chunk, nl = chunk[:i], chunk[i+1:], true
		} else {
			chunk = ""
		}
		line = strings.TrimSuffix(line, "\r") // Ruby's chomp of each segment
		last := len(tail) - 1
		if len(tail[last]) < OutputTailLineMax {
			tail[last] = cutLine(tail[last] + cutLine(line))
		}
		if nl {
			tail = append(tail, "")
			if len(tail) > OutputTailMax+1 {
				tail = append(tail[:0:0], tail[len(tail)-OutputTailMax-1:]...)
			}
		}
	}
	return tail
}

// cutLine cuts s to at most OutputTailLineMax bytes on a rune boundary.
func cutLine(s string) string {
	if len(s) <= OutputTailLineMax {
		return s
	}
	i := OutputTailLineMax
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// RecordLiveProbe records a probe of the task: bumps the probe count and
// stamps the time. It returns the new count, or false for an unknown id.
func (r *Registry) RecordLiveProbe(id string) (int, bool) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return 0, false
	}
	e.ProbeCount++
	e.LastProbe = r.now()
	return e.ProbeCount, true
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

// Steer pushes a note onto the task's steer queue, which the task drains
// (DrainSteer: its inbox) at its next turn. It returns false, pushing
// nothing, when the entry is gone or already terminal. H5: the push happens
// under the registry mutex, gated on a non-terminal status, so it is
// serialised against Complete: a true return means the note is either
// drained by the task or reported by Complete as undelivered, never lost.
func (r *Registry) Steer(id, text string) bool {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	return r.steerLocked(id, text)
}

func (r *Registry) steerLocked(id, text string) bool {
	e := r.entries[id]
	if e == nil || e.Status.Terminal() {
		return false
	}
	e.steer = append(e.steer, text)
	return true
}

// DrainSteer empties the task's steer queue and returns the notes, oldest
// first: the task's turn boundary (reading its inbox). Nil for an unknown
// id or an empty queue.
func (r *Registry) DrainSteer(id string) []string {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return nil
	}
	out := e.steer
	e.steer = nil
	return out
}

// BeginAsk flips a running entry into the ask state: it stores the gate,
// the question and the blocking flag, and sets blocked_on_parent when the
// task has an owner task (the owner answers) or blocked_on_human otherwise
// (the seed decides by the owner id; here the owner comes from the entry,
// never from the caller). Errors: ErrNotFound; ErrNotRunning unless the
// status is running (a stopping or terminal task cannot ask); ErrGateBusy
// while another ask or approval is pending.
func (r *Registry) BeginAsk(id string, gate *Gate, askID int, question string, blocking bool) (Status, error) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return "", ErrNotFound
	}
	if e.askGate != nil || e.approvalGate != nil {
		return e.Status, ErrGateBusy
	}
	if e.Status != StatusRunning {
		return e.Status, fmt.Errorf("%w (it is %s)", ErrNotRunning, e.Status)
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

// EndAsk clears the ask state and returns a blocked entry to running (a
// stopping or terminal one keeps its status). Called once the question is
// answered, timed out, or the task unwinds. No-op for an unknown id.
func (r *Registry) EndAsk(id string) {
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		r.endAskLocked(e)
	}
}

func (r *Registry) endAskLocked(e *entry) {
	e.askGate = nil
	e.Asking, e.AskID, e.Question, e.AskBlocking = false, 0, "", false
	if e.Status == StatusBlockedOnHuman || e.Status == StatusBlockedOnParent {
		e.Status = StatusRunning
	}
}

// DeliverAnswer is the one answer wire (reply from a human or an owner
// task): it pushes AnswerNotePrefix+answer onto the steer queue (so a
// non-blocking ask folds it in at its next turn), decides the ask gate (so
// a blocking ask wakes with the answer), and clears the ask state. H5: all
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
	r.endAskLocked(e)
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
	e := r.entries[id]
	if e == nil {
		return "", ErrNotFound
	}
	prev := e.Status
	if e.askGate != nil || e.approvalGate != nil {
		return prev, ErrGateBusy
	}
	if e.Status != StatusRunning {
		return prev, fmt.Errorf("%w (it is %s)", ErrNotRunning, e.Status)
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
	r.mu.Lock()
	r.bumpLocked()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		r.endApprovalLocked(e)
	}
}

func (r *Registry) endApprovalLocked(e *entry) {
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
	r.endApprovalLocked(e)
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
		r.endAskLocked(e)
	case e.approvalGate == g:
		r.endApprovalLocked(e)
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

// SessionPrefix starts the session name of every task: a task's process is
// registered as session root "task-<id>", and a caller whose session is
// "task-<id>" is that task.
const SessionPrefix = "task-"

// SessionName returns the session name of task id.
func SessionName(id string) string { return SessionPrefix + id }
