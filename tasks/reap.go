package tasks

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drainGrace bounds how long a finished task's output pipes are drained
// after its process group was killed: a process that left the task's
// session (setsid) may still hold them.
const drainGrace = 2 * time.Second

// killBound bounds how long a finished task's remaining processes are
// waited for after SIGKILL (a process in uninterruptible sleep dies late).
const killBound = 10 * time.Second

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
		rn.cfg.Logger.Warn("task processes survived SIGKILL", "task", id, "session", p.pid, "waited", killBound)
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
		rn.cfg.Logger.Info("task finished with undelivered steer notes", "task", id, "notes", len(undelivered))
	}
	// A task's children never outlive it.
	for _, c := range rn.reg.ChildrenOf(id) {
		if c.Status.Live() {
			rn.reg.StopEntry(c.ID)
		}
	}
	rn.prune()
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
