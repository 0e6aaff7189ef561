package tasks

import (
	"context"
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
                 global) is on the handle. "branch":"NAME" runs the task in
                 that branch, "isolation":"branch" in a new branch task-ID
                 (root only: EPERM otherwise)
  tree           every task, indented under its owner, with a status glyph:
                 ● running  ? needs_approval  ⛔ blocked_on_human
                 ↑ blocked_on_parent  ◌ stopping  ■ stopped  ✓ done  ✗ failed
  waiting        the tasks waiting on a human (a question or an approval)
  ID/            one task (ids are decimal numbers)
    status       the status word
    subagent prompt owner depth started finished branch
                 one value each (owner: the spawning session, task-ID for a
                 task; times RFC 3339, finished empty while live; branch:
                 the branch it runs in, empty for none)
    result       the result (done: what the task wrote here, else the end of
                 its stdout); the task itself may write it, once per write.
                 Once finished, a task in a branch adds a line naming the
                 branch and the commands to diff, merge and discard it
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

Subagent types: sh (built in: the prompt is a shell command; agents.shell =
false switches it off) and those of
agents.json in the state directory (name -> argv template with {prompt},
{id}, {mount}, or the prompt on stdin), which also sets the caps
(max_depth 2, max_children_per_node 3, max_concurrent_total 8),
ask_timeout (900 s) and keep_finished (256: the finished tasks kept; older
ones go, with their logs, unless a live task descends from them).

A task runs as the process that wrote clone: its uid, groups and
environment, and for a caller in a container its namespaces and cgroup
(EPERM with the reason when that cannot be done). It starts in the mount
root as the caller sees it, in session task-ID owned by the caller's uid,
with RUBINO_TASK_ID, RUBINO_SESSION and RUBINO_MOUNT set; "rubinofs ask"
and "rubinofs inbox" use them.

