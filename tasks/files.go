package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// agentsReadme is .rubino/agents/README.
const agentsReadme = `rubinofs agents: background subagents as files

  clone          open read-write, write a spec, read the new task's id from
                 the same handle: {"subagent":"sh","prompt":"make test"} or
                 the lines subagent=sh and prompt=make test. A spawn refused
                 by a cap fails with EAGAIN; the reason (depth, per_owner,
                 global) is on the handle
  tree           every task, indented under its owner, with a status glyph:
                 ● running  ? needs_approval  ⛔ blocked_on_human
                 ↑ blocked_on_parent  ◌ stopping  ■ stopped  ✓ done  ✗ failed
  waiting        the tasks waiting on a human (a question or an approval)
  ID/            one task (ids are decimal numbers)
    status       the status word
    subagent prompt owner depth started finished
                 one value each (owner: the spawning session, task-ID for a
                 task; times RFC 3339, finished empty while live)
    result       the result (done: what the task wrote here, else the end of
                 its stdout); the task itself may write it, once per write
    error        why it failed (exit status and last stderr line)
    activity     tool count, last activity, probes, the recent ring, and the
                 steer notes left undelivered; the task itself may append
                 "started TEXT" / "finished TEXT" lines
    output       the live tail: the last 6 lines and the partial one
    log          the log of stdout and stderr (the last 1 MiB)
    ctl          stop | steer TEXT | reply TEXT | approve yes|no [NOTE] | probe
    question     the pending question, if any
    approval     the pending approval request; the task itself writes its
                 request here (text, or {"question":...,"command":...}) and
                 a read by the task blocks until a human decides
    ask          the task itself writes its question (text, or
                 {"question":...,"blocking":false})
    answer       read by the task: blocks until the question is answered,
                 cancelled (ECANCELED) or timed out (ETIMEDOUT)
    inbox        read by the task: drains its steer notes, one per line
    wait         blocks until the task is finished, then: status, result

approval, answer and wait never block a reader that opened them with
O_NONBLOCK: while nothing is decided, such a read returns EAGAIN.

Subagent types: sh (built in: the prompt is a shell command) and those of
agents.json in the state directory (name -> argv template with {prompt},
{id}, {mount}, or the prompt on stdin), which also sets the caps
(max_depth 2, max_children_per_node 3, max_concurrent_total 8),
ask_timeout (900 s) and keep_finished (256: the finished tasks kept; older
ones go, with their logs, unless a live task descends from them). Tasks run from the mount root with RUBINO_TASK_ID,
RUBINO_SESSION (task-ID) and RUBINO_MOUNT set; "rubinofs ask" and
"rubinofs inbox" use them.

Who may do what: a task (a caller in session task-ID) may stop, steer, reply
to and spawn under its own descendants only; only the task itself may ask,
read answer and inbox, write result and activity, request an approval; only
a non-task caller may approve. Any non-task caller may act on any task.
Everything else is EPERM.
`

// logTailMax bounds what the log file serves; the whole log stays in the
// state directory.
const logTailMax = 1 << 20

// ctlErr maps an error to what a control-file caller sees: ErrNotFound ->
// ENOENT; ErrTooLarge -> EFBIG; ErrBadInput, ErrUnknownSubagent,
// ErrNotRunning, ErrGateBusy -> EINVAL; ErrOwnerNotLive -> EPERM;
// *CapError, ErrClosed -> EAGAIN; ErrCancelled -> ECANCELED; ErrTimeout ->
// ETIMEDOUT; a cancelled read -> EINTR; anything else -> EIO.
func ctlErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *ctltree.Error
	if errors.As(err, &ce) {
		return err
	}
	var capErr *CapError
	errno := syscall.EIO
	switch {
	case errors.Is(err, ErrNotFound):
		errno = syscall.ENOENT
	case errors.Is(err, ErrTooLarge):
		errno = syscall.EFBIG
	case errors.Is(err, ErrBadInput), errors.Is(err, ErrUnknownSubagent),
		errors.Is(err, ErrNotRunning), errors.Is(err, ErrGateBusy):
		errno = syscall.EINVAL
	case errors.Is(err, ErrOwnerNotLive):
		errno = syscall.EPERM
	case errors.As(err, &capErr), errors.Is(err, ErrClosed):
		errno = syscall.EAGAIN
	case errors.Is(err, ErrCancelled):
		errno = syscall.ECANCELED
	case errors.Is(err, ErrTimeout):
		errno = syscall.ETIMEDOUT
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		errno = syscall.EINTR
	}
	msg := strings.TrimPrefix(err.Error(), ErrBadInput.Error()+": ")
	return &ctltree.Error{Errno: errno, Msg: msg}
}

