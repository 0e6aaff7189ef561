package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// The control files, driven at the ctltree level with simulated callers.

var human = as("default")

// as is a caller of session name that is this test process (a spawner
// must be a real process: Runner.SpawnerOf).
func as(session string) ctltree.Caller {
	return ctltree.Caller{Session: session, Pid: uint32(os.Getpid()), Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}
}

func asTask(id string) ctltree.Caller { return as(SessionName(id)) }

// resolve walks the agents tree as fusefs does.
func resolve(rn *Runner, c ctltree.Caller, path string) ctltree.Node {
	var n ctltree.Node = rn.Node()
	for _, name := range strings.Split(path, "/") {
		d, ok := n.(*ctltree.Dir)
		if !ok {
			return nil
		}
		if n = d.Child(c, name); n == nil {
			return nil
		}
	}
	return n
}

func ctlFile(t *testing.T, rn *Runner, c ctltree.Caller, path string) *ctltree.File {
	t.Helper()
	f, ok := resolve(rn, c, path).(*ctltree.File)
	if !ok {
		t.Fatalf("%s: not a file", path)
	}
	return f
}

// lookupFile resolves path for c: ENOENT when a lookup on the way fails
// (a task c may not see is hidden).
func lookupFile(t *testing.T, rn *Runner, c ctltree.Caller, path string) (*ctltree.File, error) {
	t.Helper()
	n := resolve(rn, c, path)
	if n == nil {
		return nil, ctltree.Errorf(syscall.ENOENT, "%s: no such entry", path)
	}
	f, ok := n.(*ctltree.File)
	if !ok {
		t.Fatalf("%s: not a file", path)
	}
	return f, nil
}

func rd(t *testing.T, rn *Runner, c ctltree.Caller, path string) (string, error) {
	t.Helper()
	f, err := lookupFile(t, rn, c, path)
	if err != nil {
		return "", err
	}
	b, err := f.Read(context.Background(), c)
	return string(b), err
}

