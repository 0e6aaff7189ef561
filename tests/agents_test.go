package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/tasks"
)

// Real-mount tests of .rubino/agents: tasks are real processes, driven
// with cat, echo and the CLI. They synchronise on FIFOs the tasks write,
// on blocking reads (wait, answer) and on the registry's change channel,
// never on sleeps; agentsFailsafe only bounds a hang.

const agentsFailsafe = 60 * time.Second

// agentsFifo makes a named pipe outside the mount.
func (m *mount) agentsFifo(name string) string {
	m.t.Helper()
	p := filepath.Join(m.tmp, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		m.t.Fatal(err)
	}
	return p
}

// readFifo blocks until a task wrote p and closed it.
func (m *mount) readFifo(p string) string {
	m.t.Helper()
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(p)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- strings.TrimSpace(string(b))
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(agentsFailsafe):
		m.t.Fatalf("no task wrote %s", p)
		return ""
	}
}

// spawnSh spawns an sh task through the clone file, with a shell holding
// the clone handle open read-write, and returns its id. A refused spawn
// fails the test with the daemon's reason: the handle's next read is
// "error: REASON" (dash's printf says "I/O error" for every errno).
func (m *mount) spawnSh(prompt string) string {
	m.t.Helper()
	out := m.mustSh(fmt.Sprintf(`exec 3<>.rubino/agents/clone && { printf '%%s\n' %s >&3; read id <&3; echo "$id"; }`,
		shq(`subagent=sh prompt=`+prompt)))
	id := strings.TrimSpace(out)
	if _, err := strconv.Atoi(id); err != nil {
		m.t.Fatalf("clone returned %q", out)
	}
	return id
}

// cat reads a control file under .rubino/agents with cat.
func (m *mount) cat(rel string) string {
	m.t.Helper()
	return m.mustSh("cat " + shq(".rubino/agents/"+rel))
}

// waitStatus waits, on the registry's change channel, until task id has
// status want.
func (m *mount) waitStatus(id string, want tasks.Status) {
	m.t.Helper()
	reg := m.d.Tasks.Registry()
	deadline := time.After(agentsFailsafe)
	for {
		ch := reg.Changed()
		if tk, ok := reg.Find(id); ok && tk.Status == want {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			tk, _ := reg.Find(id)
			m.t.Fatalf("task %s never became %s (it is %s)", id, want, tk.Status)
		}
	}
}

