package tasks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// ErrClosed is returned by Spawn once CancelAll has begun (teardown).
// Control-file callers see EAGAIN.
var ErrClosed = errors.New("the mount is shutting down: no new tasks")

// ErrUnknownSubagent is returned by Spawn for a type that is neither
// built in nor configured. Control-file callers see EINVAL.
var ErrUnknownSubagent = errors.New("unknown subagent")

// Sessions is the guard's session registry as the runner needs it. The
// runner registers each task's process as the root of session
// "task-<id>" right after starting it and ends the session when the task
// finishes. Implementations must be safe for concurrent use and must not
// call back into the Runner.
type Sessions interface {
	// Register makes pid the root of session name; cmd describes it.
	Register(name string, pid uint32, cmd string) error
	// End ends session name.
	End(name string) error
}

// ownedSessions is a Sessions that records who a session belongs to
// (sessions.Registry): a task's session is registered as owned by its
// spawner's uid (docs/DESIGN.md#task-credentials), and counts against that
// uid's live-session cap.
type ownedSessions interface {
	RegisterFor(owner uint32, name string, pid uint32, cmd string, harness bool) error
}

// Runner starts tasks as processes and serves .rubino/agents. Each task
// runs in its own POSIX session and process group (setsid: the leader's
// pid is the group and session id), with RUBINO_TASK_ID, RUBINO_SESSION,
// RUBINO_MOUNT in its environment and the mount root as its working
// directory. Its stdout and stderr feed the live output tail and a log
// file; exit 0 makes it done (result: what it wrote to its result file,
// else the last MaxResult bytes of its stdout), anything else failed (error:
// the exit status and the last stderr line). When the leader exits, the
// rest of its process group and session is killed: a task never leaves
// processes behind, and its live children are stopped.
//
// Caller identity (docs/DESIGN.md#task-authority): a caller whose session
// is "task-<id>" is that task. Without a Sessions registry
// (Config.Sessions nil) a caller is that task when its POSIX session id
// (from /proc/PID/stat) is the task's: only the task's processes can be in
// it, since setsid(2) cannot join a session.
//
// Safe for concurrent use.
type Runner struct {
	cfg       Config
	reg       *Registry
	run       string // log file prefix: the runner's start time
	ownLogDir bool
	gateSeq   atomic.Int64
	// spawnerOf identifies a clone writer (SpawnerOf); unit tests that
	// play callers of other uids replace it with the runner's own process.
	spawnerOf func(c ctltree.Caller) (*Spawner, error)

	mu      sync.Mutex // guards closing, procs, bySid; held across a spawn
	closing bool
	procs   map[string]*proc
	bySid   map[int]string
	wg      sync.WaitGroup

	closed    chan struct{} // closed at the end of CancelAll: blocked reads return
	closeOnce sync.Once
}

// New returns a runner for cfg (after WithDefaults and Validate). Mount
// is required; LogDir is created (mode 0700), or a temporary one when "".
func New(cfg Config) (*Runner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mount == "" {
		return nil, errors.New("tasks: Config.Mount is required")
	}
	rn := &Runner{
		cfg: cfg, reg: NewRegistry(cfg.Caps), run: time.Now().UTC().Format("20060102T150405"),
		procs: map[string]*proc{}, bySid: map[int]string{}, closed: make(chan struct{}),
	}
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "rubinofs-agents-")
		if err != nil {
			return nil, err
		}
		rn.cfg.LogDir, rn.ownLogDir = dir, true
	} else if err := os.MkdirAll(cfg.LogDir, 0o700); err != nil {
		return nil, fmt.Errorf("agents log directory: %w", err)
	} else {
		rn.pruneOldLogs()
	}
	return rn, nil
}

// Open is the daemon's entry point: cfg is the effective configuration
// (package config merged the files, agents.json included, and the daemon
// hands it over); Open reads no configuration file or variable of its own
// (docs/DESIGN.md#options-table). It logs to stateDir/agents unless
// cfg.LogDir is set, finds branches under stateDir (Config.StateDir), and
// returns New's runner.
func Open(cfg Config, stateDir string) (*Runner, error) {
	cfg.StateDir = stateDir
	if cfg.LogDir == "" && stateDir != "" {
		cfg.LogDir = filepath.Join(stateDir, "agents")
	}
	return New(cfg)
}

// Registry returns the runner's registry.
func (rn *Runner) Registry() *Registry { return rn.reg }

// Config returns the effective config.
func (rn *Runner) Config() Config { return rn.cfg }