func mustRead(t *testing.T, rn *Runner, c ctltree.Caller, path string) string {
	t.Helper()
	s, err := rd(t, rn, c, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return s
}

func wr(t *testing.T, rn *Runner, c ctltree.Caller, path, data string) error {
	t.Helper()
	f, err := lookupFile(t, rn, c, path)
	if err != nil {
		return err
	}
	switch f.Kind {
	case ctltree.Ctl:
		return f.Write(c, []byte(data))
	case ctltree.Append:
		return f.Append(c, []byte(data))
	}
	t.Fatalf("%s: kind %d is not writable", path, f.Kind)
	return nil
}

// refused reports a refusal: EPERM, or ENOENT for a hidden task.
func refused(err error) bool {
	e := ctltree.ErrnoOf(err)
	return e == syscall.EPERM || e == syscall.ENOENT
}

func cloneAs(t *testing.T, rn *Runner, c ctltree.Caller, spec string) (string, error) {
	t.Helper()
	return ctlFile(t, rn, c, "clone").Clone(c, []byte(spec))
}

func mustClone(t *testing.T, rn *Runner, c ctltree.Caller, prompt string) string {
	t.Helper()
	id, err := cloneAs(t, rn, c, `{"subagent":"sh","prompt":`+quote(prompt)+`}`)
	if err != nil {
		t.Fatalf("clone %q: %v", prompt, err)
	}
	return id
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

func wantErrno(t *testing.T, err error, want syscall.Errno, contains string) {
	t.Helper()
	if got := ctltree.ErrnoOf(err); got != want {
		t.Fatalf("errno %v (%v), want %v", got, err, want)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("reason %q lacks %q", err.Error(), contains)
	}
}

func TestFilesCloneAndRead(t *testing.T) {
	rn := newRunner(t, nil)
	id, err := cloneAs(t, rn, human, "# a comment\nsubagent = sh\nprompt = echo one; echo two\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, rn, human, id+"/wait"); got != "done\none\ntwo\n" {
		t.Fatalf("wait %q", got)
	}
	for path, want := range map[string]string{
		"status": "done\n", "subagent": "sh\n", "prompt": "echo one; echo two\n", "owner": "default\n",
		"depth": "0\n", "result": "one\ntwo\n", "error": "", "output": "one\ntwo\n", "log": "one\ntwo\n",
		"question": "", "approval": "", "ctl": id + "\n",
	} {
		if got := mustRead(t, rn, human, id+"/"+path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if s := mustRead(t, rn, human, id+"/started"); !strings.HasSuffix(s, "Z\n") {
		t.Errorf("started %q", s)
	}
	if s := mustRead(t, rn, human, id+"/finished"); s == "" {
		t.Error("finished empty")
	}
	if s := mustRead(t, rn, human, id+"/activity"); !strings.Contains(s, "tools: 0\n") || !strings.Contains(s, "  exit 0\n") {
		t.Errorf("activity %q", s)
	}
	if s := mustRead(t, rn, human, "tree"); s != "✓ "+id+" done sh (default): echo one; echo two\n" {
		t.Errorf("tree %q", s)
	}
	if s := mustRead(t, rn, human, "README"); !strings.Contains(s, "clone") {
		t.Error("README")
	}
	names := rn.Node().Names(human)
	if strings.Join(names, ",") != "README,clone,tree,waiting,"+id {
		t.Errorf("names %v", names)
	}
	// A failing task.
	id2 := mustClone(t, rn, human, "echo bad >&2; exit 4")
	if got := mustRead(t, rn, human, id2+"/wait"); got != "failed\nexit status 4: bad\n" {
		t.Fatalf("wait %q", got)
	}
}

func TestFilesBadInput(t *testing.T) {
	rn := newRunner(t, nil)
	for spec, reason := range map[string]string{
		"":                                     "empty spec",
		"{":                                    "want one JSON object",
		`{"subagent":"sh"}`:                    "prompt is required",
		`{"subagent":"sh","prompt":"x","x":1}`: "unknown field",
		`{"subagent":"sh","prompt":"x"} {}`:    "trailing data",
		"subagent=sh":                          "prompt is required",
		"subagent=sh\nsubagent=sh\nprompt=x":   "given twice",
		"prompt=x\nowner=3":                    "unknown key",
		"just a prompt":                        "want key=value",
		"subagent=../x\nprompt=x":              "malformed subagent",
		"subagent=gpt\nprompt=x":               "unknown subagent",
	} {
		_, err := cloneAs(t, rn, human, spec)
		wantErrno(t, err, syscall.EINVAL, reason)
	}
	_, err := cloneAs(t, rn, human, "subagent=sh\nprompt="+strings.Repeat("x", MaxSpec))
	wantErrno(t, err, syscall.EFBIG, "exceeds")
	if len(rn.Registry().List()) != 0 {
		t.Fatal("a bad spec created a task")
	}
	id := mustClone(t, rn, human, "exec sleep 1000")
	for cmd, reason := range map[string]string{
		"":                 "empty command",
		"halt":             "unknown command",
		"stop now":         "takes no argument",
		"steer":            "needs TEXT",
		"reply   ":         "needs TEXT",
		"approve maybe":    "want yes or no",
		"steer bad\x00":    "NUL",
		"steer \xff\xfe":   "UTF-8",
		"approve yes fine": "no pending approval",
		"reply 42":         "no pending question",
	} {
		wantErrno(t, wr(t, rn, human, id+"/ctl", cmd), syscall.EINVAL, reason)
	}
	wantErrno(t, wr(t, rn, human, id+"/ctl", "steer "+strings.Repeat("x", MaxCtl)), syscall.EFBIG, "exceeds")
	// Ids are never paths; unknown ids are ENOENT.
	for _, name := range []string{"..", ".", "../" + id, "0" + id, "-1", "1e3", id + "/", "999"} {
		if resolve(rn, human, name) != nil {
			t.Errorf("%q resolved", name)
		}
	}
	rn.Registry().StopEntry(id)
	waitDone(t, rn, id)
	wantErrno(t, wr(t, rn, human, id+"/ctl", "steer late"), syscall.EINVAL, "not delivered")
	if err := wr(t, rn, human, id+"/ctl", "stop"); err != nil {
		t.Fatalf("stop of a finished task: %v", err)
	}
	// A file of a task removed after it was resolved reports ENOENT.
	f := ctlFile(t, rn, human, id+"/status")
	rn.Registry().Remove(id)
	_, err = f.Read(context.Background(), human)
	wantErrno(t, err, syscall.ENOENT, "no task")
}

func TestFilesCapsRefuseWithEAGAIN(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.Caps = Caps{MaxDepth: 2, MaxChildrenPerNode: 2, MaxConcurrentTotal: 3} })
	a := mustClone(t, rn, human, "exec sleep 1000")
	mustClone(t, rn, human, "exec sleep 1000")
	_, err := cloneAs(t, rn, human, "subagent=sh\nprompt=true")
	wantErrno(t, err, syscall.EAGAIN, "per_owner: uid 0 already has 2 live children")
	// A task spawns under itself: depth 1, owner task-A.
	b, err := cloneAs(t, rn, asTask(a), "subagent=sh\nprompt=exec sleep 1000")
	if err != nil {
		t.Fatal(err)
	}
	if mustRead(t, rn, human, b+"/owner") != "task-"+a+"\n" || mustRead(t, rn, human, b+"/depth") != "1\n" {
		t.Fatal("owner/depth of a task-spawned child")
	}
	_, err = cloneAs(t, rn, asTask(b), "subagent=sh\nprompt=true")
	wantErrno(t, err, syscall.EAGAIN, "depth: ")
	_, err = cloneAs(t, rn, as("other"), "subagent=sh\nprompt=true")
	wantErrno(t, err, syscall.EAGAIN, "global: ")
	if mustRead(t, rn, human, "tree") != "● 1 running sh (default): exec sleep 1000\n  ● 3 running sh: exec sleep 1000\n● 2 running sh (default): exec sleep 1000\n" {
		t.Fatalf("tree %q", mustRead(t, rn, human, "tree"))
	}
}

// TestFilesAuthorisation checks every rule: a task acts on its own
// descendants only, only the task itself asks, reads its answer and inbox,
// writes its result and activity and requests approvals, only non-task
// callers approve, and a session caller acts on the trees spawned from
// its session only (TestFilesAuthorityTable has the uids).
func TestFilesAuthorisation(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.Caps = Caps{MaxDepth: 3} })
	a := mustClone(t, rn, human, "exec sleep 1000")
	b, _ := cloneAs(t, rn, asTask(a), "subagent=sh\nprompt=exec sleep 1000")
	c, _ := cloneAs(t, rn, asTask(b), "subagent=sh\nprompt=exec sleep 1000")
	x := mustClone(t, rn, as("claude-1"), "exec sleep 1000")
	if c == "" || b == "" {
		t.Fatal("spawn")
	}
	allowed := func(who ctltree.Caller, path, data string) {
		t.Helper()
		if err := wr(t, rn, who, path, data); err != nil {
			t.Errorf("%s writing %q to %s: %v", who.Session, data, path, err)
		}
	}
	// denied: EPERM, or ENOENT where the task is hidden from the caller.
	denied := func(who ctltree.Caller, path, data string) {
		t.Helper()
		if err := wr(t, rn, who, path, data); !refused(err) {
			t.Errorf("%s writing %q to %s: %v, want EPERM or ENOENT", who.Session, data, path, err)
		}
	}
	// steer and probe: ancestors and non-task callers.
	allowed(asTask(a), b+"/ctl", "steer from a")
	allowed(asTask(a), c+"/ctl", "steer from grandparent")
	allowed(asTask(b), c+"/ctl", "probe")
	allowed(human, x+"/ctl", "steer from the human")
	allowed(ctltree.Caller{Session: "claude-1"}, x+"/ctl", "steer from its session")
	if err := wr(t, rn, ctltree.Caller{Session: "claude-1"}, a+"/ctl", "steer from another session"); ctltree.ErrnoOf(err) != syscall.ENOENT {
		t.Errorf("another session steering a: %v, want ENOENT", err)
	}
	denied(asTask(b), a+"/ctl", "steer up")
	denied(asTask(a), a+"/ctl", "steer self")
	denied(asTask(x), b+"/ctl", "steer across")
	denied(asTask(c), b+"/ctl", "probe")
	denied(asTask(x), a+"/ctl", "stop")
	denied(asTask(b), a+"/ctl", "stop")
	// ask: only the task itself.
	denied(human, c+"/ask", "what?")
	denied(asTask(b), c+"/ask", "what?")
	allowed(asTask(c), c+"/ask", "what now?")
	// reply: ancestors and non-task callers, not others.
	denied(asTask(x), c+"/ctl", "reply no")
	denied(asTask(c), c+"/ctl", "reply myself")
	// The owner got the question in its inbox.
	if got := mustRead(t, rn, asTask(b), b+"/inbox"); got != "from a\n[child "+c+" asks] what now?\n" {
		t.Fatalf("owner inbox %q", got)
	}
	allowed(asTask(a), c+"/ctl", "reply from the grandparent")
	// inbox and answer: only the task itself.
	for _, who := range []ctltree.Caller{human, asTask(a), asTask(b), asTask(x)} {
		if _, err := rd(t, rn, who, c+"/inbox"); !refused(err) {
			t.Errorf("%s reading c's inbox: %v", who.Session, err)
		}
		if _, err := rd(t, rn, who, c+"/answer"); !refused(err) {
			t.Errorf("%s reading c's answer: %v", who.Session, err)
		}
	}
	if got := mustRead(t, rn, asTask(c), c+"/answer"); got != "from the grandparent\n" {
		t.Fatalf("answer %q", got)
	}
	if got := mustRead(t, rn, asTask(c), c+"/inbox"); got != "from grandparent\n[probe] report your progress\n[parent answer] from the grandparent\n" {
		t.Fatalf("inbox %q", got)
	}
	if got := mustRead(t, rn, asTask(c), c+"/inbox"); got != "" {
		t.Fatalf("inbox not drained: %q", got)
	}
	// result and activity: only the task itself.
	denied(human, c+"/result", "forged")
	denied(asTask(a), c+"/result", "forged")
	allowed(asTask(c), c+"/result", "mine")
	denied(human, c+"/activity", "started forged\n")
	allowed(asTask(c), c+"/activity", "started grep\nfinished grep: 3 hits\n")
	if s := mustRead(t, rn, human, c+"/activity"); !strings.Contains(s, "tools: 1\nlast: grep\n") || !strings.Contains(s, "  grep: 3 hits\n") || !strings.Contains(s, "probes: 1\n") {
		t.Fatalf("activity %q", s)
	}
	if err := wr(t, rn, asTask(c), c+"/activity", "started ok\nbogus line\n"); ctltree.ErrnoOf(err) != syscall.EINVAL {
		t.Fatalf("bad activity: %v", err)
	}
	if s := mustRead(t, rn, human, c+"/activity"); strings.Contains(s, "last: ok") {
		t.Fatal("a rejected activity write was half applied")
	}
	// approvals: the task itself requests; only non-task callers decide.
	denied(human, c+"/approval", "may I?")
	allowed(asTask(c), c+"/approval", `{"question":"may I?","command":"rm -rf build"}`)
	if s := mustRead(t, rn, human, "waiting"); s != c+" needs_approval: rm -rf build — may I?\n" {
		t.Fatalf("waiting %q", s)
	}
	denied(asTask(a), c+"/ctl", "approve yes")
	allowed(human, c+"/ctl", "approve yes go ahead")
	if s := mustRead(t, rn, asTask(c), c+"/approval"); s != "state approved\nquestion may I?\ncommand rm -rf build\nnote go ahead\n" {
		t.Fatalf("approval %q", s)
	}
	// stop: a task stops its descendants.
	allowed(asTask(a), c+"/ctl", "stop")
	if got := waitDone(t, rn, c); got.Status != StatusStopped {
		t.Fatalf("c %s", got.Status)
	}
	// A task that finished cannot spawn.
	if _, err := cloneAs(t, rn, asTask(c), "subagent=sh\nprompt=true"); ctltree.ErrnoOf(err) != syscall.EPERM {
		t.Fatalf("spawn by a finished task: %v", err)
	}
}

