package tasks

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
)

// Environment variables every task gets.
const (
	EnvTaskID  = "RUBINO_TASK_ID" // the task's id
	EnvSession = "RUBINO_SESSION" // its session name, task-<id>
	EnvMount   = "RUBINO_MOUNT"   // the mount root (also its working directory)
)

// drainGrace bounds how long a finished task's output pipes are drained
// after its process group was killed: a process that left the task's
// session (setsid) may still hold them.
const drainGrace = 2 * time.Second

// killBound bounds how long a finished task's remaining processes are
// waited for after SIGKILL (a process in uninterruptible sleep dies late).
const killBound = 10 * time.Second

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

// wrapperScript starts every task. The process is created with its
// working directory outside the mount (a fork whose child chdirs into a
// mount served by the same process can deadlock, golang/go#11155); the
// wrapper waits for the runner's go-ahead on fd 3 (sent once the task is
// attached and its session registered, so nothing it does runs
// unattributed), then changes into the mount and execs the subagent.
// wrapperFor prefixes it with the umask of Config.Umask.
const wrapperScript = `IFS= read -r go <&3 || exit 125
exec 3<&-
cd -- "$RUBINO_MOUNT" || exit 125
exec "$@"`

// wrapperFor returns the start-up wrapper that first sets umask (validated
// octal, Config.Validate; "" keeps the runner's own).
func wrapperFor(umask string) string {
	if umask == "" {
		return wrapperScript
	}
	return "umask " + umask + " || exit 125\n" + wrapperScript
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
// Caller identity: a caller whose session is "task-<id>" is that task.
// Without a Sessions registry (Config.Sessions nil) a caller is that task
// when its POSIX session id (from /proc/PID/stat) is the task's: only the
// task's processes can be in it, since setsid(2) cannot join a session.
//
// Safe for concurrent use.
type Runner struct {
	cfg       Config
	reg       *Registry
	run       string // log file prefix: the runner's start time
	ownLogDir bool
	gateSeq   atomic.Int64

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

// Open is the daemon's entry point: it merges the agents config file
// ($RUBINOFS_AGENTS_CONFIG, else stateDir/agents.json; absent means
// defaults) under cfg (fields set in cfg win), logs to stateDir/agents
// unless cfg.LogDir is set, and returns New's runner.
func Open(cfg Config, stateDir string) (*Runner, error) {
	path := os.Getenv(ConfigEnv)
	if path == "" && stateDir != "" {
		path = filepath.Join(stateDir, ConfigFileName)
	}
	file, err := LoadConfig(path)
	if err != nil {
		return nil, fmt.Errorf("agents config: %w", err)
	}
	cfg = cfg.merge(file)
	if cfg.LogDir == "" && stateDir != "" {
		cfg.LogDir = filepath.Join(stateDir, "agents")
	}
	return New(cfg)
}

// Registry returns the runner's registry.
func (rn *Runner) Registry() *Registry { return rn.reg }

// Config returns the effective config.
func (rn *Runner) Config() Config { return rn.cfg }

// Subagents returns the known type names, sorted ("sh" included).
func (rn *Runner) Subagents() []string {
	names := []string{BuiltinShell}
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

// Spawn reserves a task (Registry.Reserve: the caps) and starts its
// process. ownerTask is the spawning task's id ("" for a non-task caller),
// ownerSession the caller's session. A task whose process cannot be
// started is recorded as failed and returned without error. Errors: a
// spec that does not validate (ErrBadInput, ErrTooLarge),
// ErrUnknownSubagent, *CapError, ErrOwnerNotLive, ErrClosed.
func (rn *Runner) Spawn(spec Spec, ownerTask, ownerSession string) (Task, error) {
	if err := spec.Validate(); err != nil {
		return Task{}, err
	}
	typ, ok := rn.typeOf(spec.Subagent)
	if !ok {
		return Task{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownSubagent, spec.Subagent, strings.Join(rn.Subagents(), ", "))
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
	t, err := rn.reg.Reserve(ReserveRequest{Subagent: spec.Subagent, Prompt: spec.Prompt, OwnerTask: ownerTask, OwnerSession: ownerSession})
	if err != nil {
		return Task{}, err
	}
	rn.wg.Add(1)
	if err := rn.startLocked(t, typ); err != nil {
		rn.cfg.Logger.Printf("agents: task %s: %v", t.ID, err)
		rn.reg.Complete(t.ID, StatusFailed, "", "start: "+err.Error())
		rn.wg.Done()
	}
	t, _ = rn.reg.Find(t.ID)
	return t, nil
}

// LogPath returns the log file of task id.
func (rn *Runner) LogPath(id string) string {
	return filepath.Join(rn.cfg.LogDir, rn.run+"-"+id+".log")
}

// taskEnv is the daemon's environment without stale task variables, plus
// the type's Env and the task's own variables (which win).
func (rn *Runner) taskEnv(typ SubagentType, id string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case EnvTaskID, EnvSession, EnvMount, "RUBINOFS_READY_FD":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, typ.Env...)
	return append(env, EnvTaskID+"="+id, EnvSession+"="+SessionName(id), EnvMount+"="+rn.cfg.Mount)
}

// startLocked starts the process of reserved task t; rn.mu is held.
func (rn *Runner) startLocked(t Task, typ SubagentType) (err error) {
	argv := typ.argv(t.Prompt, t.ID, rn.cfg.Mount)
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	goR, goW, err := pipe()
	if err != nil {
		return err
	}
	outR, outW, err := pipe()
	if err != nil {
		return err
	}
	errR, errW, err := pipe()
	if err != nil {
		return err
	}
	var inR, inW *os.File
	if typ.Stdin {
		if inR, inW, err = pipe(); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(rn.LogPath(t.ID), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	closers = append(closers, logf)

	cmd := exec.Command(rn.cfg.Shell, append([]string{"-c", wrapperFor(rn.cfg.Umask), "rubino-task"}, argv...)...)
	cmd.Dir = "/" // outside the mount; the wrapper cds in (golang/go#11155)
	cmd.Env = rn.taskEnv(typ, t.ID)
	if inR != nil {
		cmd.Stdin = inR
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{goR}
	// Setsid: own session and process group, so a stop reaches everything
	// the task starts and nothing outside can join it. Pdeathsig: the
	// leader dies with the daemon's thread even when teardown cannot run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	closers = nil
	for _, f := range []*os.File{goR, outW, errW, inR} {
		if f != nil {
			f.Close()
		}
	}
	pid := cmd.Process.Pid
	p := &proc{pid: pid, grace: time.Duration(rn.cfg.StopGrace), exited: make(chan struct{})}
	rn.reg.Attach(t.ID, p, pid)
	rn.procs[t.ID] = p
	rn.bySid[pid] = t.ID

	// The tiny window: the wrapper runs between Start and the go-ahead
	// below, but only blocks reading fd 3, so nothing it does is
	// unattributed.
	var startErr error
	if rn.cfg.Sessions != nil {
		if err := rn.cfg.Sessions.Register(SessionName(t.ID), uint32(pid), clip(strings.Join(argv, " "), 200)); err != nil {
			startErr = fmt.Errorf("registering session %s: %w", SessionName(t.ID), err)
		} else {
			p.registered = true
		}
	}
	if startErr == nil {
		if _, err := goW.Write([]byte("go\n")); err != nil {
			startErr = fmt.Errorf("starting: %w", err)
		}
	}
	goW.Close() // without the go-ahead the wrapper exits 125
	if inW != nil {
		prompt := t.Prompt
		go func() {
			io.WriteString(inW, prompt)
			inW.Close()
		}()
	}
	rn.reg.noteActivity(t.ID, "started pid "+strconv.Itoa(pid))

	out := &outputSink{rn: rn, id: t.ID, log: logf}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go out.pump(outR, true, &pumps)
	go out.pump(errR, false, &pumps)
	go rn.wait(t.ID, cmd, p, out, &pumps, []*os.File{outR, errR}, startErr)
	return nil
}

// outputSink receives a task's stdout and stderr.
type outputSink struct {
	rn  *Runner
	id  string
	mu  sync.Mutex
	log *os.File
	// stdout keeps the last MaxResult bytes of stdout (the default
	// result); errLine the last non-empty stderr line.
	stdout  []byte
	errLine string
	errPart string
}

func (o *outputSink) pump(r *os.File, stdout bool, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			o.mu.Lock()
			o.log.Write(chunk)
			if stdout {
				o.stdout = append(o.stdout, chunk...)
				if len(o.stdout) > 2*MaxResult {
					o.stdout = append([]byte(nil), o.stdout[len(o.stdout)-MaxResult:]...)
				}
			} else {
				o.noteErr(string(chunk))
			}
			o.mu.Unlock()
			o.rn.reg.RecordToolOutput(o.id, string(chunk))
		}
		if err != nil {
			return
		}
	}
}

// noteErr tracks the last non-empty stderr line; o.mu is held.
func (o *outputSink) noteErr(chunk string) {
	s := o.errPart + chunk
	lines := strings.Split(s, "\n")
	o.errPart = cutLine(lines[len(lines)-1])
	for i := len(lines) - 2; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			o.errLine = cutLine(l)
			break
		}
	}
}

// result returns the default result: the last MaxResult bytes of stdout,
// from a line start, without trailing whitespace; and the last stderr line.
func (o *outputSink) result() (string, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.stdout
	if len(out) > MaxResult {
		out = out[len(out)-MaxResult:]
		if i := strings.IndexByte(string(out), '\n'); i >= 0 {
			out = out[i+1:]
		}
	}
	errLine := o.errLine
	if p := strings.TrimSpace(o.errPart); p != "" {
		errLine = p
	}
	return strings.TrimRight(string(out), " \t\r\n"), errLine
}

// wait reaps a task: it waits for the leader to exit without reaping it
// (so its pid, the group and session id, cannot be reused), kills what is
// left of the group and session, drains the output, ends the session,
// records the result, stops the task's live children and reaps.
func (rn *Runner) wait(id string, cmd *exec.Cmd, p *proc, out *outputSink, pumps *sync.WaitGroup, readers []*os.File, startErr error) {
	defer rn.wg.Done()
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	close(p.exited)
	// SIGKILL to the rest of the group and session, until it is gone;
	// Kill is a no-op from now on.
	if !p.finish() {
		rn.cfg.Logger.Printf("agents: task %s: processes of session %d survived SIGKILL for %v", id, p.pid, killBound)
	}
	werr := cmd.Wait()

	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		for _, r := range readers {
			r.Close()
		}
		<-drained
	}
	for _, r := range readers {
		r.Close()
	}
	out.mu.Lock()
	out.log.Close()
	out.mu.Unlock()

	rn.mu.Lock() // its processes are gone: nothing is identified as it any more
	delete(rn.procs, id)
	delete(rn.bySid, p.pid)
	rn.mu.Unlock()
	if p.registered {
		// An error is expected: a registry that watches the root has
		// usually ended the session already, when the leader exited.
		rn.cfg.Sessions.End(SessionName(id))
	}
	stdout, errLine := out.result()
	status, result, errMsg := StatusDone, "", ""
	t, _ := rn.reg.Find(id)
	switch {
	case startErr != nil:
		status, errMsg = StatusFailed, startErr.Error()
	case werr == nil:
		result = stdout
		if t.DeclaredResult != "" {
			result = t.DeclaredResult
		}
	default:
		status, errMsg, result = StatusFailed, werr.Error(), t.DeclaredResult
		if errLine != "" {
			errMsg += ": " + errLine
		}
	}
	exit := "exit 0"
	if werr != nil {
		exit = werr.Error()
	}
	rn.reg.noteActivity(id, exit)
	undelivered := FilterUndelivered(rn.reg.Complete(id, status, result, errMsg))
	if len(undelivered) > 0 {
		rn.cfg.Logger.Printf("agents: task %s finished with %d undelivered steer note(s)", id, len(undelivered))
	}
	// A task's children never outlive it.
	for _, c := range rn.reg.ChildrenOf(id) {
		if c.Status.Live() {
			rn.reg.StopEntry(c.ID)
		}
	}
	rn.prune()
}

// prune removes the oldest finished tasks beyond KeepFinished
// (Registry.Prune: live tasks and the lineage of live tasks are kept) and
// then, outside the registry mutex, deletes their log files. Called after
// every task finishes and after every spawn.
func (rn *Runner) prune() {
	for _, t := range rn.reg.Prune(rn.cfg.KeepFinished) {
		if err := os.Remove(rn.LogPath(t.ID)); err != nil && !os.IsNotExist(err) {
			rn.cfg.Logger.Printf("agents: task %s pruned, but its log stays: %v", t.ID, err)
		}
	}
}

// logNameRE matches the log files a Runner writes (LogPath):
// RUNSTART-ID.log with RUNSTART as 20060102T150405.
var logNameRE = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}-[0-9]+\.log$`)

// pruneOldLogs bounds the logs that earlier runs (earlier mounts) left in
// the log directory: it keeps the newest KeepFinished of them (by name,
// which starts with the run's start time, then by id) and removes the rest.
// Only names matching logNameRE are touched. Errors are logged, never
// fatal: a log directory we cannot list or clean still works.
func (rn *Runner) pruneOldLogs() {
	ents, err := os.ReadDir(rn.cfg.LogDir)
	if err != nil {
		rn.cfg.Logger.Printf("agents: listing the log directory: %v", err)
		return
	}
	type logName struct {
		run string
		id  uint64
		n   string
	}
	var old []logName
	for _, de := range ents {
		n := de.Name()
		if !de.Type().IsRegular() || !logNameRE.MatchString(n) || strings.HasPrefix(n, rn.run+"-") {
			continue
		}
		run, idStr, _ := strings.Cut(strings.TrimSuffix(n, ".log"), "-")
		id, _ := strconv.ParseUint(idStr, 10, 64)
		old = append(old, logName{run, id, n})
	}
	if len(old) <= rn.cfg.KeepFinished {
		return
	}
	sort.Slice(old, func(i, j int) bool { // newest first
		if old[i].run != old[j].run {
			return old[i].run > old[j].run
		}
		return old[i].id > old[j].id
	})
	for _, l := range old[rn.cfg.KeepFinished:] {
		if err := os.Remove(filepath.Join(rn.cfg.LogDir, l.n)); err != nil && !os.IsNotExist(err) {
			rn.cfg.Logger.Printf("agents: removing an old log: %v", err)
		}
	}
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

// CallerTask identifies a control-file caller: the id of the task it is,
// and true, or false for a non-task caller (see Runner for the rules). Its
// /proc read is bounded by guard.ProcBound.
func (rn *Runner) CallerTask(c ctltree.Caller) (string, bool) {
	if id, ok := strings.CutPrefix(c.Session, SessionPrefix); ok {
		return id, true
	}
	if rn.cfg.Sessions != nil || c.Pid == 0 {
		return "", false
	}
	// A caller whose stat does not answer in time (it is in execve) is
	// taken for a non-task: the conservative side, as for a gone process.
	st, err := readProcStatBounded(int(c.Pid))
	if err != nil {
		return "", false
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	id, ok := rn.bySid[st.Session]
	return id, ok
}

// Stats counts tasks by status, for .rubino/status.
func (rn *Runner) Stats() map[string]int {
	out := map[string]int{}
	for _, t := range rn.reg.List() {
		out[string(t.Status)]++
	}
	return out
}

// proc is a task's process: the Canceler bound by Attach.
type proc struct {
	pid        int
	grace      time.Duration
	exited     chan struct{} // closed when the leader has exited
	registered bool          // its session was registered

	mu       sync.Mutex
	finished bool // the group was finally killed; signals are no-ops
	stopOnce sync.Once
}

// Cancel sends SIGTERM to the task's process group and session, then
// SIGKILL after the grace unless the leader exited.
func (p *proc) Cancel() {
	p.stopOnce.Do(func() {
		p.signal(syscall.SIGTERM)
		go func() {
			t := time.NewTimer(p.grace)
			defer t.Stop()
			select {
			case <-p.exited:
			case <-t.C:
				p.Kill()
			}
		}()
	})
}

// Kill sends SIGKILL to the task's process group and session now.
func (p *proc) Kill() { p.signal(syscall.SIGKILL) }

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	syscall.Kill(-p.pid, sig)
	signalSession(p.pid, sig)
}

// finish kills what is left of the group and session once the leader has
// exited (it is still unreaped, so its ids cannot be reused), and makes
// later signals no-ops.
func (p *proc) finish() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = true
	return killSessionAndWait(p.pid, killBound)
}
