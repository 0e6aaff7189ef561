package tasks

import (
	"errors"
	"sync"
	"time"
)

// Registry errors. Control-file callers see ENOENT for ErrNotFound, EPERM
// for ErrOwnerNotLive and EINVAL for the others.
var (
	ErrNotFound     = errors.New("no such task")
	ErrOwnerNotLive = errors.New("the owner task is not live")
	ErrNotRunning   = errors.New("the task is not running")
	ErrGateBusy     = errors.New("the task already has a pending question or approval")
)

// Canceler is what Attach binds to a reserved task: its live worker. The
// Runner's process implements it.
type Canceler interface {
	// Cancel asks the worker to stop: for a process, SIGTERM to its process
	// group and SIGKILL after a grace. It must be idempotent and must not
	// block.
	Cancel()
	// Kill ends the worker and everything it started at once (SIGKILL to
	// its process group), synchronously, so teardown leaves nothing behind.
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
	// OwnerUid is the uid the task belongs to: the uid of the caller that
	// spawned its top-level task (a child inherits its owner task's, so a
	// whole tree belongs to one uid). It decides who may see and act on
	// the task from outside every session (docs/DESIGN.md#task-authority).
	OwnerUid uint32
	// RootSession is the session that spawned the task's top-level task
	// (a child inherits its owner task's): a caller in that session may
	// act on the whole tree (docs/DESIGN.md#task-authority).
	RootSession string
	// Branch is the branch the task runs in ("" for the workspace), and
	// NewBranch whether the task makes it first (isolation=branch)
	// (docs/DESIGN.md#branch-tasks). Set before its process starts.
	Branch    string
	NewBranch bool
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
	capKey   string // what the per_owner cap counts a top-level task under (capKeyOf)
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

// Registry is the process-wide table of tasks (docs/DESIGN.md#task-registry):
// in memory only, so tasks die with the mount. All state is guarded by one
// mutex; methods are safe for
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

// SkipIDs makes every later task's id greater than n: a new mount's ids
// start past those of the tasks whose sessions an earlier mount's journal
// still names, so no new task-N session goes on with another task's
// journal log (docs/DESIGN.md#session-names). Safe for concurrent use.
func (r *Registry) SkipIDs(n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID = max(r.nextID, n)
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

// update is the shape of every single-entry change: under the mutex, it
// wakes Changed and runs f on entry id, if there is one. It reports
// whether there was. f must not block or call back into the Registry.
func (r *Registry) update(id string, f func(e *entry)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bumpLocked()
	e := r.entries[id]
	if e != nil {
		f(e)
	}
	return e != nil
}

// Caps returns the effective caps.
func (r *Registry) Caps() Caps { return r.caps }
