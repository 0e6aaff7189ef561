package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// failsafe bounds every wait of these tests; it is a hang guard, never a
// timing assertion.
const failsafe = 60 * time.Second

func newRunner(t *testing.T, adjust func(*Config)) *Runner {
	t.Helper()
	cfg := Config{Mount: t.TempDir(), LogDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	if adjust != nil {
		adjust(&cfg)
	}
	rn, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rn.Close() })
	return rn
}

func spawn(t *testing.T, rn *Runner, prompt string) Task {
	t.Helper()
	tk, err := rn.Spawn(Spec{Subagent: "sh", Prompt: prompt}, "", "default", 0)
	if err != nil {
		t.Fatalf("spawn %q: %v", prompt, err)
	}
	return tk
}

// waitDone waits for the task to be terminal and returns it.
func waitDone(t *testing.T, rn *Runner, id string) Task {
	t.Helper()
	select {
	case <-rn.Registry().Done(id):
	case <-time.After(failsafe):
		t.Fatalf("task %s never finished", id)
	}
	tk, _ := rn.Registry().Find(id)
	return tk
}

// waitFor waits until cond holds for task id, woken by registry changes.
func waitFor(t *testing.T, r *Registry, id string, what string, cond func(Task) bool) Task {
	t.Helper()
	deadline := time.After(failsafe)
	for {
		ch := r.Changed()
		if tk, ok := r.Find(id); ok && cond(tk) {
			return tk
		}
		select {
		case <-ch:
		case <-deadline:
			tk, _ := r.Find(id)
			t.Fatalf("task %s: never %s (status %s)", id, what, tk.Status)
		}
	}
}

// fifo makes a named pipe in a temporary directory.
func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readFifo blocks until a writer wrote a line to p and closed it.
func readFifo(t *testing.T, p string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(p)
		if err != nil {
			got <- "error: " + err.Error()
		}
		got <- strings.TrimSpace(string(b))
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(failsafe):
		t.Fatalf("nobody wrote %s", p)
		return ""
	}
}

func TestRunnerShellTaskDoneWithEnvAndCwd(t *testing.T) {
	rn := newRunner(t, nil)
	tk := spawn(t, rn, `echo "id=$RUBINO_TASK_ID session=$RUBINO_SESSION mount=$RUBINO_MOUNT"; echo "cwd=$(pwd)"; echo warn >&2; echo last`)
	if tk.Status != StatusRunning || tk.Pid == 0 || tk.OwnerSession != "default" {
		t.Fatalf("spawned: %+v", tk)
	}
	got := waitDone(t, rn, tk.ID)
	want := fmt.Sprintf("id=%s session=task-%s mount=%s\ncwd=%s\nlast", tk.ID, tk.ID, rn.Config().Mount, rn.Config().Mount)
	if got.Status != StatusDone || got.Result != want || got.Error != "" {
		t.Fatalf("done: status %s result %q error %q\nwant %q", got.Status, got.Result, got.Error, want)
	}
	if got.Output[len(got.Output)-1] != "" || !strings.Contains(strings.Join(got.Output, "\n"), "warn") {
		t.Fatalf("output tail %q", got.Output)
	}
	log, err := os.ReadFile(rn.LogPath(tk.ID))
	if err != nil || !strings.Contains(string(log), "warn") || !strings.Contains(string(log), "last") {
		t.Fatalf("log %q %v", log, err)
	}
	if a := strings.Join(got.Activity, "|"); !strings.Contains(a, "started pid") || !strings.Contains(a, "exit 0") {
		t.Fatalf("activity %q", a)
	}
}

func TestRunnerFailureCarriesExitAndStderr(t *testing.T) {
	rn := newRunner(t, nil)
	tk := spawn(t, rn, `echo partial; echo "it broke" >&2; exit 3`)
	got := waitDone(t, rn, tk.ID)
	if got.Status != StatusFailed || got.Error != "exit status 3: it broke" || got.Result != "" {
		t.Fatalf("failed: %+v", got)
	}
}