// TestAgentsFilesByCat spawns sh tasks with a shell and reads every file
// with cat.
func TestAgentsFilesByCat(t *testing.T) {
	m := newMount(t, nil, nil)
	// The JSON spec, written with echo through a read-write handle.
	out := m.mustSh(`cd .rubino/agents && exec 3<>clone && echo '{"subagent":"sh","prompt":"echo \"hello from $RUBINO_TASK_ID in $(pwd)\"; echo done >&2"}' >&3 && read id <&3 && echo "$id" && cat "$id/wait"`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	id := lines[0]
	if want := []string{id, "done", "hello from " + id + " in " + m.mnt}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("spawn and wait:\n%s", out)
	}
	names := strings.Fields(m.mustSh("ls .rubino/agents/" + id))
	sort.Strings(names)
	want := []string{"activity", "answer", "approval", "ask", "branch", "ctl", "depth", "error", "finished", "inbox", "log", "output",
		"owner", "prompt", "question", "result", "started", "status", "subagent", "wait"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("files: %v", names)
	}
	for file, want := range map[string]string{
		"status": "done\n", "subagent": "sh\n", "owner": "default\n", "depth": "0\n",
		"result": "hello from " + id + " in " + m.mnt + "\n", "error": "", "question": "", "approval": "",
		"ctl": id + "\n", "branch": "",
	} {
		if got := m.cat(id + "/" + file); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	// stdout and stderr are separate pipes: their lines may interleave in
	// either order.
	for _, f := range []string{"output", "log"} {
		if got := m.cat(id + "/" + f); len(got) != len("hello from "+id+" in "+m.mnt+"\ndone\n") ||
			!strings.Contains(got, "hello from "+id+" in "+m.mnt+"\n") || !strings.Contains(got, "done\n") {
			t.Errorf("%s %q", f, got)
		}
	}
	for _, f := range []string{"started", "finished"} {
		if _, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(m.cat(id+"/"+f))); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if got := m.cat(id + "/activity"); !strings.Contains(got, "recent:\n  started pid ") || !strings.Contains(got, "  exit 0\n") {
		t.Errorf("activity %q", got)
	}
	// The one-line key=value form; a failure.
	id2 := m.spawnSh(`echo out; echo "went wrong" >&2; exit 3`)
	if got := m.cat(id2 + "/wait"); got != "failed\nexit status 3: went wrong\n" {
		t.Fatalf("wait %q", got)
	}
	if got := m.cat(id2 + "/error"); got != "exit status 3: went wrong\n" {
		t.Fatalf("error %q", got)
	}
	if got := m.cat("tree"); got != fmt.Sprintf("✓ %s done sh (default): echo \"hello from $RUBINO_TASK_ID in $(pwd)\"; echo done >&2\n✗ %s failed sh (default): echo out; echo \"went wrong\" >&2; exit 3\n", id, id2) {
		t.Fatalf("tree %q", got)
	}
	if got := m.cat("README"); !strings.Contains(got, "clone") || !strings.Contains(got, "EPERM") {
		t.Fatal("README")
	}
	// A running task's live output and its stop.
	ready := m.agentsFifo("ready")
	id3 := m.spawnSh(`echo line1; printf partial; echo ok > ` + ready + `; exec sleep 1000`)
	m.readFifo(ready)
	if got := m.cat(id3 + "/output"); got != "line1\npartial\n" {
		t.Fatalf("live output %q", got)
	}
	if got := m.cat(id3 + "/status"); got != "running\n" {
		t.Fatalf("status %q", got)
	}
	m.mustSh("echo stop > .rubino/agents/" + id3 + "/ctl")
	if got := m.cat(id3 + "/wait"); got != "stopped\nsignal: terminated\n" {
		t.Fatalf("stopped: %q", got)
	}
	if !strings.Contains(m.mustSh("cat .rubino/status"), `"stopped": 1`) {
		t.Error("status lacks the agents counts")
	}
}

// TestAgentsBadInputThroughMount: malformed specs and commands fail with
// EINVAL and a reason on the same handle; caps with EAGAIN; oversized
// writes with EFBIG; unknown ids with ENOENT.
func TestAgentsBadInputThroughMount(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) { c.Agents.MaxChildrenPerNode = 1 })
	out := m.mustSh(`exec 3<>.rubino/agents/clone; /bin/echo 'not a spec' >&3; echo "rc=$?"; cat <&3 || true`)
	if !strings.Contains(out, "Invalid argument") || !strings.Contains(out, "rc=1") ||
		!strings.Contains(out, "error: spec line 1: want key=value") {
		t.Fatalf("malformed spec:\n%s", out)
	}
	out = m.mustSh(`exec 3<>.rubino/agents/clone; echo '{"subagent":"gpt-9","prompt":"hi"}' >&3; cat <&3 || true`)
	if !strings.Contains(out, `error: unknown subagent "gpt-9" (known: sh)`) {
		t.Fatalf("unknown subagent:\n%s", out)
	}
	id := m.spawnSh("exec sleep 1000")
	out = m.mustSh(`exec 3<>.rubino/agents/clone; /bin/echo 'subagent=sh prompt=true' >&3; cat <&3 || true`)
	if !strings.Contains(out, "Resource temporarily unavailable") || !strings.Contains(out, "error: per_owner: uid 0 already has 1 live children") {
		t.Fatalf("cap:\n%s", out)
	}
	out = m.mustSh(`exec 3<>.rubino/agents/` + id + `/ctl; echo 'halt and catch fire' >&3; cat <&3 || true`)
	if !strings.Contains(out, `error: unknown command "halt"`) {
		t.Fatalf("bad ctl:\n%s", out)
	}
	big := m.writeTmp("big", []byte("steer "+strings.Repeat("x", tasks.MaxCtl)))
	out, err := m.sh(`dd if=` + shq(big) + ` of=.rubino/agents/` + id + `/ctl bs=1M count=1 2>&1`)
	if err == nil || !strings.Contains(out, "File too large") {
		t.Fatalf("oversized ctl: %v\n%s", err, out)
	}
	if got := m.cat(id + "/activity"); strings.Contains(got, "queued") {
		t.Fatal("an oversized steer was queued")
	}
	for _, p := range []string{"999/status", "0" + id + "/status", "x/ctl"} {
		if out := m.mustFail("cat .rubino/agents/" + p); !strings.Contains(out, "No such file") {
			t.Errorf("%s: %s", p, out)
		}
	}
	if out := m.mustFail("/bin/echo hi > .rubino/agents/" + id + "/status"); !strings.Contains(out, "ermission denied") {
		t.Errorf("write to status: %s", out)
	}
	if !strings.Contains(m.mustSh("cat .rubino/errors"), `"path":".rubino/agents/clone","errno":"EAGAIN"`) {
		t.Error("the refusals are not in .rubino/errors")
	}
}

