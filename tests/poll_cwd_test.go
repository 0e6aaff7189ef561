package tests

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// TestPollKeepsCwd: with --watch=poll, a change inside a directory that is
// a process's working directory, seen by the poller (another host's, here
// written to the backing directory), leaves the process's getcwd(2)
// working: the poller drops the directory's inode, not its dentry
// (docs/DESIGN.md#poll-keeps-cwd).
func TestPollKeepsCwd(t *testing.T) {
	m := newMount(t, map[string]string{"d/f.txt": "v1\n"}, func(c *daemon.Config) { c.Cache.WatchMode = "poll" })
	cmd := exec.Command("python3", "-c", `import os, sys
os.chdir(sys.argv[1])
print("in", flush=True)
sys.stdin.readline()
try:
    print(os.getcwd(), flush=True)
except OSError as e:
    print("getcwd:", e, flush=True)
`, m.path("d"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "in\n" {
		t.Fatalf("worker: %q, %v", line, err)
	}
	mark := m.appliedMark()
	m.writeBacking("d/g.txt", "another host's\n")
	m.waitApplied(mark, "d")
	if _, err := stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	line, err := out.ReadString('\n')
	if got := strings.TrimSpace(line); err != nil || got != m.path("d") {
		t.Fatalf("getcwd in d after the poller saw d change: %q, %v; want %s", got, err, m.path("d"))
	}
}

// TestPollerStopsAtClose: a --watch=poll mount's poller has stopped when
// the daemon's Close returns: its passes open the backing tree (the
// root's descriptor showed as leaked by a mount whose poller took a pass
// after the unmount, and the poller went on scanning a removed tree).
func TestPollerStopsAtClose(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "v1\n"}, func(c *daemon.Config) { c.Cache.WatchMode = "poll" })
	p := m.d.Poller
	if p == nil {
		t.Fatal("a --watch=poll mount has no poller")
	}
	if err := m.d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("the poller still runs after the daemon's Close returned")
	}
}