// Node returns the .rubino/agents directory.
func (rn *Runner) Node() *ctltree.Dir {
	return &ctltree.Dir{
		Entries: []ctltree.Entry{
			{Name: "README", Node: ctltree.Static(agentsReadme)},
			{Name: "clone", Node: &ctltree.File{Kind: ctltree.Clone, Clone: rn.clone}},
			{Name: "tree", Node: ctltree.Text(func(ctltree.Caller) string { return rn.renderTree() })},
			{Name: "waiting", Node: ctltree.Text(func(ctltree.Caller) string { return rn.renderWaiting() })},
		},
		List: func(ctltree.Caller) []string {
			var ids []string
			for _, t := range rn.reg.List() {
				ids = append(ids, t.ID)
			}
			return ids
		},
		Lookup: func(_ ctltree.Caller, name string) ctltree.Node {
			if !ValidID(name) {
				return nil
			}
			if _, ok := rn.reg.Find(name); !ok {
				return nil
			}
			return rn.taskDir(name)
		},
	}
}

// clone spawns from a spec. The caller's identity decides the owner: a
// task spawns under itself (depth recomputed from it); anyone else spawns
// a top-level task owned by its session.
func (rn *Runner) clone(c ctltree.Caller, spec []byte) (string, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return "", ctlErr(err)
	}
	ownerTask, _ := rn.CallerTask(c)
	if ownerTask != "" {
		if t, ok := rn.reg.Find(ownerTask); !ok || !t.Status.Live() {
			return "", ctltree.Errorf(syscall.EPERM, "task %s is not live: it cannot spawn", ownerTask)
		}
	}
	t, err := rn.Spawn(s, ownerTask, c.Session)
	if err != nil {
		return "", ctlErr(err)
	}
	return t.ID, nil
}

// mayAct authorises an action of c on task target: a non-task caller may
// act on any task, a task only on its own descendants.
func (rn *Runner) mayAct(c ctltree.Caller, target, what string) error {
	self, isTask := rn.CallerTask(c)
	if !isTask || rn.reg.IsDescendant(self, target) {
		return nil
	}
	return ctltree.Errorf(syscall.EPERM, "task %s may %s only its own descendants, and %s is not one", self, what, target)
}

// mustBeSelf authorises what only the task itself may do.
func (rn *Runner) mustBeSelf(c ctltree.Caller, target, what string) error {
	if self, isTask := rn.CallerTask(c); isTask && self == target {
		return nil
	}
	return ctltree.Errorf(syscall.EPERM, "only task %s itself may %s", target, what)
}

// find returns the task or ENOENT.
func (rn *Runner) find(id string) (Task, error) {
	t, ok := rn.reg.Find(id)
	if !ok {
		return Task{}, ctltree.Errorf(syscall.ENOENT, "no task %s", id)
	}
	return t, nil
}

// text makes a read-only file rendering one field of task id.
func (rn *Runner) text(id string, field func(Task) string) *ctltree.File {
	return &ctltree.File{Kind: ctltree.ReadOnly, Read: func(context.Context, ctltree.Caller) ([]byte, error) {
		t, err := rn.find(id)
		if err != nil {
			return nil, err
		}
		return []byte(field(t)), nil
	}}
}

func line(s string) string {
	if s == "" {
		return ""
	}
	return s + "\n"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano) + "\n"
}