// TestFilesBlockingAskAnsweredByReply: the task parks reading answer; a
// reply wakes it with the answer, which is also in its inbox, prefixed.
func TestFilesBlockingAskAnsweredByReply(t *testing.T) {
	rn := newRunner(t, nil)
	id := mustClone(t, rn, human, "exec sleep 1000")
	self := asTask(id)
	if _, err := rd(t, rn, self, id+"/answer"); ctltree.ErrnoOf(err) != syscall.EINVAL {
		t.Fatalf("answer before any ask: %v", err)
	}
	if err := wr(t, rn, self, id+"/ask", "which branch?\n"); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, wr(t, rn, self, id+"/ask", "again?"), syscall.EINVAL, "already has a pending question")
	if mustRead(t, rn, human, id+"/status") != "blocked_on_human\n" || mustRead(t, rn, human, id+"/question") != "which branch?\n" {
		t.Fatal("not blocked on the human")
	}
	if s := mustRead(t, rn, human, "waiting"); s != id+" blocked_on_human: which branch?\n" {
		t.Fatalf("waiting %q", s)
	}
	if s := mustRead(t, rn, human, "tree"); !strings.Contains(s, "⛔ "+id+" blocked_on_human") || !strings.Contains(s, "asks: which branch?") {
		t.Fatalf("tree %q", s)
	}
	got := make(chan string, 1)
	go func() {
		s, err := rd(t, rn, self, id+"/answer")
		if err != nil {
			s = err.Error()
		}
		got <- s
	}()
	if err := wr(t, rn, human, id+"/ctl", "reply main, please"); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "main, please\n" {
			t.Fatalf("answer %q", s)
		}
	case <-time.After(failsafe):
		t.Fatal("the parked reader never woke")
	}
	if mustRead(t, rn, human, id+"/status") != "running\n" || mustRead(t, rn, human, "waiting") != "" {
		t.Fatal("still blocked after the reply")
	}
	// A late reader sees the same answer; the inbox has the copy.
	if s := mustRead(t, rn, self, id+"/answer"); s != "main, please\n" {
		t.Fatalf("late answer %q", s)
	}
	if s := mustRead(t, rn, self, id+"/inbox"); s != AnswerNotePrefix+"main, please\n" {
		t.Fatalf("inbox %q", s)
	}
	// A non-blocking ask: the answer arrives in the inbox only.
	if err := wr(t, rn, self, id+"/ask", `{"question":"later?","blocking":false}`); err != nil {
		t.Fatal(err)
	}
	if tk, _ := rn.Registry().Find(id); tk.AskBlocking || tk.Question != "later?" {
		t.Fatalf("non-blocking ask %+v", tk)
	}
	wr(t, rn, human, id+"/ctl", "reply sure")
	if s := mustRead(t, rn, self, id+"/inbox"); s != AnswerNotePrefix+"sure\n" {
		t.Fatalf("inbox %q", s)
	}
}

