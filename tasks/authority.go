package tasks

import (
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/sessions"
)

// who is a control-file caller as the authority rules see it, resolved
// once per request (whoIs): the task it is, or whether it is outside every
// session.
type who struct {
	c       ctltree.Caller
	task    string // the caller's task id; "" for a non-task caller
	outside bool   // a non-task caller whose session is a default session
}

// whoIs resolves c (CallerTask: a bounded /proc read without a session
// registry).
func (rn *Runner) whoIs(c ctltree.Caller) who {
	w := who{c: c}
	if id, ok := rn.CallerTask(c); ok {
		w.task = id
		return w
	}
	w.outside = rn.outside(c.Session)
	return w
}

// outside reports whether session is a default session
// (sessions.DefaultUID): the one of callers outside every session.
// Which uid a caller there acts as is its own c.Uid, never the session's
// name: before per-uid default sessions every uid shares "default".
func (rn *Runner) outside(session string) bool {
	_, ok := sessions.DefaultUID(session, rn.cfg.MountOwner)
	return ok
}

// may is the rule of docs/DESIGN.md#task-authority for w acting on t: own
// (a task on its descendants; a session caller on the trees spawned from
// its session), uid (a caller of t.OwnerUid outside every session), admin
// (the mount owner or root outside every session). It reports the refusal's
// reason when false.
func (rn *Runner) may(w who, t Task) (bool, string) {
	switch {
	case w.task != "":
		if rn.reg.IsDescendant(w.task, t.ID) {
			return true, ""
		}
		return false, "task " + w.task + " may act only on its own descendants, and " + t.ID + " is not one"
	case w.outside:
		if w.c.Privileged || w.c.Uid == t.OwnerUid {
			return true, ""
		}
		return false, "task " + t.ID + " belongs to another uid: only its uid, the mount owner or root may act on it"
	case t.RootSession == w.c.Session && !rn.outside(t.RootSession):
		return true, ""
	}
	return false, "task " + t.ID + " was not spawned from session " + w.c.Session + ": act on it from that session, or from outside every session as its uid, the mount owner or root"
}

// mayView reports whether w may see task t at all: the task itself (it
// reads its answer, inbox, approval), or what may allows. Lookups, listings,
// tree and waiting show only these tasks (docs/DESIGN.md#task-authority).
func (rn *Runner) mayView(w who, t Task) bool {
	if w.task == t.ID {
		return true
	}
	ok, _ := rn.may(w, t)
	return ok
}

// checkView is the guard every file of agents/ID runs before its handler:
// ENOENT for an unknown task, EPERM for a caller that may not see it (one
// that holds a handle opened before, or reached it through a cached
// lookup; a fresh lookup is already ENOENT).
func (rn *Runner) checkView(c ctltree.Caller, id string) error {
	t, err := rn.find(id)
	if err != nil {
		return err
	}
	if !rn.mayView(rn.whoIs(c), t) {
		return ctltree.Errorf(syscall.EPERM, "task %s is not yours: only its owner's session, its uid, the mount owner or root (outside every session) may use it", id)
	}
	return nil
}

// mayAct authorises an action of c on task target (docs/DESIGN.md#task-authority):
// ENOENT for an unknown task, EPERM with the reason otherwise.
func (rn *Runner) mayAct(c ctltree.Caller, target, what string) error {
	t, err := rn.find(target)
	if err != nil {
		return err
	}
	if ok, why := rn.may(rn.whoIs(c), t); !ok {
		return ctltree.Errorf(syscall.EPERM, "may not %s task %s: %s", what, target, why)
	}
	return nil
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

// visible returns the tasks of ts that c may see (mayView), in order.
func (rn *Runner) visible(c ctltree.Caller, ts []Task) []Task {
	w := rn.whoIs(c)
	out := ts[:0:0]
	for _, t := range ts {
		if rn.mayView(w, t) {
			out = append(out, t)
		}
	}
	return out
}

// CallerTask identifies a control-file caller: the id of the task it is,
// and true, or false for a non-task caller (see Runner for the rules). Its
// /proc read is bounded by procfs.Bound.
func (rn *Runner) CallerTask(c ctltree.Caller) (string, bool) {
	if id, ok := strings.CutPrefix(c.Session, sessions.TaskPrefix); ok {
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