// TestAgentsBlockingAskAnsweredByReply: a task asks and parks reading its
// answer; `echo reply ... > ctl` wakes it.
func TestAgentsBlockingAskAnsweredByReply(t *testing.T) {
	m := newMount(t, nil, nil)
	asked := m.agentsFifo("asked")
	id := m.spawnSh(`a=.rubino/agents/$RUBINO_TASK_ID; echo "which colour?" > $a/ask && echo asked > ` + asked + ` && cat $a/answer && cat $a/inbox`)
	m.readFifo(asked)
	if got := m.cat(id + "/status"); got != "blocked_on_human\n" {
		t.Fatalf("status %q", got)
	}
	if got := m.cat(id + "/question"); got != "which colour?\n" {
		t.Fatalf("question %q", got)
	}
	if got := m.cat("waiting"); got != id+" blocked_on_human: which colour?\n" {
		t.Fatalf("waiting %q", got)
	}
	// Only the task reads its answer and inbox.
	if out := m.mustFail("cat .rubino/agents/" + id + "/inbox"); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("human reading the inbox: %s", out)
	}
	m.mustSh("echo 'reply blue, please' > .rubino/agents/" + id + "/ctl")
	if got := m.cat(id + "/wait"); got != "done\nblue, please\n[parent answer] blue, please\n" {
		t.Fatalf("wait %q", got)
	}
	if got := m.cat("waiting"); got != "" {
		t.Fatalf("waiting after the reply %q", got)
	}
}

// TestAgentsAskCancelledByStop: a stop wakes a task parked on its answer
// with ECANCELED; the task is recorded as stopped.
func TestAgentsAskCancelledByStop(t *testing.T) {
	m := newMount(t, nil, nil)
	asked, unwound := m.agentsFifo("asked"), m.agentsFifo("unwound")
	id := m.spawnSh(`trap "" TERM; a=.rubino/agents/$RUBINO_TASK_ID; echo "anyone?" > $a/ask; echo asked > ` + asked +
		`; out=$(cat $a/answer 2>&1); echo "rc=$? ${out##*: }" > ` + unwound + `; exit 1`)
	m.readFifo(asked)
	m.mustSh("echo stop > .rubino/agents/" + id + "/ctl")
	if got := m.readFifo(unwound); got != "rc=1 Operation canceled" {
		t.Fatalf("the parked ask unwound with %q", got)
	}
	if got := m.cat(id + "/wait"); got != "stopped\nexit status 1\n" {
		t.Fatalf("wait %q", got)
	}
}

// levelScript spawns the next level through the clone file until level 3,
// which asks a blocking question and reports how its wait ended.
const levelScript = `n=$1; d=$2; a=.rubino/agents
if [ "$n" -lt 3 ]; then
	exec 3<>$a/clone
	echo "subagent=sh prompt=exec sh $0 $((n+1)) $d" >&3
	read kid <&3
	exec 3<&-
	exec sleep 1000
fi
trap "" TERM
echo "deep question" > $a/$RUBINO_TASK_ID/ask
echo asked > $d/asked
out=$(cat $a/$RUBINO_TASK_ID/answer 2>&1); echo "rc=$? ${out##*: }" > $d/unwound
exit 1
`

