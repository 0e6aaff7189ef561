package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

func (rn *Runner) nextGateID() int { return int(rn.gateSeq.Add(1)) }

// ownRequest parses an ask or approval request (ParseAsk) that only task
// id itself may write: ENOENT, EPERM, or the parse error's errno.
func (rn *Runner) ownRequest(c ctltree.Caller, id, what string, b []byte, approval bool) (AskRequest, error) {
	if err := rn.mustBeSelf(c, id, what); err != nil {
		return AskRequest{}, err
	}
	req, err := ParseAsk(b, approval)
	return req, ctlErrnos.Map(err)
}

// ask begins an ask: only the task itself, while running. An owned task's
// question also goes to its owner's inbox ("[child ID asks] QUESTION"), so
// the owner learns of it at its next turn.
func (rn *Runner) ask(c ctltree.Caller, id string, b []byte) error {
	req, err := rn.ownRequest(c, id, "ask", b, false)
	if err != nil {
		return err
	}
	status, err := rn.reg.BeginAsk(id, NewGate(), rn.nextGateID(), req.Question, req.IsBlocking())
	if err != nil {
		return ctlErrnos.Map(err)
	}
	if t, _ := rn.reg.Find(id); status == StatusBlockedOnParent {
		rn.reg.Steer(t.OwnerTask, fmt.Sprintf("%s%s asks] %s", ChildAskPrefix, id, req.Question))
	}
	return nil
}

func (rn *Runner) readQuestion(id string) ([]byte, error) {
	t, err := rn.find(id)
	if err != nil {
		return nil, err
	}
	return []byte(line(t.Question)), nil
}

// readAnswer parks the task on its most recent ask: the answer, or
// ECANCELED, ETIMEDOUT (the ask is then closed), EINTR when the reader is
// interrupted (the ask stays open).
func (rn *Runner) readAnswer(ctx context.Context, c ctltree.Caller, id string) ([]byte, error) {
	if err := rn.mustBeSelf(c, id, "read its answer"); err != nil {
		return nil, err
	}
	rec, _, _ := rn.reg.lastGates(id)
	if rec == nil {
		return nil, ctltree.Errorf(syscall.EINVAL, "task %s asked nothing: write the question to ask first", id)
	}
	v, err := rn.await(ctx, rec.gate)
	if err != nil {
		if errors.Is(err, ErrTimeout) {
			rn.reg.endGate(id, rec.gate)
		}
		return nil, ctlErrnos.Map(err)
	}
	return []byte(v + "\n"), nil
}

// await parks on g, also waking at teardown. A read of an O_NONBLOCK
// handle (ctltree.NonBlocking) never parks: an undecided gate is
// ctltree.ErrWouldBlock (EAGAIN) and stays open.
func (rn *Runner) await(ctx context.Context, g *Gate) (string, error) {
	if ctltree.NonBlocking(ctx) {
		select {
		case <-g.Done():
		default:
			return "", ctltree.ErrWouldBlock
		}
	}
	ctx, cancel := rn.untilClosed(ctx)
	defer cancel()
	return g.Await(ctx, time.Duration(rn.cfg.AskTimeout))
}

func (rn *Runner) requestApproval(c ctltree.Caller, id string, b []byte) error {
	req, err := rn.ownRequest(c, id, "request an approval", b, true)
	if err != nil {
		return err
	}
	_, err = rn.reg.BeginApproval(id, NewGate(), rn.nextGateID(), req.Question, req.Command)
	return ctlErrnos.Map(err)
}

// readApproval renders the pending (or last) approval:
//
//	state pending|approved|denied|cancelled|timed_out
//	question Q
//	command C
//	note N
//
// A read by the task itself while pending blocks until decided.
func (rn *Runner) readApproval(ctx context.Context, c ctltree.Caller, id string) ([]byte, error) {
	if _, err := rn.find(id); err != nil {
		return nil, err
	}
	_, rec, _ := rn.reg.lastGates(id)
	if rec == nil {
		return nil, nil
	}
	if self, isTask := rn.CallerTask(c); isTask && self == id {
		if _, err := rn.await(ctx, rec.gate); err != nil && !errors.Is(err, ErrCancelled) && !errors.Is(err, ErrTimeout) {
			return nil, ctlErrnos.Map(err)
		}
	}
	st, v := rec.gate.Outcome()
	if st == GateExpired {
		rn.reg.endGate(id, rec.gate)
	}
	state, note := st.String(), ""
	if st == GateDecided {
		word, rest, _ := strings.Cut(v, " ")
		state, note = map[string]string{"yes": "approved", "no": "denied"}[word], rest
	}
	var b strings.Builder
	fmt.Fprintf(&b, "state %s\n", state)
	if rec.question != "" {
		fmt.Fprintf(&b, "question %s\n", oneLine(rec.question))
	}
	if rec.command != "" {
		fmt.Fprintf(&b, "command %s\n", oneLine(rec.command))
	}
	if note != "" {
		fmt.Fprintf(&b, "note %s\n", oneLine(note))
	}
	return []byte(b.String()), nil
}