func (rn *Runner) taskDir(id string) *ctltree.Dir {
	return ctltree.NewDir(
		ctltree.Entry{Name: "status", Node: rn.text(id, func(t Task) string { return line(string(t.Status)) })},
		ctltree.Entry{Name: "subagent", Node: rn.text(id, func(t Task) string { return line(t.Subagent) })},
		ctltree.Entry{Name: "prompt", Node: rn.text(id, func(t Task) string { return line(t.Prompt) })},
		ctltree.Entry{Name: "owner", Node: rn.text(id, func(t Task) string { return line(t.OwnerSession) })},
		ctltree.Entry{Name: "depth", Node: rn.text(id, func(t Task) string { return strconv.Itoa(t.Depth) + "\n" })},
		ctltree.Entry{Name: "started", Node: rn.text(id, func(t Task) string { return stamp(t.Started) })},
		ctltree.Entry{Name: "finished", Node: rn.text(id, func(t Task) string { return stamp(t.Finished) })},
		ctltree.Entry{Name: "result", Node: &ctltree.File{Kind: ctltree.Ctl, Mode: 0o644,
			Read: func(context.Context, ctltree.Caller) ([]byte, error) {
				t, err := rn.find(id)
				if err != nil {
					return nil, err
				}
				if t.Status.Terminal() {
					return []byte(line(t.Result)), nil
				}
				return []byte(line(t.DeclaredResult)), nil
			},
			Write: func(c ctltree.Caller, b []byte) error { return rn.writeResult(c, id, b) }}},
		ctltree.Entry{Name: "error", Node: rn.text(id, func(t Task) string { return line(t.Error) })},
		ctltree.Entry{Name: "activity", Node: &ctltree.File{Kind: ctltree.Append, Mode: 0o644,
			Read:   func(context.Context, ctltree.Caller) ([]byte, error) { return rn.renderActivity(id) },
			Append: func(c ctltree.Caller, b []byte) error { return rn.appendActivity(c, id, b) }}},
		ctltree.Entry{Name: "output", Node: rn.text(id, renderOutput)},
		ctltree.Entry{Name: "log", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: func(context.Context, ctltree.Caller) ([]byte, error) {
			return rn.readLog(id)
		}}},
		ctltree.Entry{Name: "ctl", Node: &ctltree.File{Kind: ctltree.Ctl, Mode: 0o644,
			Read:  func(context.Context, ctltree.Caller) ([]byte, error) { return []byte(id + "\n"), nil },
			Write: func(c ctltree.Caller, b []byte) error { return rn.ctl(c, id, b) }}},
		ctltree.Entry{Name: "question", Node: rn.text(id, func(t Task) string { return line(t.Question) })},
		ctltree.Entry{Name: "approval", Node: &ctltree.File{Kind: ctltree.Ctl, Mode: 0o644,
			Read:  func(ctx context.Context, c ctltree.Caller) ([]byte, error) { return rn.readApproval(ctx, c, id) },
			Write: func(c ctltree.Caller, b []byte) error { return rn.requestApproval(c, id, b) }}},
		ctltree.Entry{Name: "ask", Node: &ctltree.File{Kind: ctltree.Ctl, Mode: 0o644,
			Read:  func(context.Context, ctltree.Caller) ([]byte, error) { return rn.readQuestion(id) },
			Write: func(c ctltree.Caller, b []byte) error { return rn.ask(c, id, b) }}},
		ctltree.Entry{Name: "answer", Node: &ctltree.File{Kind: ctltree.ReadOnly,
			Read: func(ctx context.Context, c ctltree.Caller) ([]byte, error) { return rn.readAnswer(ctx, c, id) }}},
		ctltree.Entry{Name: "inbox", Node: &ctltree.File{Kind: ctltree.ReadOnly,
			Read: func(_ context.Context, c ctltree.Caller) ([]byte, error) { return rn.readInbox(c, id) }}},
		ctltree.Entry{Name: "wait", Node: &ctltree.File{Kind: ctltree.ReadOnly,
			Read: func(ctx context.Context, _ ctltree.Caller) ([]byte, error) { return rn.readWait(ctx, id) }}},
	)
}

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
	if _, err := rn.find(id); err != nil {
		return err
	}
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
			return ctlErr(fmt.Errorf("line %d: %w", i+1, err))
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
	if _, err := rn.find(id); err != nil {
		return err
	}
	if err := rn.mustBeSelf(c, id, "write its result"); err != nil {
		return err
	}
	if len(b) > MaxResult {
		return ctltree.Errorf(syscall.EFBIG, "result of %d bytes exceeds %d", len(b), MaxResult)
	}
	if err := checkText("result", string(b)); err != nil {
		return ctlErr(err)
	}
	if !rn.reg.SetResult(id, string(b)) {
		return ctltree.Errorf(syscall.EINVAL, "task %s has finished", id)
	}
	return nil
}

func (rn *Runner) readLog(id string) ([]byte, error) {
	if _, err := rn.find(id); err != nil {
		return nil, err
	}
	f, err := os.Open(rn.LogPath(id))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var head string
	if st.Size() > logTailMax {
		head = fmt.Sprintf("[%d earlier bytes; the whole log is %s]\n", st.Size()-logTailMax, rn.LogPath(id))
		if _, err := f.Seek(st.Size()-logTailMax, io.SeekStart); err != nil {
			return nil, err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, logTailMax))
	return append([]byte(head), b...), err
}