// TestAgentsStopCascadeThreeLevels: tasks spawn tasks through the mount
// (three levels, depth recomputed from the caller), the deepest parks on a
// question for its parent, and stopping the top wakes it and stops all.
func TestAgentsStopCascadeThreeLevels(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) { c.Agents.MaxDepth = 3 })
	script := m.writeTmp("level.sh", []byte(levelScript))
	m.agentsFifo("asked")
	m.agentsFifo("unwound")
	top := m.spawnSh("exec sh " + script + " 1 " + m.tmp)
	m.readFifo(filepath.Join(m.tmp, "asked"))
	tree := m.cat("tree")
	lines := strings.Split(strings.TrimSpace(tree), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "● "+top+" running sh (default)") ||
		!strings.HasPrefix(lines[1], "  ● ") || !strings.HasPrefix(lines[2], "    ↑ ") || !strings.HasSuffix(lines[2], "— asks: deep question") {
		t.Fatalf("tree:\n%s", tree)
	}
	ids := []string{top, strings.Fields(lines[1])[1], strings.Fields(lines[2])[1]}
	for i, id := range ids {
		if got := m.cat(id + "/depth"); got != strconv.Itoa(i)+"\n" {
			t.Errorf("task %s depth %q", id, got)
		}
	}
	if got := m.cat(ids[2] + "/owner"); got != "task-"+ids[1]+"\n" {
		t.Errorf("owner %q", got)
	}
	if got := m.cat("waiting"); got != "" {
		t.Errorf("a question for the parent is waiting on the human: %q", got)
	}
	m.mustSh("echo stop > .rubino/agents/" + top + "/ctl")
	if got := m.readFifo(filepath.Join(m.tmp, "unwound")); got != "rc=1 Operation canceled" {
		t.Fatalf("the deepest ask unwound with %q", got)
	}
	for _, id := range ids {
		if got := strings.SplitN(m.cat(id+"/wait"), "\n", 2)[0]; got != "stopped" {
			t.Errorf("task %s: %s", id, got)
		}
	}
}

// authScript is run by a top-level task B next to a sibling A: it tries
// each action and prints the result (coreutils' echo, whose write errors
// name the errno; dash's builtin says "I/O error" for all).
const authScript = `A=$1; a=.rubino/agents; me=$a/$RUBINO_TASK_ID
r() { if out=$(sh -c "$1" 2>&1); then echo "$2 ok"; else echo "$2 ${out##*: }"; fi; }
r "/bin/echo 'steer hi' > $a/$A/ctl" steer-sibling
r "/bin/echo stop > $a/$A/ctl" stop-sibling
r "cat $a/$A/inbox" inbox-sibling
r "/bin/echo q > $a/$A/ask" ask-sibling
r "/bin/echo forged > $a/$A/result" result-sibling
r "/bin/echo 'steer me' > $me/ctl" steer-self
r "cat $me/inbox" inbox-self
exec 3<>$a/clone; echo 'subagent=sh prompt=exec sleep 1000' >&3; read c <&3; exec 3<&-
r "/bin/echo 'steer down' > $a/$c/ctl" steer-child
r "/bin/echo 'approve yes' > $a/$c/ctl" approve-child
r "/bin/echo 'stop' > $a/$c/ctl" stop-child
r "cat $a/$c/wait" wait-child
echo "owner $(cat $a/$c/owner) depth $(cat $a/$c/depth)"
`

