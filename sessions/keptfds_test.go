package sessions

import (
	"bufio"
	"io"
	"os/exec"
	"testing"
)

// TestReadProcStatKeptFd reads a child's /proc/<pid>/stat and its process
// facts through the kept descriptors across its exec (the new command name
// shows, as a fresh read would show it) and after its exit (the read fails:
// a kept descriptor never serves a dead process, nor a later one given the
// same number).
func TestReadProcStatKeptFd(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read line; exec cat")
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
	pid := uint32(cmd.Process.Pid)
	s := &Registry{procDir: "/proc"}
	before, err := s.stat(pid)
	if err != nil || before.comm != "sh" {
		t.Fatalf("stat before exec: %+v, %v; want comm sh", before, err)
	}
	if f := readFactsKept(pid); !f.Known || f.Comm != "sh" {
		t.Fatalf("facts before exec: %+v; want comm sh", f)
	}
	if !kept(statFds, pid) || !kept(commFds, pid) {
		t.Fatal("the descriptors of the child's stat and comm were not kept")
	}
	if !keptAlive(pid, before.start) || keptAlive(pid, before.start+1) {
		t.Fatal("keptAlive does not tell the child by its start time")
	}
	// The shell execs cat once it has read a line; cat echoing the next
	// line shows the exec is done.
	io.WriteString(in, "go\nping\n")
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("cat: %q, %v", line, err)
	}
	after, err := s.stat(pid)
	if err != nil || after.comm != "cat" || after.start != before.start {
		t.Fatalf("stat after exec: %+v, %v; want comm cat, start %d", after, err, before.start)
	}
	if f := readFactsKept(pid); !f.Known || f.Comm != "cat" || f.Proc.Start != before.start {
		t.Fatalf("facts after exec: %+v; want comm cat, start %d", f, before.start)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if st, err := s.stat(pid); err == nil {
		t.Fatalf("stat of a reaped child: %+v, want an error", st)
	}
	if keptAlive(pid, before.start) {
		t.Fatal("keptAlive of a reaped child")
	}
	if f := readFactsKept(pid); f.Known {
		t.Fatalf("facts of a reaped child: %+v, want unknown", f)
	}
	if kept(statFds, pid) || kept(commFds, pid) {
		t.Fatal("a descriptor of a reaped child is still kept")
	}
}

// kept reports whether k keeps a descriptor for pid.
func kept(k *keptFds, pid uint32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.m[pid]
	return ok
}