func TestRunnerConfiguredTypes(t *testing.T) {
	rn := newRunner(t, func(c *Config) {
		c.Subagents = map[string]SubagentType{
			"cat":  {Command: []string{"/bin/cat"}, Stdin: true},
			"echo": {Command: []string{"/bin/sh", "-c", `echo "$1|$2|$3|$FOO"`, "x", "{id}", "[{prompt}]", "{mount}"}, Env: []string{"FOO=bar"}},
		}
	})
	a, err := rn.Spawn(Spec{Subagent: "cat", Prompt: "from stdin\nline 2"}, "", "default", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rn.Spawn(Spec{Subagent: "echo", Prompt: "p {id} q"}, "", "default", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitDone(t, rn, a.ID); got.Status != StatusDone || got.Result != "from stdin\nline 2" {
		t.Fatalf("stdin type: %+v", got)
	}
	want := fmt.Sprintf("%s|[p {id} q]|%s|bar", b.ID, rn.Config().Mount)
	if got := waitDone(t, rn, b.ID); got.Status != StatusDone || got.Result != want {
		t.Fatalf("argument type: %q, want %q", got.Result, want)
	}
	if _, err := rn.Spawn(Spec{Subagent: "nope", Prompt: "x"}, "", "default", 0); !errors.Is(err, ErrUnknownSubagent) || !strings.Contains(err.Error(), "cat, echo, sh") {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := New(Config{Mount: "/", Subagents: map[string]SubagentType{"x": {Command: []string{"prog"}}}}); err == nil {
		t.Fatal("a type without {prompt} or stdin was accepted")
	}
	if _, err := New(Config{Mount: "/", Subagents: map[string]SubagentType{"sh": {Command: []string{"x", "{prompt}"}}}}); err == nil {
		t.Fatal("sh was redefined")
	}
}

func TestRunnerDeclaredResultWins(t *testing.T) {
	rn := newRunner(t, nil)
	f := fifo(t)
	tk := spawn(t, rn, "echo noise; read x < "+f)
	if err := rn.writeResult(ctltree.Caller{Session: SessionName(tk.ID)}, tk.ID, []byte("the answer")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f, []byte("go\n"), 0)
	if got := waitDone(t, rn, tk.ID); got.Status != StatusDone || got.Result != "the answer" {
		t.Fatalf("%+v", got)
	}
}

// TestRunnerStopAndTeardownLeaveNoOrphans: a stopped task, a task whose
// leader exits, and tasks alive at CancelAll (one ignoring SIGTERM) all
// leave no process of theirs behind, background grandchildren included.
func TestRunnerStopAndTeardownLeaveNoOrphans(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.StopGrace = Duration(time.Hour) })
	grandchild := func(prompt string) (Task, int) {
		t.Helper()
		f := fifo(t)
		tk := spawn(t, rn, fmt.Sprintf(prompt, f))
		pid, err := strconv.Atoi(readFifo(t, f))
		if err != nil || !alive(pid) {
			t.Fatalf("grandchild pid: %v", err)
		}
		return tk, pid
	}
	// The leader exits 0 and leaves a background sleeper: it is killed.
	release := fifo(t)
	exited, pid1 := grandchild(`sleep 1000 & echo $! > %s; read x < ` + release)
	os.WriteFile(release, []byte("go\n"), 0)
	if got := waitDone(t, rn, exited.ID); got.Status != StatusDone {
		t.Fatalf("exited: %+v", got)
	}
	if alive(pid1) {
		t.Fatal("the grandchild of a finished task survived")
	}
	// A stopped task: SIGTERM reaches the whole group.
	stopped, pid2 := grandchild(`sleep 1000 & echo $! > %s; wait`)
	rn.Registry().StopEntry(stopped.ID)
	if got := waitDone(t, rn, stopped.ID); got.Status != StatusStopped || !strings.Contains(got.Error, "signal") {
		t.Fatalf("stopped: %+v", got)
	}
	if alive(pid2) {
		t.Fatal("the grandchild of a stopped task survived")
	}
	// Teardown: one plain, one ignoring SIGTERM (the grace is an hour, so
	// only CancelAll's SIGKILL can end it), one in another process group
	// of the task's session.
	plain, pid3 := grandchild(`sleep 1000 & echo $! > %s; wait`)
	stubborn, pid4 := grandchild(`trap "" TERM; sleep 1000 & echo $! > %s; wait`)
	pids := []int{pid3, pid4}
	ids := []string{plain.ID, stubborn.ID}
	if _, err := exec.LookPath("perl"); err == nil {
		moved, pid5 := grandchild(`perl -e 'setpgrp(0, 0); open(F, ">", $ARGV[0]); print F "$$\n"; close(F); exec "sleep", "1000"' %s & wait`)
		if st, _ := readProcStat(pid5); st.Pgrp == moved.Pid || st.Session != moved.Pid {
			t.Fatalf("the grandchild is not in its own group of the task's session: %+v", st)
		}
		pids, ids = append(pids, pid5), append(ids, moved.ID)
	}
	rn.CancelAll()
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d survived CancelAll", pid)
		}
	}
	for _, id := range ids {
		if got, _ := rn.Registry().Find(id); got.Status != StatusStopped {
			t.Errorf("task %s after CancelAll: %s", id, got.Status)
		}
	}
	if _, err := rn.Spawn(Spec{Subagent: "sh", Prompt: "true"}, "", "default", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("spawn after CancelAll: %v", err)
	}
}

