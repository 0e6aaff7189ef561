package sessions

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startChild runs a process that waits until its stdin closes; stop it by
// closing the returned writer. It returns once the script printed its
// first line (it is set up).
func startChild(t *testing.T, script string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("child did not start: %v", err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { in.Close(); cmd.Wait() }) }
	t.Cleanup(stop)
	return cmd, stop
}

// TestSessionResolve: a root, its children and grandchildren resolve to its
// session; the caller (not under it) is default; after the root exits the
// session ends and OnEnd runs.
func TestSessionResolve(t *testing.T) {
	s := NewRegistry()
	ended := make(chan string, 1)
	s.OnEnd = func(name string) { ended <- name }
	if got := s.Resolve(uint32(os.Getpid())); got != Default {
		t.Fatalf("no sessions: %s", got)
	}
	// The root runs a grandchild (sh -> sh -> cat) so the walk has depth.
	root, stop := startChild(t, "sh -c 'echo ready; cat >/dev/null' & cat >/dev/null; kill $! 2>/dev/null; wait")
	if err := s.Register("agent-a", uint32(root.Process.Pid), "sh"); err != nil {
		t.Fatal(err)
	}
	if got := s.Resolve(uint32(root.Process.Pid)); got != "agent-a" {
		t.Fatalf("root resolves to %q", got)
	}
	kids := descendants(t, root.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("no descendants found")
	}
	checked := 0
	for _, k := range kids {
		got := s.Resolve(uint32(k))
		st, err := s.stat(uint32(k))
		if err != nil {
			continue // exited between the listing and the check
		}
		checked++
		if got != "agent-a" {
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", k))
			t.Errorf("descendant %d resolves to %q (stat %+v, root %d):\n%s", k, got, st, root.Process.Pid, status)
		}
	}
	if checked == 0 {
		t.Fatal("no live descendant to check")
	}
	if got := s.Resolve(uint32(os.Getpid())); got != Default {
		t.Errorf("the test process resolves to %q", got)
	}
	if err := s.Register("agent-a", uint32(os.Getpid()), ""); !errors.Is(err, ErrSessionExists) {
		t.Errorf("second session with the same name: %v", err)
	}
	if err := s.Register("default", uint32(os.Getpid()), ""); !errors.Is(err, ErrInvalidSession) {
		t.Errorf("a session named default: %v", err)
	}
	if err := s.Register("../x", uint32(os.Getpid()), ""); !errors.Is(err, ErrInvalidSession) {
		t.Errorf("a session named ../x: %v", err)
	}
	stop()
	select {
	case name := <-ended:
		if name != "agent-a" {
			t.Fatalf("ended %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end when its root exited")
	}
	if list := s.List(); len(list) != 1 || list[0].Live {
		t.Fatalf("after the end: %+v", list)
	}
}

// descendants lists the live descendants of pid.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		p := frontier[0]
		frontier = frontier[1:]
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p, p))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			var c int
			fmt.Sscan(f, &c)
			out = append(out, c)
			frontier = append(frontier, c)
		}
	}
	return out
}

// TestSessionThreads: a thread other than the leader resolves through its
// thread group (its own stat names the process's parent as ppid).
func TestSessionThreads(t *testing.T) {
	s := NewRegistry()
	if err := s.Register("self", uint32(os.Getpid()), "go test"); err != nil {
		t.Fatal(err)
	}
	defer s.End("self")
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) < 2 {
		t.Skip("the test process has one thread")
	}
	for _, e := range ents {
		var tid uint32
		fmt.Sscan(e.Name(), &tid)
		if got := s.Resolve(tid); got != "self" && tidAlive(tid) {
			t.Errorf("thread %d resolves to %q", tid, got)
		}
	}
}

func tidAlive(tid uint32) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
	return err == nil
}

// fakeProc writes a /proc-like tree: pid -> (ppid, start).
func fakeProc(t *testing.T, procs map[uint32][2]uint64) string {
	t.Helper()
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, fmt.Sprint(pid))
		os.MkdirAll(d, 0o755)
		fields := make([]string, 20)
		for i := range fields {
			fields[i] = "0"
		}
		fields[0], fields[1], fields[19] = "S", fmt.Sprint(p[0]), fmt.Sprint(p[1])
		os.WriteFile(filepath.Join(d, "stat"), []byte(fmt.Sprintf("%d (a (b) c) %s\n", pid, strings.Join(fields, " "))), 0o644)
		os.WriteFile(filepath.Join(d, "status"), []byte(fmt.Sprintf("Name:\ta\nTgid:\t%d\nPPid:\t%d\n", pid, p[0])), 0o644)
	}
	return dir
}