// TestFilesAskCancelledByStopAndTimeout: a stop wakes a parked ask with
// ECANCELED; an unanswered ask times out with ETIMEDOUT and is closed.
func TestFilesAskCancelledByStopAndTimeout(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.AskTimeout = Duration(time.Millisecond) })
	id := mustClone(t, rn, human, "exec sleep 1000")
	self := asTask(id)
	wr(t, rn, self, id+"/ask", "anyone?")
	_, err := rd(t, rn, self, id+"/answer")
	wantErrno(t, err, syscall.ETIMEDOUT, "timed out")
	if mustRead(t, rn, human, id+"/status") != "running\n" || mustRead(t, rn, human, id+"/question") != "" {
		t.Fatal("a timed-out ask stayed open")
	}
	wantErrno(t, wr(t, rn, human, id+"/ctl", "reply late"), syscall.EINVAL, "no pending question")

	rn2 := newRunner(t, nil)
	id2 := mustClone(t, rn2, human, "exec sleep 1000")
	wr(t, rn2, asTask(id2), id2+"/ask", "anyone?")
	errc := make(chan error, 1)
	go func() { _, err := rd(t, rn2, asTask(id2), id2+"/answer"); errc <- err }()
	wr(t, rn2, human, id2+"/ctl", "stop")
	select {
	case err := <-errc:
		wantErrno(t, err, syscall.ECANCELED, "cancelled")
	case <-time.After(failsafe):
		t.Fatal("stop did not wake the ask")
	}
	if got := waitDone(t, rn2, id2); got.Status != StatusStopped {
		t.Fatalf("%s", got.Status)
	}
}