// fakeSessions records registrations and can refuse them.
type fakeSessions struct {
	mu     sync.Mutex
	events []string
	refuse bool
}

func (s *fakeSessions) Register(name string, pid uint32, cmd string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse {
		return errors.New("no more sessions")
	}
	s.events = append(s.events, fmt.Sprintf("register %s %d %s", name, pid, cmd))
	return nil
}

func (s *fakeSessions) End(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "end "+name)
	return nil
}

func (s *fakeSessions) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

func TestRunnerRegistersSessionsBeforeTheTaskRuns(t *testing.T) {
	sess := &fakeSessions{}
	rn := newRunner(t, func(c *Config) { c.Sessions = sess })
	f, release := fifo(t), fifo(t)
	prompt := "echo ran > " + f + "; read x < " + release
	tk := spawn(t, rn, prompt)
	// The task is running its prompt, and holds until released (so its end
	// cannot race the check): it must be registered, and not yet ended.
	// (A prefix: the register shortens a long command line, as the
	// prompt's with a long TMPDIR.)
	readFifo(t, f)
	if ev := sess.log(); len(ev) != 1 || !strings.HasPrefix(ev[0], fmt.Sprintf("register task-%s %d /bin/sh -c echo ran > ", tk.ID, tk.Pid)) {
		t.Fatalf("before the prompt ran: %q", ev)
	}
	if err := os.WriteFile(release, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	waitDone(t, rn, tk.ID)
	if ev := sess.log(); len(ev) != 2 || ev[1] != "end task-"+tk.ID {
		t.Fatalf("after: %q", ev)
	}
	// With Sessions set, identity is by session name only.
	if _, ok := rn.CallerTask(ctltree.Caller{Pid: uint32(os.Getpid()), Session: "default"}); ok {
		t.Fatal("a non-task caller identified as a task")
	}
	// A refused registration fails the task before its prompt runs.
	sess.refuse = true
	marker := filepath.Join(rn.Config().Mount, "marker")
	bad := spawn(t, rn, "touch "+marker)
	got := waitDone(t, rn, bad.ID)
	if got.Status != StatusFailed || !strings.Contains(got.Error, "registering session task-"+bad.ID) {
		t.Fatalf("refused registration: %+v", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the prompt ran without a session")
	}
}

func TestRunnerIdentifiesTaskProcessesBySessionID(t *testing.T) {
	rn := newRunner(t, nil)
	f := fifo(t)
	tk := spawn(t, rn, `sleep 1000 & echo $! > `+f+`; wait`)
	pid, _ := strconv.Atoi(readFifo(t, f))
	if id, ok := rn.CallerTask(ctltree.Caller{Pid: uint32(pid), Session: "default"}); !ok || id != tk.ID {
		t.Fatalf("grandchild identified as %q %v", id, ok)
	}
	if _, ok := rn.CallerTask(ctltree.Caller{Pid: uint32(os.Getpid()), Session: "default"}); ok {
		t.Fatal("the test process identified as a task")
	}
	if id, ok := rn.CallerTask(ctltree.Caller{Session: "task-42"}); !ok || id != "42" {
		t.Fatal("session name identity")
	}
	rn.Registry().StopEntry(tk.ID)
	waitDone(t, rn, tk.ID)
	if _, ok := rn.CallerTask(ctltree.Caller{Pid: uint32(pid)}); ok {
		t.Fatal("a finished task's pid still identifies")
	}
}

// TestRunnerChildrenStopWithTheirOwner: a task's live children are stopped
// when it finishes.
func TestRunnerChildrenStopWithTheirOwner(t *testing.T) {
	rn := newRunner(t, nil)
	f := fifo(t)
	parent := spawn(t, rn, "read x < "+f)
	kid, err := rn.Spawn(Spec{Subagent: "sh", Prompt: "exec sleep 1000"}, parent.ID, "ignored", 0)
	if err != nil || kid.Depth != 1 || kid.OwnerSession != "task-"+parent.ID {
		t.Fatalf("kid %+v %v", kid, err)
	}
	os.WriteFile(f, []byte("go\n"), 0)
	if got := waitDone(t, rn, parent.ID); got.Status != StatusDone {
		t.Fatalf("parent %+v", got)
	}
	if got := waitDone(t, rn, kid.ID); got.Status != StatusStopped {
		t.Fatalf("kid %+v", got)
	}
}

func TestRunnerPrunesFinished(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.KeepFinished = 2 })
	var ids []string
	for i := 0; i < 4; i++ {
		tk := spawn(t, rn, "true")
		waitDone(t, rn, tk.ID)
		ids = append(ids, tk.ID)
	}
	waitFor(t, rn.Registry(), ids[3], "pruned", func(Task) bool { return len(rn.Registry().List()) == 2 })
	if _, ok := rn.Registry().Find(ids[0]); ok {
		t.Fatal("the oldest was kept")
	}
	waitGone(t, rn.LogPath(ids[0]))
}