// TestAgentsAuthorisationThroughMount checks the rules with real task
// processes: a task sees and acts on its own descendants only (a sibling
// is ENOENT); only the task itself asks, writes its result and reads its
// inbox; tasks never approve; the human acts on the tasks of its uid.
func TestAgentsAuthorisationThroughMount(t *testing.T) {
	m := newMount(t, nil, nil)
	a := m.spawnSh("exec sleep 1000")
	script := m.writeTmp("auth.sh", []byte(authScript))
	b := m.spawnSh("sh " + script + " " + a)
	got := m.cat(b + "/wait")
	want := "done\n" + strings.Join([]string{
		// A sibling is hidden: ENOENT (docs/DESIGN.md#task-authority).
		"steer-sibling Directory nonexistent",
		"stop-sibling Directory nonexistent",
		"inbox-sibling No such file or directory",
		"ask-sibling Directory nonexistent",
		"result-sibling Directory nonexistent",
		"steer-self Operation not permitted",
		"inbox-self ok",
		"steer-child ok",
		"approve-child Operation not permitted",
		"stop-child ok",
		"wait-child ok",
		"owner task-" + b + " depth 1",
	}, "\n") + "\n"
	if got != want {
		t.Fatalf("task %s's attempts:\n%s\nwant:\n%s", b, got, want)
	}
	if st := m.cat(a + "/status"); st != "running\n" {
		t.Fatalf("the sibling was touched: %s", st)
	}
	// The human: steers and stops anyone, but never asks for a task or
	// reads its inbox.
	if out := m.mustFail("/bin/echo 'human question' > .rubino/agents/" + a + "/ask"); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("human ask: %s", out)
	}
	if out := m.mustFail("cat .rubino/agents/" + a + "/answer"); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("human answer: %s", out)
	}
	m.mustSh("echo 'steer from the human' > .rubino/agents/" + a + "/ctl && echo stop > .rubino/agents/" + a + "/ctl")
	if got := m.cat(a + "/wait"); !strings.HasPrefix(got, "stopped\n") {
		t.Fatalf("human stop: %q", got)
	}
	if got := m.cat(a + "/activity"); !strings.Contains(got, "undelivered:\n  from the human\n") {
		t.Fatalf("the undelivered note is not reported: %q", got)
	}
}

// TestAgentsTeardownLeavesNoOrphans: tasks with background grandchildren,
// one ignoring SIGTERM, are all gone once the daemon has closed.
func TestAgentsTeardownLeavesNoOrphans(t *testing.T) {
	m := newMount(t, nil, nil)
	f1, f2 := m.agentsFifo("gc1"), m.agentsFifo("gc2")
	id1 := m.spawnSh(`sleep 1000 & echo $! > ` + f1 + `; wait`)
	id2 := m.spawnSh(`trap "" TERM; (trap "" TERM; exec sleep 1000) & echo $! > ` + f2 + `; wait`)
	var pids []int
	for _, f := range []string{f1, f2} {
		pid, err := strconv.Atoi(m.readFifo(f))
		if err != nil || gone(pid) {
			t.Fatalf("grandchild %d: %v", pid, err)
		}
		pids = append(pids, pid)
	}
	t1, _ := m.d.Tasks.Registry().Find(id1)
	t2, _ := m.d.Tasks.Registry().Find(id2)
	if err := m.d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range append(pids, t1.Pid, t2.Pid) {
		if !gone(pid) {
			t.Errorf("pid %d outlived the mount", pid)
		}
	}
	for _, id := range []string{id1, id2} {
		if tk, _ := m.d.Tasks.Registry().Find(id); tk.Status != tasks.StatusStopped {
			t.Errorf("task %s: %s", id, tk.Status)
		}
	}
}

