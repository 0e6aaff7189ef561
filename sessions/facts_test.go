package sessions

import (
	"os"
	"os/exec"
	"strconv"
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
	facts := readFacts("/proc", pid)
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