// TestOpenTakesItsConfig: Open reads no agents.json of its own (package
// config does, and the daemon hands the result over); Over fills the zero
// fields from the state file's, and ParseConfig refuses unknown fields.
func TestOpenTakesItsConfig(t *testing.T) {
	state := t.TempDir()
	os.WriteFile(filepath.Join(state, ConfigFileName), []byte(`{"max_depth":4}`), 0o600)
	rn, err := Open(Config{Caps: Caps{MaxConcurrentTotal: 6}, Mount: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}, state)
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Close()
	if c := rn.Config(); c.MaxDepth != DefaultCaps().MaxDepth || c.MaxConcurrentTotal != 6 || c.LogDir != filepath.Join(state, "agents") {
		t.Fatalf("config %+v: Open read the state file", c)
	}
	file, err := ParseConfig([]byte(`{"max_depth":4,"max_concurrent_total":5,"ask_timeout":"30s",
		"subagents":{"echo":{"command":["echo","{prompt}"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Caps: Caps{MaxConcurrentTotal: 6}, Subagents: map[string]SubagentType{"own": {Command: []string{"own", "{prompt}"}}}}.Over(file)
	if c.MaxDepth != 4 || c.MaxConcurrentTotal != 6 || c.MaxChildrenPerNode != 0 || time.Duration(c.AskTimeout) != 30*time.Second || len(c.Subagents) != 2 {
		t.Fatalf("merged %+v", c)
	}
	if _, err := ParseConfig([]byte(`{"max_dept":4}`)); err == nil || !strings.Contains(err.Error(), "max_dept") {
		t.Fatalf("unknown field: %v", err)
	}
}

// TestRunnerAwaitWakesAtTeardown: a reader parked on an ask returns when
// the runner is torn down.
func TestRunnerAwaitWakesAtTeardown(t *testing.T) {
	rn := newRunner(t, nil)
	tk := spawn(t, rn, "exec sleep 1000")
	self := ctltree.Caller{Session: SessionName(tk.ID)}
	if err := rn.ask(self, tk.ID, []byte("anyone?")); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := rn.readAnswer(context.Background(), self, tk.ID); errc <- err }()
	rn.CancelAll()
	select {
	case err := <-errc:
		if ctltree.ErrnoOf(err) != syscall.ECANCELED {
			t.Fatalf("parked reader got %v", err)
		}
	case <-time.After(failsafe):
		t.Fatal("the parked reader never woke")
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	st, err := readProcStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

// TestRunnerTaskLogBounded: a task that writes 20 MB leaves a log of at
// most taskLogMax bytes, which starts with the count of the bytes dropped
// and ends with the task's last output; the log served is its tail.
func TestRunnerTaskLogBounded(t *testing.T) {
	rn := newRunner(t, nil)
	const total = 20_000_000
	tk := spawn(t, rn, fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; echo; echo the-end`, total))
	if got := waitDone(t, rn, tk.ID); got.Status != StatusDone {
		t.Fatalf("task: %+v", got)
	}
	log, err := os.ReadFile(rn.LogPath(tk.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(log) > taskLogMax {
		t.Errorf("the log holds %d bytes, past its bound of %d", len(log), taskLogMax)
	}
	head, rest, _ := strings.Cut(string(log), "\n")
	var dropped int
	if _, err := fmt.Sscanf(head, "[rubinofs: %d earlier bytes", &dropped); err != nil {
		t.Fatalf("the log starts %q, not with the count of bytes dropped", head)
	}
	if written := total + len("\nthe-end\n"); dropped+len(rest) != written {
		t.Errorf("%d bytes dropped and %d kept, want %d in all", dropped, len(rest), written)
	}
	if !strings.HasSuffix(rest, strings.Repeat("x", 100)+"\nthe-end\n") {
		t.Errorf("the log does not end with the task's last output: %q", rest[max(0, len(rest)-120):])
	}
	served, err := rn.readLog(tk.ID)
	if err != nil || !strings.HasSuffix(string(served), "\nthe-end\n") || len(served) > logTailMax+200 {
		t.Errorf("served log: %d bytes, %v", len(served), err)
	}
}