// TestAgentsCLIEndToEnd drives tasks with the rubinofs binary: spawn, ls,
// show, tree, steer (the task reads its inbox with `rubinofs inbox`), a
// blocking `rubinofs ask` answered by `agents reply`, an approval, stop,
// wait, and the errors.
func TestAgentsCLIEndToEnd(t *testing.T) {
	m := newMount(t, nil, nil)
	bin := rubinofsBin(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := cli(t, m.tmp, append([]string{"agents"}, append(args[:1:1], append([]string{"--mount", m.mnt}, args[1:]...)...)...)...)
		if err != nil {
			t.Fatalf("rubinofs agents %v: %v\n%s", args, err, out)
		}
		return out
	}
	fail := func(args ...string) string {
		t.Helper()
		out, err := cli(t, m.tmp, append([]string{"agents"}, append(args[:1:1], append([]string{"--mount", m.mnt}, args[1:]...)...)...)...)
		if err == nil {
			t.Fatalf("rubinofs agents %v succeeded:\n%s", args, out)
		}
		return out
	}
	id := strings.TrimSpace(run("spawn", "echo", "hi from the cli"))
	if got := run("wait", id); got != "hi from the cli\n" {
		t.Fatalf("wait %q", got)
	}
	if got := run("ls"); !strings.Contains(got, id+"   done    sh        default  0") || !strings.Contains(got, "echo hi from the cli") {
		t.Fatalf("ls:\n%s", got)
	}
	if got := run("show", id); !strings.Contains(got, "status:    done") || !strings.Contains(got, "result:\n  hi from the cli\n") {
		t.Fatalf("show:\n%s", got)
	}
	// steer, read by the task with `rubinofs inbox`.
	ready, release := m.agentsFifo("ready"), m.agentsFifo("release")
	id2 := strings.TrimSpace(run("spawn", fmt.Sprintf("echo ready > %s; read x < %s; %s inbox", ready, release, bin)))
	m.readFifo(ready)
	run("steer", id2, "focus", "on", "tests")
	os.WriteFile(release, []byte("go\n"), 0)
	if got := run("wait", id2); got != "focus on tests\n" {
		t.Fatalf("inbox through the cli: %q", got)
	}
	// A blocking ask, answered with reply.
	id3 := strings.TrimSpace(run("spawn", bin+" ask which way; echo asked-done"))
	m.waitStatus(id3, tasks.StatusBlockedOnHuman)
	if got := run("tree"); !strings.Contains(got, "⛔ "+id3+" blocked_on_human") || !strings.Contains(got, "asks: which way") {
		t.Fatalf("tree:\n%s", got)
	}
	if got := run("ls"); !strings.Contains(got, "waiting on you:\n  "+id3+" blocked_on_human: which way\n") {
		t.Fatalf("ls while waiting:\n%s", got)
	}
	run("reply", id3, "left")
	if got := run("wait", id3); got != "left\nasked-done\n" {
		t.Fatalf("ask through the cli: %q", got)
	}
	// An approval, denied then approved.
	id4 := strings.TrimSpace(run("spawn", bin+` ask --approval "rm -rf build" may I clean || echo refused; `+bin+` ask --approval "make clean" && echo cleaning`))
	m.waitStatus(id4, tasks.StatusNeedsApproval)
	if got := m.cat("waiting"); got != id4+" needs_approval: rm -rf build — may I clean\n" {
		t.Fatalf("waiting %q", got)
	}
	run("approve", id4, "no", "use", "make", "clean")
	m.waitStatus(id4, tasks.StatusNeedsApproval)
	run("approve", id4, "yes")
	if got := run("wait", id4); got != "denied use make clean\nrefused\napproved\ncleaning\n" {
		t.Fatalf("approvals: %q", got)
	}
	// stop, and wait's exit status.
	id5 := strings.TrimSpace(run("spawn", "exec sleep 1000"))
	run("stop", id5)
	if got := fail("wait", id5); !strings.Contains(got, "task "+id5+" stopped: signal: terminated") {
		t.Fatalf("wait on a stopped task: %s", got)
	}
	id6 := strings.TrimSpace(run("spawn", "exec sleep 1000"))
	if got := run("stop", "--all"); got != "stopped 1 task(s)\n" {
		t.Fatalf("stop --all: %q", got)
	}
	if st := m.cat(id6 + "/status"); st != "stopped\n" {
		t.Fatalf("after stop --all: %s", st)
	}
	// Errors.
	if got := fail("steer", "999", "x"); !strings.Contains(got, "no such file") {
		t.Fatalf("unknown id: %s", got)
	}
	if got := fail("show", "../x"); !strings.Contains(got, "not a task id") {
		t.Fatalf("path as id: %s", got)
	}
	if got := fail("spawn", "--subagent", "nope", "x"); !strings.Contains(got, `unknown subagent "nope"`) {
		t.Fatalf("unknown subagent: %s", got)
	}
	if got := fail("reply", id, "late"); !strings.Contains(got, "has finished") {
		t.Fatalf("reply to a finished task: %s", got)
	}
	out, err := cli(t, m.tmp, "ask", "--mount", m.mnt, "who am I?")
	if err == nil || !strings.Contains(out, "not inside a task") {
		t.Fatalf("ask outside a task: %v %s", err, out)
	}
}