// ctl runs one ctl command on task id.
func (rn *Runner) ctl(c ctltree.Caller, id string, b []byte) error {
	t, err := rn.find(id)
	if err != nil {
		return err
	}
	cmd, err := ParseCtl(b)
	if err != nil {
		return ctlErr(err)
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
	case VerbApprove:
		if self, isTask := rn.CallerTask(c); isTask {
			return ctltree.Errorf(syscall.EPERM, "task %s may not approve: approvals are a human's", self)
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

func (rn *Runner) nextGateID() int { return int(rn.gateSeq.Add(1)) }

// ask begins an ask: only the task itself, while running. An owned task's
// question also goes to its owner's inbox ("[child ID asks] QUESTION"), as
// the seed pushes it onto the owner's steer queue.
func (rn *Runner) ask(c ctltree.Caller, id string, b []byte) error {
	if _, err := rn.find(id); err != nil {
		return err
	}
	if err := rn.mustBeSelf(c, id, "ask"); err != nil {
		return err
	}
	req, err := ParseAsk(b, false)
	if err != nil {
		return ctlErr(err)
	}
	status, err := rn.reg.BeginAsk(id, NewGate(), rn.nextGateID(), req.Question, req.IsBlocking())
	if err != nil {
		return ctlErr(err)
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
	if _, err := rn.find(id); err != nil {
		return nil, err
	}
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
		return nil, ctlErr(err)
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
	if _, err := rn.find(id); err != nil {
		return err
	}
	if err := rn.mustBeSelf(c, id, "request an approval"); err != nil {
		return err
	}
	req, err := ParseAsk(b, true)
	if err != nil {
		return ctlErr(err)
	}
	_, err = rn.reg.BeginApproval(id, NewGate(), rn.nextGateID(), req.Question, req.Command)
	return ctlErr(err)
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
			return nil, ctlErr(err)
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

func (rn *Runner) readInbox(c ctltree.Caller, id string) ([]byte, error) {
	if _, err := rn.find(id); err != nil {
		return nil, err
	}
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
		return nil, ctlErr(err)
	}
	body := t.Result
	if t.Status != StatusDone {
		body = t.Error
	}
	return []byte(string(t.Status) + "\n" + line(body)), nil
}

// renderTree renders every task under its owner, oldest first, cycle-safe;
// tasks whose owner is gone are roots.
func (rn *Runner) renderTree() string {
	all := rn.reg.List()
	byID := map[string]bool{}
	kids := map[string][]Task{}
	for i := len(all) - 1; i >= 0; i-- { // oldest first
		byID[all[i].ID] = true
	}
	var roots []Task
	for i := len(all) - 1; i >= 0; i-- {
		t := all[i]
		if t.OwnerTask != "" && byID[t.OwnerTask] {
			kids[t.OwnerTask] = append(kids[t.OwnerTask], t)
		} else {
			roots = append(roots, t)
		}
	}
	var b strings.Builder
	seen := map[string]bool{}
	var walk func(t Task, indent string)
	walk = func(t Task, indent string) {
		if seen[t.ID] {
			return
		}
		seen[t.ID] = true
		fmt.Fprintf(&b, "%s%s %s %s %s", indent, t.Status.Glyph(), t.ID, t.Status, t.Subagent)
		if t.OwnerTask == "" {
			fmt.Fprintf(&b, " (%s)", t.OwnerSession)
		}
		fmt.Fprintf(&b, ": %s", oneLine(clip(t.Prompt, 60)))
		switch {
		case t.Asking:
			fmt.Fprintf(&b, " — asks: %s", oneLine(clip(t.Question, 80)))
		case t.Approving:
			fmt.Fprintf(&b, " — approve? %s", oneLine(clip(t.ApprovalCommand+" "+t.ApprovalQuestion, 80)))
		}
		b.WriteString("\n")
		for _, k := range kids[t.ID] {
			walk(k, indent+"  ")
		}
	}
	for _, t := range roots {
		walk(t, "")
	}
	return b.String()
}

// renderWaiting lists the tasks waiting on a human, oldest first: "ID
// blocked_on_human: QUESTION" or "ID needs_approval: COMMAND — QUESTION".
func (rn *Runner) renderWaiting() string {
	var b strings.Builder
	for _, t := range rn.reg.Running() {
		switch t.Status {
		case StatusBlockedOnHuman:
			fmt.Fprintf(&b, "%s %s: %s\n", t.ID, t.Status, oneLine(t.Question))
		case StatusNeedsApproval:
			what := t.ApprovalCommand
			if t.ApprovalQuestion != "" {
				if what != "" {
					what += " — "
				}
				what += t.ApprovalQuestion
			}
			fmt.Fprintf(&b, "%s %s: %s\n", t.ID, t.Status, oneLine(what))
		}
	}
	return b.String()
}

// untilClosed returns ctx, also cancelled when the runner is torn down
// (rn.closed), for reads that park: wait, answer and gates. The caller
// must call cancel, which also ends the watching goroutine.
func (rn *Runner) untilClosed(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-rn.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