// TestSessionPidReuse: a root pid that was recycled (same pid, other start
// time) is not the root any more, and neither its new children nor the
// cache inherit the session.
func TestSessionPidReuse(t *testing.T) {
	s := NewRegistry()
	// Root 100 started at tick 50; its child 200 started at tick 60.
	s.procDir = fakeProc(t, map[uint32][2]uint64{100: {1, 50}, 200: {100, 60}})
	sess := &session{info: Info{Name: "a", RootPid: 100, RootStart: 50, Live: true}, stop: make(chan struct{})}
	s.byName["a"], s.byRoot[proc{100, 50}] = sess, sess
	s.count, s.gen = 1, 1
	if got := s.Resolve(200); got != "a" {
		t.Fatalf("child of the root: %q", got)
	}
	// The root exits and pid 100 is reused by a process started at tick
	// 900, parent of a new 200 (also reused).
	s.procDir = fakeProc(t, map[uint32][2]uint64{100: {1, 900}, 200: {100, 950}})
	if got := s.Resolve(200); got != Default {
		t.Fatalf("child of a recycled root pid: %q, want default", got)
	}
	// A child whose parent pid was reused by a younger process is orphaned.
	s.procDir = fakeProc(t, map[uint32][2]uint64{100: {1, 900}, 300: {100, 70}})
	if got := s.Resolve(300); got != Default {
		t.Fatalf("process whose parent pid was reused: %q, want default", got)
	}
}

// TestRegisterThreadID: a session registered by the id of a thread other
// than the leader (FUSE names the calling thread, and a Go program writes
// from any of its threads) is rooted at its process.
func TestRegisterThreadID(t *testing.T) {
	tid := otherThread(t, "")
	s := NewRegistry()
	if err := s.Register("threaded", uint32(tid), "test"); err != nil {
		t.Fatalf("Register by thread id %d: %v", tid, err)
	}
	info, ok := s.Lookup("threaded")
	if !ok || info.RootPid != uint32(os.Getpid()) {
		t.Fatalf("root pid %d (found %v), want the process %d", info.RootPid, ok, os.Getpid())
	}
	s.End("threaded")
}

// TestSessionBySid: a process reparented away from a root that leads its
// POSIX session (a task runs under setsid; a double fork leaves the tree,
// not the session) still resolves to the root's session; one that left the
// POSIX session too (setsid), or whose session leader is younger than
// itself, does not.
func TestSessionBySid(t *testing.T) {
	s := NewRegistry()
	dir := t.TempDir()
	// pid -> ppid, sid, start
	for pid, p := range map[uint32][3]uint64{100: {1, 100, 50}, 300: {1, 100, 70}, 400: {1, 400, 80}, 500: {1, 100, 40}, 600: {1, 200, 90}, 200: {1, 200, 10}} {
		d := filepath.Join(dir, fmt.Sprint(pid))
		os.MkdirAll(d, 0o755)
		fields := make([]string, 20)
		for i := range fields {
			fields[i] = "0"
		}
		fields[0], fields[1], fields[3], fields[19] = "S", fmt.Sprint(p[0]), fmt.Sprint(p[1]), fmt.Sprint(p[2])
		os.WriteFile(filepath.Join(d, "stat"), []byte(fmt.Sprintf("%d (a) %s\n", pid, strings.Join(fields, " "))), 0o644)
		os.WriteFile(filepath.Join(d, "status"), []byte(fmt.Sprintf("Name:\ta\nTgid:\t%d\nPPid:\t%d\n", pid, p[0])), 0o644)
	}
	s.procDir = dir
	sess := &session{info: Info{Name: "task-1", RootPid: 100, RootStart: 50, Live: true}, stop: make(chan struct{})}
	s.byName["task-1"], s.byRoot[proc{100, 50}] = sess, sess
	s.count, s.gen = 1, 1
	for pid, want := range map[uint32]Session{
		300: "task-1", // double-forked, still in the root's POSIX session
		400: Default,  // left the POSIX session too (setsid)
		500: Default,  // older than the session's leader: not started in it
		600: Default,  // the leader of its session is no root
	} {
		if got := s.Resolve(pid); got != want {
			t.Errorf("pid %d: %q, want %q", pid, got, want)
		}
	}
}

// otherThread returns the id of a thread of this process other than its
// leader: three goroutines lock threads of their own (at most one of them
// can hold the main thread) until the test ends, and stay locked as they
// return, so the runtime ends their threads. name, unless "", names the
// threads that are not the main one (PR_SET_NAME).
func otherThread(t *testing.T, name string) int {
	t.Helper()
	tids := make(chan int)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for range 3 {
		go func() {
			runtime.LockOSThread()
			if name != "" && unix.Gettid() != os.Getpid() {
				b := append([]byte(name), 0)
				unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0)
			}
			tids <- unix.Gettid()
			<-release
		}()
	}
	tid := 0
	for range 3 {
		if got := <-tids; got != os.Getpid() {
			tid = got
		}
	}
	return tid
}