Who may do what: a task (a caller in session task-ID) may see, stop, steer,
reply to and spawn under its own descendants only; a caller in a session
may act on the tasks spawned from that session and their descendants; a
caller outside every session on the tasks of its uid, and the mount owner
or root outside every session on every task. Only the task itself may ask,
read answer and inbox, write result and activity, request an approval; the
same callers, when not a task, may approve. ls, tree and waiting show only
the tasks a caller may act on (and a task itself); another's task is
ENOENT, and EPERM on a handle opened before. Everything else is EPERM.
`

// ctlErrnos maps an error to what a control-file caller sees: ErrNotFound
// and ErrNoBranch -> ENOENT; ErrTooLarge -> EFBIG; ErrBadInput,
// ErrUnknownSubagent, ErrNotRunning, ErrGateBusy -> EINVAL;
// ErrOwnerNotLive, ErrShellOff, ErrBranchRefused -> EPERM;
// *CapError, ErrClosed -> EAGAIN (a cap frees up, or the mount is going
// away); ErrCancelled -> ECANCELED; ErrTimeout -> ETIMEDOUT; then the
// table's common tail (a cancelled read -> EINTR) and EIO for anything
// else. The reason is the error's message without the "bad input: "
// prefix.
var ctlErrnos = ctltree.ErrnoTable{
	Rules: []ctltree.ErrnoRule{
		ctltree.Is(ErrNotFound, syscall.ENOENT),
		ctltree.Is(ErrTooLarge, syscall.EFBIG),
		ctltree.Is(ErrBadInput, syscall.EINVAL),
		ctltree.Is(ErrUnknownSubagent, syscall.EINVAL),
		ctltree.Is(ErrNotRunning, syscall.EINVAL),
		ctltree.Is(ErrGateBusy, syscall.EINVAL),
		ctltree.Is(ErrOwnerNotLive, syscall.EPERM),
		ctltree.Is(ErrShellOff, syscall.EPERM),
		ctltree.Is(ErrBranchRefused, syscall.EPERM),
		ctltree.Is(ErrNoBranch, syscall.ENOENT),
		ctltree.As[*CapError](syscall.EAGAIN),
		ctltree.Is(ErrClosed, syscall.EAGAIN),
		ctltree.Is(ErrCancelled, syscall.ECANCELED),
		ctltree.Is(ErrTimeout, syscall.ETIMEDOUT),
	},
	Reason: func(err error) string { return strings.TrimPrefix(err.Error(), ErrBadInput.Error()+": ") },
}

// Node returns the .rubino/agents directory.
func (rn *Runner) Node() *ctltree.Dir {
	return &ctltree.Dir{
		Entries: []ctltree.Entry{
			{Name: "README", Node: ctltree.Static(agentsReadme)},
			{Name: "clone", Node: &ctltree.File{Kind: ctltree.Clone, Clone: rn.clone}},
			{Name: "tree", Node: ctltree.Text(rn.renderTree)},
			{Name: "waiting", Node: ctltree.Text(rn.renderWaiting)},
		},
		List: func(c ctltree.Caller) []string {
			var ids []string
			for _, t := range rn.visible(c, rn.reg.List()) {
				ids = append(ids, t.ID)
			}
			return ids
		},
		// Another's task is ENOENT (docs/DESIGN.md#task-authority).
		Lookup: func(c ctltree.Caller, name string) ctltree.Node {
			if !ValidID(name) {
				return nil
			}
			if t, ok := rn.reg.Find(name); !ok || !rn.mayView(rn.whoIs(c), t) {
				return nil
			}
			return rn.taskDir(name)
		},
	}
}

// clone spawns from a spec. The caller's identity decides the owner: a
// task spawns under itself (depth recomputed from it); anyone else spawns
// a top-level task owned by its session and its uid (Task.OwnerUid,
// docs/DESIGN.md#task-authority). The task runs as the caller (SpawnerOf:
// its uid, groups, environment, namespaces), never as the daemon
// (docs/DESIGN.md#task-credentials). The file's mode stays 0666: a spawn
// gives no caller more than it has.
func (rn *Runner) clone(c ctltree.Caller, spec []byte) (string, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return "", ctlErrnos.Map(err)
	}
	ownerTask, _ := rn.CallerTask(c)
	if ownerTask != "" {
		if t, ok := rn.reg.Find(ownerTask); !ok || !t.Status.Live() {
			return "", ctltree.Errorf(syscall.EPERM, "task %s is not live: it cannot spawn", ownerTask)
		}
	}
	if s.Subagent == BuiltinShell && rn.cfg.NoShell {
		return "", ctlErrnos.Map(ErrShellOff)
	}
	spawnerOf := rn.SpawnerOf
	if rn.spawnerOf != nil {
		spawnerOf = rn.spawnerOf
	}
	sp, err := spawnerOf(c)
	if err != nil {
		return "", err
	}
	defer sp.Close()
	t, err := rn.SpawnAs(s, ownerTask, c.Session, c.Uid, sp)
	if err != nil {
		return "", ctlErrnos.Map(err)
	}
	return t.ID, nil
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

// taskDir is agents/ID. Every file runs checkView first (a caller that may
// not see the task gets EPERM), then its own rule. The writable files are
// mode 0666: the handlers decide who may write (a task running as its
// spawner's uid writes its result, that uid stops it), never the mode
// bits (docs/DESIGN.md#task-authority).
func (rn *Runner) taskDir(id string) *ctltree.Dir {
	d := ctltree.NewDir(
		ctltree.Entry{Name: "status", Node: rn.text(id, func(t Task) string { return line(string(t.Status)) })},
		ctltree.Entry{Name: "subagent", Node: rn.text(id, func(t Task) string { return line(t.Subagent) })},
		ctltree.Entry{Name: "prompt", Node: rn.text(id, func(t Task) string { return line(t.Prompt) })},
		ctltree.Entry{Name: "owner", Node: rn.text(id, func(t Task) string { return line(t.OwnerSession) })},
		ctltree.Entry{Name: "depth", Node: rn.text(id, func(t Task) string { return strconv.Itoa(t.Depth) + "\n" })},
		ctltree.Entry{Name: "started", Node: rn.text(id, func(t Task) string { return stamp(t.Started) })},
		ctltree.Entry{Name: "finished", Node: rn.text(id, func(t Task) string { return stamp(t.Finished) })},
		ctltree.Entry{Name: "branch", Node: rn.text(id, func(t Task) string { return line(t.Branch) })},
		ctltree.Entry{Name: "result", Node: &ctltree.File{Kind: ctltree.Ctl,
			Read: func(context.Context, ctltree.Caller) ([]byte, error) {
				t, err := rn.find(id)
				if err != nil {
					return nil, err
				}
				if t.Status.Terminal() {
					return []byte(line(rn.withBranchNote(t, t.Result))), nil
				}
				return []byte(line(t.DeclaredResult)), nil
			},
			Write: func(c ctltree.Caller, b []byte) error { return rn.writeResult(c, id, b) }}},
		ctltree.Entry{Name: "error", Node: rn.text(id, func(t Task) string { return line(t.Error) })},
		ctltree.Entry{Name: "activity", Node: &ctltree.File{Kind: ctltree.Append,
			Read:   func(context.Context, ctltree.Caller) ([]byte, error) { return rn.renderActivity(id) },
			Append: func(c ctltree.Caller, b []byte) error { return rn.appendActivity(c, id, b) }}},
		ctltree.Entry{Name: "output", Node: rn.text(id, renderOutput)},
		ctltree.Entry{Name: "log", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: func(context.Context, ctltree.Caller) ([]byte, error) {
			return rn.readLog(id)
		}}},
		ctltree.Entry{Name: "ctl", Node: &ctltree.File{Kind: ctltree.Ctl,
			Read:  func(context.Context, ctltree.Caller) ([]byte, error) { return []byte(id + "\n"), nil },
			Write: func(c ctltree.Caller, b []byte) error { return rn.ctl(c, id, b) }}},
		ctltree.Entry{Name: "question", Node: rn.text(id, func(t Task) string { return line(t.Question) })},
		ctltree.Entry{Name: "approval", Node: &ctltree.File{Kind: ctltree.Ctl,
			Read:  func(ctx context.Context, c ctltree.Caller) ([]byte, error) { return rn.readApproval(ctx, c, id) },
			Write: func(c ctltree.Caller, b []byte) error { return rn.requestApproval(c, id, b) }}},
		ctltree.Entry{Name: "ask", Node: &ctltree.File{Kind: ctltree.Ctl,
			Read:  func(context.Context, ctltree.Caller) ([]byte, error) { return rn.readQuestion(id) },
			Write: func(c ctltree.Caller, b []byte) error { return rn.ask(c, id, b) }}},
		ctltree.Entry{Name: "answer", Node: &ctltree.File{Kind: ctltree.ReadOnly,
			Read: func(ctx context.Context, c ctltree.Caller) ([]byte, error) { return rn.readAnswer(ctx, c, id) }}},
		ctltree.Entry{Name: "inbox", Node: &ctltree.File{Kind: ctltree.ReadOnly,
			Read: func(_ context.Context, c ctltree.Caller) ([]byte, error) { return rn.readInbox(c, id) }}},
		ctltree.Entry{Name: "wait", Node: &ctltree.File{Kind: ctltree.ReadOnly,
			Read: func(ctx context.Context, _ ctltree.Caller) ([]byte, error) { return rn.readWait(ctx, id) }}},
	)
	for _, e := range d.Entries {
		if f, ok := e.Node.(*ctltree.File); ok {
			rn.guardFile(id, f)
		}
	}
	return d
}

// guardFile makes every handler of f run checkView(id) first.
func (rn *Runner) guardFile(id string, f *ctltree.File) {
	if read := f.Read; read != nil {
		f.Read = func(ctx context.Context, c ctltree.Caller) ([]byte, error) {
			if err := rn.checkView(c, id); err != nil {
				return nil, err
			}
			return read(ctx, c)
		}
	}
	if write := f.Write; write != nil {
		f.Write = func(c ctltree.Caller, b []byte) error {
			if err := rn.checkView(c, id); err != nil {
				return err
			}
			return write(c, b)
		}
	}
	if appendf := f.Append; appendf != nil {
		f.Append = func(c ctltree.Caller, b []byte) error {
			if err := rn.checkView(c, id); err != nil {
				return err
			}
			return appendf(c, b)
		}
	}
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