// TestFilesStopCascadeThreeLevels: stopping the top task through its ctl
// wakes a blocking ask two levels down and stops all three.
func TestFilesStopCascadeThreeLevels(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.Caps = Caps{MaxDepth: 3} })
	a := mustClone(t, rn, human, "exec sleep 1000")
	b, _ := cloneAs(t, rn, asTask(a), "subagent=sh\nprompt=exec sleep 1000")
	c, err := cloneAs(t, rn, asTask(b), "subagent=sh\nprompt=exec sleep 1000")
	if err != nil {
		t.Fatal(err)
	}
	if mustRead(t, rn, human, c+"/depth") != "2\n" {
		t.Fatal("depth")
	}
	wr(t, rn, asTask(c), c+"/ask", "deep question")
	if mustRead(t, rn, human, c+"/status") != "blocked_on_parent\n" {
		t.Fatal("c not blocked on its parent")
	}
	if mustRead(t, rn, human, "waiting") != "" {
		t.Fatal("a question for the parent is listed as waiting on the human")
	}
	errc := make(chan error, 1)
	go func() { _, err := rd(t, rn, asTask(c), c+"/answer"); errc <- err }()
	if err := wr(t, rn, human, a+"/ctl", "stop"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		wantErrno(t, err, syscall.ECANCELED, "cancelled")
	case <-time.After(failsafe):
		t.Fatal("the cascade did not wake the grandchild's ask")
	}
	for _, id := range []string{a, b, c} {
		if got := mustRead(t, rn, human, id+"/wait"); got != "stopped\nsignal: terminated\n" {
			t.Errorf("task %s: %q", id, got)
		}
	}
}

