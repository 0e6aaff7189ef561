package sessions

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSessionsHarnessRoot: a harness registration is shown and answers
// HarnessRoot with the root's (pid, start time); a plain one does not.
func TestSessionsHarnessRoot(t *testing.T) {
	s := NewRegistry()
	cmd := exec.Command("sleep", "1000")
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	must(t, s.RegisterAs("h", pid, "claude", true))
	must(t, s.Register("plain", uint32(os.Getpid()), "sh"))
	root, ok := s.HarnessRoot("h")
	facts := readFactsKept(pid)
	if !ok || root != facts.Proc {
		t.Fatalf("HarnessRoot(h) = %v, %v; want %v", root, ok, facts.Proc)
	}
	if _, ok := s.HarnessRoot("plain"); ok {
		t.Fatal("a plain session is in harness mode")
	}
	if info, _ := s.Lookup("h"); !info.Harness {
		t.Fatal("info does not show harness")
	}
	s.End("h")
	s.End("plain")
	if _, ok := s.HarnessRoot("h"); ok {
		t.Fatal("an ended session is still in harness mode")
	}
}

// TestReadFactsFollowsExec: a thread's cached facts are read afresh once
// it has exec'd another program (its comm changed).
func TestReadFactsFollowsExec(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read x; exec sleep 1000")
	in, err := cmd.StdinPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	if f := ReadFacts(pid); !f.Known || f.Comm != "sh" {
		t.Fatalf("facts before exec: %+v", f)
	}
	in.Write([]byte("go\n"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/comm")
		if string(b) == "sleep\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sh did not exec sleep")
		}
		time.Sleep(time.Millisecond)
	}
	if f := ReadFacts(pid); !f.Known || f.Comm != "sleep" || f.Exe != "sleep" {
		t.Fatalf("facts after exec: %+v", f)
	}
}

// TestReadFactsOfThread: the facts of a thread other than its process's
// leader are the process's (its pid and its leader's command name), even
// when the thread has a name of its own; the leader's own are the same.
func TestReadFactsOfThread(t *testing.T) {
	tid := otherThread(t, "rubino-thr")
	if isGroupLeader(uint32(tid)) || !isGroupLeader(uint32(os.Getpid())) {
		t.Fatalf("isGroupLeader: thread %d %v, process %d %v", tid, isGroupLeader(uint32(tid)), os.Getpid(), isGroupLeader(uint32(os.Getpid())))
	}
	b, err := os.ReadFile("/proc/self/comm")
	must(t, err)
	want := strings.TrimSpace(string(b))
	for _, id := range []int{tid, os.Getpid()} {
		f := readFactsFresh(uint32(id))
		if !f.Known || f.Proc.Pid != uint32(os.Getpid()) || f.Comm != want {
			t.Fatalf("facts of %d: %+v; want pid %d, comm %q", id, f, os.Getpid(), want)
		}
	}
}

// BenchmarkReadFactsFresh measures the facts of a process read afresh
// from /proc (a new process's first request: its stat, exe link and
// cmdline, and whether it leads its thread group), on this test's own
// thread group.
func BenchmarkReadFactsFresh(b *testing.B) {
	s := &Registry{procDir: "/proc"}
	tid := uint32(os.Getpid())
	for b.Loop() {
		st, err := s.stat(tid)
		if err != nil {
			b.Fatal(err)
		}
		if f := readFactsUncached(s, tid, st); !f.Known {
			b.Fatal("facts unknown")
		}
	}
}

// readSmall reads a file shorter than its buffer into the buffer, one that
// fills the buffer whole (os.ReadFile), and a missing one as ENOENT.
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	long := filepath.Join(dir, "long")
	must(t, os.WriteFile(small, []byte("Tgid:\t42\n"), 0o644))
	want := strings.Repeat("0123456789abcdef", 100) // 1,600 bytes
	must(t, os.WriteFile(long, []byte(want), 0o644))
	var buf [64]byte
	if b, err := readSmall(small, buf[:]); err != nil || string(b) != "Tgid:\t42\n" {
		t.Fatalf("small: %q %v", b, err)
	}
	if b, err := readSmall(long, buf[:]); err != nil || string(b) != want {
		t.Fatalf("long: %d bytes, %v; want %d", len(b), err, len(want))
	}
	if _, err := readSmall(filepath.Join(dir, "missing"), buf[:]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v, want ENOENT", err)
	}
	// A /proc file, as the callers read them: this process's status.
	b, err := readSmall("/proc/self/status", buf[:])
	if err != nil || !strings.Contains(string(b), "Tgid:\t"+strconv.Itoa(os.Getpid())+"\n") {
		t.Fatalf("/proc/self/status: %v, %q", err, b)
	}
}
