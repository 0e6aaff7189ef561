package tasks

import (
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
)

// mayAct authorises an action of c on task target: a non-task caller may
// act on any task, a task only on its own descendants
// (docs/DESIGN.md#task-authority).
func (rn *Runner) mayAct(c ctltree.Caller, target, what string) error {
	self, isTask := rn.CallerTask(c)
	if !isTask || rn.reg.IsDescendant(self, target) {
		return nil
	}
	return ctltree.Errorf(syscall.EPERM, "task %s may %s only its own descendants, and %s is not one", self, what, target)
}

// mustBeSelf authorises what only the task itself may do: ENOENT for an
// unknown task, EPERM for any other caller.
func (rn *Runner) mustBeSelf(c ctltree.Caller, target, what string) error {
	if _, err := rn.find(target); err != nil {
		return err
	}
	if self, isTask := rn.CallerTask(c); isTask && self == target {
		return nil
	}
	return ctltree.Errorf(syscall.EPERM, "only task %s itself may %s", target, what)
}

// CallerTask identifies a control-file caller: the id of the task it is,
// and true, or false for a non-task caller (see Runner for the rules). Its
// /proc read is bounded by guard.ProcBound.
func (rn *Runner) CallerTask(c ctltree.Caller) (string, bool) {
	if id, ok := strings.CutPrefix(c.Session, ctltree.TaskSessionPrefix); ok {
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