// TestFilesNonBlockingReads: a read of an O_NONBLOCK handle
// (ctltree.NonBlocking) never parks on wait, answer or approval: with
// nothing decided it is EAGAIN at once and leaves the ask or approval
// open; once decided the same read returns the outcome.
func TestFilesNonBlockingReads(t *testing.T) {
	rn := newRunner(t, nil)
	id := mustClone(t, rn, human, "exec sleep 1000")
	self := asTask(id)
	nb := ctltree.WithNonBlocking(context.Background())
	read := func(c ctltree.Caller, path string) (string, error) {
		t.Helper()
		b, err := ctlFile(t, rn, c, path).Read(nb, c)
		return string(b), err
	}
	wantAgain := func(c ctltree.Caller, path string) {
		t.Helper()
		if s, err := read(c, path); ctltree.ErrnoOf(err) != syscall.EAGAIN {
			t.Fatalf("non-blocking read of %s: %q %v, want EAGAIN", path, s, err)
		}
	}
	wantAgain(human, id+"/wait")

	if err := wr(t, rn, self, id+"/ask", "which branch?\n"); err != nil {
		t.Fatal(err)
	}
	wantAgain(self, id+"/answer")
	if mustRead(t, rn, human, id+"/question") != "which branch?\n" {
		t.Fatal("EAGAIN closed the ask")
	}
	if err := wr(t, rn, human, id+"/ctl", "reply main"); err != nil {
		t.Fatal(err)
	}
	if s, err := read(self, id+"/answer"); err != nil || s != "main\n" {
		t.Fatalf("non-blocking answer after the reply: %q %v", s, err)
	}

	if err := wr(t, rn, self, id+"/approval", `{"question":"may I?","command":"make"}`); err != nil {
		t.Fatal(err)
	}
	wantAgain(self, id+"/approval")
	if err := wr(t, rn, human, id+"/ctl", "approve yes"); err != nil {
		t.Fatal(err)
	}
	if s, err := read(self, id+"/approval"); err != nil || !strings.HasPrefix(s, "state approved\n") {
		t.Fatalf("non-blocking approval after the decision: %q %v", s, err)
	}

	if err := wr(t, rn, human, id+"/ctl", "stop"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, rn, id)
	if s, err := read(human, id+"/wait"); err != nil || !strings.HasPrefix(s, "stopped\n") {
		t.Fatalf("non-blocking wait of a stopped task: %q %v", s, err)
	}
}

