package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
)

func renderOutput(t Task) string {
	var b strings.Builder
	for i, l := range t.Output {
		if i == len(t.Output)-1 {
			if l != "" {
				b.WriteString(l + "\n")
			}
			break
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

func (rn *Runner) renderActivity(id string) ([]byte, error) {
	t, err := rn.find(id)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tools: %d\n", t.ToolCount)
	if t.LastActivity != "" {
		fmt.Fprintf(&b, "last: %s\n", t.LastActivity)
	}
	fmt.Fprintf(&b, "probes: %d\n", t.ProbeCount)
	if !t.LastProbe.IsZero() {
		fmt.Fprintf(&b, "last probe: %s", stamp(t.LastProbe))
	}
	if t.Queued > 0 {
		fmt.Fprintf(&b, "queued notes: %d\n", t.Queued)
	}
	b.WriteString("recent:\n")
	for _, l := range t.Activity {
		fmt.Fprintf(&b, "  %s\n", oneLine(l))
	}
	if len(t.Undelivered) > 0 {
		b.WriteString("undelivered:\n")
		for _, n := range t.Undelivered {
			fmt.Fprintf(&b, "  %s\n", oneLine(n))
		}
	}
	return []byte(b.String()), nil
}

// oneLine folds newlines so a multi-line note stays one indented line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ⏎ ") }

func (rn *Runner) appendActivity(c ctltree.Caller, id string, b []byte) error {
	if err := rn.mustBeSelf(c, id, "record its activity"); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	type ev struct {
		started bool
		text    string
	}
	var evs []ev
	for i, l := range lines { // all or nothing
		started, text, err := ParseActivity(l)
		if err != nil {
			return ctlErrnos.Map(fmt.Errorf("line %d: %w", i+1, err))
		}
		evs = append(evs, ev{started, text})
	}
	for _, e := range evs {
		if e.started {
			rn.reg.RecordToolStarted(id, e.text)
		} else {
			rn.reg.RecordToolFinished(id, e.text)
		}
	}
	return nil
}

func (rn *Runner) writeResult(c ctltree.Caller, id string, b []byte) error {
	if err := rn.mustBeSelf(c, id, "write its result"); err != nil {
		return err
	}
	if len(b) > MaxResult {
		return ctltree.Errorf(syscall.EFBIG, "result of %d bytes exceeds %d", len(b), MaxResult)
	}
	if err := checkText("result", string(b)); err != nil {
		return ctlErrnos.Map(err)
	}
	if !rn.reg.SetResult(id, string(b)) {
		return ctltree.Errorf(syscall.EINVAL, "task %s has finished", id)
	}
	return nil
}

// ctl runs one ctl command on task id.
func (rn *Runner) ctl(c ctltree.Caller, id string, b []byte) error {
	t, err := rn.find(id)
	if err != nil {
		return err
	}
	cmd, err := ParseCtl(b)
	if err != nil {
		return ctlErrnos.Map(err)
	}
	if (cmd.Verb == VerbSteer || cmd.Verb == VerbProbe) && t.Queued >= MaxQueuedNotes {
		// EAGAIN: the queue is full until the task drains its inbox.
		return ctltree.Errorf(syscall.EAGAIN, "task %s has %d undrained notes (the limit is %d): wait until it reads its inbox", id, t.Queued, MaxQueuedNotes)
	}
	switch cmd.Verb {
	case VerbStop:
		if err := rn.mayAct(c, id, "stop"); err != nil {
			return err
		}
		rn.reg.StopEntry(id) // idempotent: a finished task stays as it is
	case VerbSteer:
		if err := rn.mayAct(c, id, "steer"); err != nil {
			return err
		}
		if !rn.reg.Steer(id, cmd.Text) {
			return ctltree.Errorf(syscall.EINVAL, "task %s has finished: the note was not delivered", id)
		}
	case VerbReply:
		if err := rn.mayAct(c, id, "answer"); err != nil {
			return err
		}
		if !rn.reg.DeliverAnswer(id, cmd.Text) {
			if t, _ = rn.reg.Find(id); t.Status.Terminal() {
				return ctltree.Errorf(syscall.EINVAL, "task %s has finished: the answer was not delivered", id)
			}
			return ctltree.Errorf(syscall.EINVAL, "task %s has no pending question", id)
		}
	case VerbApprove: // the callers of mayAct, when not a task
		if self, isTask := rn.CallerTask(c); isTask {
			return ctltree.Errorf(syscall.EPERM, "task %s may not approve: approvals are a human's", self)
		}
		if err := rn.mayAct(c, id, "approve"); err != nil {
			return err
		}
		if !rn.reg.DecideApproval(id, cmd.Approve, cmd.Text) {
			return ctltree.Errorf(syscall.EINVAL, "task %s has no pending approval", id)
		}
	case VerbProbe:
		if err := rn.mayAct(c, id, "probe"); err != nil {
			return err
		}
		if t.Status.Terminal() {
			return ctltree.Errorf(syscall.EINVAL, "task %s has finished (%s)", id, t.Status)
		}
		rn.reg.RecordLiveProbe(id)
		rn.reg.Steer(id, ProbeNote)
	}
	return nil
}

// ProbeNote is the steer note a probe queues: the task reports at its next
// turn (through its result, activity or an ask).
const ProbeNote = "[probe] report your progress"

func (rn *Runner) readInbox(c ctltree.Caller, id string) ([]byte, error) {
	if err := rn.mustBeSelf(c, id, "read its inbox"); err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, n := range rn.reg.DrainSteer(id) {
		b.WriteString(n + "\n")
	}
	return []byte(b.String()), nil
}

// readWait blocks until task id is terminal, then renders "STATUS\n" and
// the result (done) or the error. A reader parked here gets the outcome
// even if the task is pruned meanwhile (Registry.Await holds the entry); a
// task unknown at the read (never spawned, or pruned) is ENOENT. Teardown
// wakes it with EINTR, an interrupted read with EINTR. A read of an
// O_NONBLOCK handle (ctltree.NonBlocking) never parks: a task not yet
// terminal is ctltree.ErrWouldBlock (EAGAIN).
func (rn *Runner) readWait(ctx context.Context, id string) ([]byte, error) {
	nonblock := ctltree.NonBlocking(ctx)
	ctx, cancel := rn.untilClosed(ctx)
	defer cancel()
	if nonblock {
		// An already-ended ctx: Registry.Await returns the outcome when
		// the task is terminal (the outcome wins), ctx.Err() otherwise.
		cancel()
	}
	t, err := rn.reg.Await(ctx, id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, ctltree.Errorf(syscall.ENOENT, "no task %s", id)
		}
		if nonblock && errors.Is(err, context.Canceled) {
			return nil, ctltree.ErrWouldBlock
		}
		select {
		case <-rn.closed:
			return nil, ctltree.Errorf(syscall.EINTR, "the mount is shutting down")
		default:
		}
		return nil, ctlErrnos.Map(err)
	}
	body := t.Result
	if t.Status != StatusDone {
		body = t.Error
	}
	return []byte(string(t.Status) + "\n" + line(rn.withBranchNote(t, body))), nil
}
