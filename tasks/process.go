package tasks

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Environment variables every task gets.
const (
	EnvTaskID  = "RUBINO_TASK_ID" // the task's id
	EnvSession = "RUBINO_SESSION" // its session name, task-<id>
	EnvMount   = "RUBINO_MOUNT"   // the mount root (also its working directory)
	// EnvBranch names the branch a command of `rubinofs run --branch`
	// runs in (docs/DESIGN.md#branch-tasks); a task never inherits it
	// from its spawner.
	EnvBranch = "RUBINO_BRANCH"
)

// wrapperScript starts every task. The process is created with its
// working directory outside the mount (a fork whose child chdirs into a
// mount served by the same process can deadlock); the
// wrapper waits for the runner's go-ahead on fd 3 (sent once the task is
// attached and its session registered, so nothing it does runs
// unattributed), then changes into the mount and execs the subagent.
// wrapperFor prefixes it with the umask of Config.Umask.
const wrapperScript = `IFS= read -r go <&3 || exit 125
exec 3<&-
` + enterMount

// enterMount ends every wrapper: into the mount, then the subagent.
const enterMount = `cd -- "$RUBINO_MOUNT" || exit 125
exec "$@"`

// wrapperFor returns the start-up wrapper that first sets umask (validated
// octal, Config.Validate; "" keeps the runner's own).
func wrapperFor(umask string) string {
	return umaskLine(umask) + wrapperScript
}

// umaskLine is the wrapper's first line for Config.Umask ("" for none).
func umaskLine(umask string) string {
	if umask == "" {
		return ""
	}
	return "umask " + umask + " || exit 125\n"
}

// startLocked starts the process of reserved task t as sp (nil: as the
// runner's own process, see command); rn.mu is held.
func (rn *Runner) startLocked(t Task, typ SubagentType, sp *Spawner) (err error) {
	mount := rn.cfg.Mount
	if sp != nil {
		mount = sp.Mount
	}
	argv := rn.branchArgv(t, mount, typ.argv(t.Prompt, t.ID, mount))
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
	if sp.Joins() {
		goR, goW, err = socketPair() // the wrapper also reports that it is in (awaitEntered)
		if err == nil {
			closers = append(closers, goR, goW)
		}
	}
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
	logf, err := os.OpenFile(rn.LogPath(t.ID), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600) // read too: bounding keeps its tail
	if err != nil {
		return err
	}
	closers = append(closers, logf)

	cmd := rn.command(sp, argv, goR)
	env := rn.taskEnv(typ, t.ID, sp)
	cmd.Env = env
	if sp.Joins() {
		// nsenter runs as root: never with the spawner's environment
		// (LD_PRELOAD...); the wrapper gets it over descriptor 3.
		cmd.Env = joinEnv
	}
	if inR != nil {
		cmd.Stdin = inR
	}
	cmd.Stdout, cmd.Stderr = outW, errW
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
		name, cmd := SessionName(t.ID), clip(strings.Join(argv, " "), 200)
		var err error
		if o, ok := rn.cfg.Sessions.(ownedSessions); ok && sp != nil {
			err = o.RegisterFor(sp.Uid, name, uint32(pid), cmd, false)
		} else {
			err = rn.cfg.Sessions.Register(name, uint32(pid), cmd)
		}
		if err != nil {
			startErr = fmt.Errorf("registering session %s: %w", name, err)
		} else {
			p.registered = true
		}
	}
	entered := true
	if startErr == nil && sp.Joins() {
		// Before the clone write returns, while the caller still exists:
		// nsenter opens its namespaces through its /proc/PID.
		if entered, err = awaitEntered(goW, joinBound); err != nil {
			syscall.Kill(-pid, syscall.SIGKILL)
			startErr = fmt.Errorf("entering the namespaces of %s: %w", sp.describe(), err)
		}
	}
	switch {
	case startErr == nil && entered && sp.Joins():
		// The environment may exceed the socket's buffer, and the shell
		// reading it is the spawner's: never wait for it here.
		go func() {
			goW.Write(exportScript(env))
			goW.Close()
		}()
	case startErr == nil && entered:
		if _, err := goW.Write([]byte("go\n")); err != nil {
			startErr = fmt.Errorf("starting: %w", err)
		}
		fallthrough
	default:
		goW.Close() // without the go-ahead the wrapper exits 125
	}
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
	// logSize is the log file's size (bytes), headLen that of the line
	// boundLog put first; dropped counts the bytes of output the bound
	// dropped.
	logSize, headLen, dropped int64
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
			w, _ := o.log.WriteAt(chunk, o.logSize) // at the size, not the descriptor's offset: boundLog moves the end
			if o.logSize += int64(w); o.logSize > taskLogMax {
				o.boundLog()
			}
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

// taskLogMax bounds a task's log file in the state directory (bytes):
// past it the file keeps its last taskLogKeep bytes of output, after a
// first line that counts the bytes dropped. A task that writes without
// end (`yes`) cannot fill the state directory's disk: the log files kept
// are bounded by agents.keep_finished, and each by this.
// .rubino/agents/ID/log serves the last MiB either way.
const (
	taskLogMax  = 8 << 20
	taskLogKeep = 4 << 20
)

// boundLog cuts the log file to its last taskLogKeep bytes, after a line
// that counts the output dropped so far. A copy of taskLogKeep bytes per
// taskLogKeep written: the cost per byte stays constant. When the tail
// cannot be read it is dropped too (the output is lost, the bound holds);
// when the file cannot be truncated it is left as it is, and the next
// write tries again. o.mu is held.
func (o *outputSink) boundLog() {
	tail := make([]byte, taskLogKeep)
	n, err := o.log.ReadAt(tail, o.logSize-taskLogKeep)
	if err != nil && n < len(tail) {
		tail = tail[:0]
	} else {
		tail = tail[:n]
	}
	if err := o.log.Truncate(0); err != nil {
		return
	}
	o.dropped += o.logSize - o.headLen - int64(len(tail))
	head := fmt.Sprintf("[rubinofs: %d earlier bytes of this task's output dropped; its log keeps the last %d]\n", o.dropped, taskLogKeep)
	w1, _ := o.log.WriteAt([]byte(head), 0)
	w2, _ := o.log.WriteAt(tail, int64(w1))
	o.logSize, o.headLen = int64(w1+w2), int64(w1)
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