// TestCtlErrnos pins the errno every registry and runner error reaches a
// control-file caller with, and the reason without the bad-input prefix.
func TestCtlErrnos(t *testing.T) {
	for _, c := range []struct {
		err    error
		errno  syscall.Errno
		reason string
	}{
		{fmt.Errorf("%w: 9", ErrNotFound), syscall.ENOENT, "no such task: 9"},
		{ErrTooLarge, syscall.EFBIG, "input too large"},
		{badf("spec: x"), syscall.EINVAL, "spec: x"},
		{ErrUnknownSubagent, syscall.EINVAL, "unknown subagent"},
		{ErrNotRunning, syscall.EINVAL, "the task is not running"},
		{ErrGateBusy, syscall.EINVAL, ErrGateBusy.Error()},
		{ErrOwnerNotLive, syscall.EPERM, ErrOwnerNotLive.Error()},
		{&CapError{RefusedGlobal, "8 live"}, syscall.EAGAIN, "global: 8 live"},
		{ErrClosed, syscall.EAGAIN, ErrClosed.Error()},
		{ErrCancelled, syscall.ECANCELED, ErrCancelled.Error()},
		{ErrTimeout, syscall.ETIMEDOUT, ErrTimeout.Error()},
		{context.Canceled, syscall.EINTR, "context canceled"},
		{context.DeadlineExceeded, syscall.EINTR, "context deadline exceeded"},
		{errors.New("disk on fire"), syscall.EIO, "disk on fire"},
		{ctltree.Errorf(syscall.EROFS, "as is"), syscall.EROFS, "as is"},
	} {
		got := ctlErrnos.Map(c.err)
		if ctltree.ErrnoOf(got) != c.errno || got.Error() != c.reason {
			t.Errorf("%v: got %v %q, want %v %q", c.err, ctltree.ErrnoOf(got), got.Error(), c.errno, c.reason)
		}
	}
	if ctlErrnos.Map(nil) != nil {
		t.Error("nil maps to an error")
	}
}