// Subagents returns the known type names, sorted ("sh" included unless
// Config.NoShell).
func (rn *Runner) Subagents() []string {
	var names []string
	if !rn.cfg.NoShell {
		names = append(names, BuiltinShell)
	}
	for k := range rn.cfg.Subagents {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (rn *Runner) typeOf(name string) (SubagentType, bool) {
	if name == BuiltinShell {
		return SubagentType{Command: []string{rn.cfg.Shell, "-c", "{prompt}"}}, true
	}
	t, ok := rn.cfg.Subagents[name]
	return t, ok
}

// Spawn is SpawnAs with the runner's own process as the spawner: the
// task gets the runner's credentials and environment. For callers inside
// the program; a control-file caller's task is always SpawnAs its
// SpawnerOf (docs/DESIGN.md#task-credentials).
func (rn *Runner) Spawn(spec Spec, ownerTask, ownerSession string, ownerUid uint32) (Task, error) {
	return rn.SpawnAs(spec, ownerTask, ownerSession, ownerUid, nil)
}

// SpawnAs reserves a task (Registry.Reserve: the caps) and starts its
// process as sp (Spawner; nil: the runner's own process). ownerTask is the
// spawning task's id ("" for a non-task caller), ownerSession the caller's
// session, ownerUid its uid (the task's OwnerUid; a caller outside every
// session has its top-level tasks counted per uid by the per_owner cap,
// docs/DESIGN.md#task-caps). A task whose process cannot be started is
// recorded as failed and returned without error. Errors: a spec that does
// not validate (ErrBadInput, ErrTooLarge), ErrUnknownSubagent, ErrShellOff,
// ErrBranchRefused, ErrNoBranch (a spec asking for a branch,
// docs/DESIGN.md#branch-tasks), *CapError, ErrOwnerNotLive, ErrClosed.
func (rn *Runner) SpawnAs(spec Spec, ownerTask, ownerSession string, ownerUid uint32, sp *Spawner) (Task, error) {
	if err := spec.Validate(); err != nil {
		return Task{}, err
	}
	if spec.Subagent == BuiltinShell && rn.cfg.NoShell {
		return Task{}, ErrShellOff
	}
	typ, ok := rn.typeOf(spec.Subagent)
	if !ok {
		return Task{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownSubagent, spec.Subagent, strings.Join(rn.Subagents(), ", "))
	}
	if err := rn.checkBranch(spec, sp); err != nil {
		return Task{}, err
	}
	// Runs after the unlock below (defers run last first): a start failure
	// just recorded a finished task, and Prune takes the registry mutex.
	defer rn.prune()
	// Held across the start, so CancelAll (which takes it to set closing)
	// never misses a task being started.
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.closing {
		return Task{}, ErrClosed
	}
	t, err := rn.reg.Reserve(ReserveRequest{Subagent: spec.Subagent, Prompt: spec.Prompt, OwnerTask: ownerTask, OwnerSession: ownerSession,
		OwnerUid: ownerUid, ByUid: rn.outside(ownerSession)})
	if err != nil {
		return Task{}, err
	}
	if spec.InBranch() { // named before the process starts: its argv says it
		t.Branch, t.NewBranch = spec.Branch, spec.Branch == ""
		if t.NewBranch {
			t.Branch = rn.newBranchName(t.ID)
		}
		rn.reg.update(t.ID, func(e *entry) { e.Branch, e.NewBranch = t.Branch, t.NewBranch })
	}
	rn.wg.Add(1)
	if err := rn.startLocked(t, typ, sp); err != nil {
		rn.cfg.Logger.Warn("task could not start", "task", t.ID, "err", err)
		rn.reg.Complete(t.ID, StatusFailed, "", "start: "+err.Error())
		rn.wg.Done()
	}
	t, _ = rn.reg.Find(t.ID)
	return t, nil
}

// CancelAll is the teardown: it refuses new spawns, stops every live task
// (Registry.CancelAll: gates cancelled, process groups killed with
// SIGKILL), waits until every task process is reaped and recorded, and
// then wakes every remaining blocked reader. No task outlives it.
// Idempotent and safe from any goroutine.
func (rn *Runner) CancelAll() {
	rn.mu.Lock()
	rn.closing = true
	rn.mu.Unlock()
	rn.reg.CancelAll()
	rn.wg.Wait()
	rn.closeOnce.Do(func() { close(rn.closed) })
}

// Close is CancelAll, then removes a temporary log directory.
func (rn *Runner) Close() error {
	rn.CancelAll()
	if rn.ownLogDir {
		return os.RemoveAll(rn.cfg.LogDir)
	}
	return nil
}

// Stats counts tasks by status, for .rubino/status.
func (rn *Runner) Stats() map[string]int {
	out := map[string]int{}
	for _, t := range rn.reg.List() {
		out[string(t.Status)]++
	}
	return out
}

// CtlEntries implements ctltree.Feature: the one entry "agents", the
// directory Node serves.
func (rn *Runner) CtlEntries() []ctltree.Entry {
	return []ctltree.Entry{{Name: "agents", Node: rn.Node()}}
}

// Status implements ctltree.StatusSource: the key "agents" of
// .rubino/status and Stats, the tasks counted by status. It never blocks
// beyond the registry mutex.
func (rn *Runner) Status() (string, any) { return "agents", rn.Stats() }

// A Runner is a control-tree feature with a status key.
var (
	_ ctltree.Feature      = (*Runner)(nil)
	_ ctltree.StatusSource = (*Runner)(nil)
)
