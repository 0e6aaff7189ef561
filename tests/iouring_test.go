package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/internal/mounttest"
	"github.com/rubinofs/rubinofs/tasks"
)

// withKernelURing turns the fuse module's enable_uring on for the test and
// back to what it was in its cleanup (mounttest.KernelURing). It skips the
// test on a kernel without FUSE over io_uring (before Linux 6.14, or built
// without it). Only mounts that ask for io_uring (cache.io_uring) use it
// while it is on.
func withKernelURing(t *testing.T) {
	t.Helper()
	requireFuse(t)
	if err := mounttest.KernelURing(t.Cleanup); errors.Is(err, os.ErrNotExist) {
		t.Skipf("this kernel has no FUSE over io_uring: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// TestIOURingTransport: a mount with cache.io_uring, on a kernel with FUSE
// over io_uring switched on, serves its requests on the ring threads
// (rubinofs_fuse_uring_requests_total grows, the transport gauge says
// io_uring), and real tools behave as over /dev/fuse: git init, add and
// commit, sed -i, grep -r, cp -r, tar, a Python write, xattrs, a guard
// refusal that leaves the file intact, rm -rf. The cleanup's unmount then
// ends every ring thread: newMount's descriptor check fails on any io_uring
// descriptor left behind, and a ring thread that never ended would hang it.
func TestIOURingTransport(t *testing.T) {
	withKernelURing(t)
	m := newMount(t, map[string]string{
		"src/a.go":    "package src\n\nfunc A() int { return 1 }\n",
		"src/b.go":    "package src\n\nfunc B() int { return 2 }\n",
		"unread.txt":  "keep me\n",
		"docs/r.md":   "# readme\n",
		"docs/big.md": strings.Repeat("line of text\n", 40000), // 520 KB: READs and WRITEs past one page
	}, func(c *daemon.Config) { c.IOURing = true })

	before := scrapeMetrics(t, m)
	if v, ok := metricValue(before, "rubinofs_fuse_transport", "transport", "io_uring"); !ok || v != 1 {
		t.Fatalf("rubinofs_fuse_transport{transport=\"io_uring\"} = %v, %v: the mount did not negotiate io_uring", v, ok)
	}
	n0, _ := metricValue(before, "rubinofs_fuse_uring_requests_total")

	m.mustSh(`git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm init`)
	m.mustSh(`sed -i 's/return 1/return 10/' src/a.go && grep -rn 'return 10' src >/dev/null`)
	m.mustSh(`cp -r src src2 && tar cf /tmp/rubinofs-iouring-$$.tar src2 && mkdir t && tar xf /tmp/rubinofs-iouring-$$.tar -C t && rm /tmp/rubinofs-iouring-$$.tar`)
	m.mustSh(`cmp docs/big.md docs/big.md && cat docs/big.md > docs/big2.md && cmp docs/big.md docs/big2.md`)
	m.mustSh(`/usr/bin/python3 -c "open('py.txt','w').write('x'*300000)" && test "$(wc -c < py.txt)" = 300000`)
	m.mustSh(`/usr/bin/python3 -c "import os; os.setxattr('src/b.go', 'user.k', b'v'); assert os.getxattr('src/b.go', 'user.k') == b'v'"`)
	if out := m.mustFail(`echo clobber > unread.txt`); !strings.Contains(out, "ermission denied") {
		t.Errorf("overwrite of an unread file: %q, want permission denied", out)
	}
	if got := m.readBacking("unread.txt"); got != "keep me\n" {
		t.Errorf("refused file now %q", got)
	}
	if got := m.mustSh(`git status --porcelain src`); got != " M src/a.go\n" {
		t.Errorf("git status: %q", got)
	}
	m.mustSh(`rm -rf src2 t`)
	if got := m.readBacking("src/a.go"); !strings.Contains(got, "return 10") {
		t.Errorf("src/a.go in the workspace: %q", got)
	}

	after := scrapeMetrics(t, m)
	n1, _ := metricValue(after, "rubinofs_fuse_uring_requests_total")
	// git, cp, tar and rm alone send thousands of requests; a few hundred
	// more than the start proves the ring carried the workload.
	if n1-n0 < 500 {
		t.Errorf("ring requests went from %v to %v: the workload did not travel over io_uring", n0, n1)
	}
}

// TestIOURingBlockingReadsLeaveQueueFree: reads of a control file that
// block until a task ends (agents/ID/wait) hold a ring entry each, for as
// long as the task runs. Eight of them from CPU 0, twice the threads a
// queue starts with, must not leave CPU 0's queue without a free entry: a
// stat from CPU 0 is answered while they wait (the queue starts another
// thread whenever its last free one takes a request). With a fixed number
// of threads the stat waits for the task, and this test ends the task
// after agentsFailsafe and fails. The waits start one after another: a
// burst of requests that finds no free entry waits in the kernel until an
// entry commits a reply (docs/DESIGN.md#fuse-io-uring).
func TestIOURingBlockingReadsLeaveQueueFree(t *testing.T) {
	withKernelURing(t)
	if err := exec.Command("taskset", "-c", "0", "true").Run(); err != nil {
		t.Skipf("cannot run on CPU 0 (taskset -c 0): %v", err)
	}
	m := newMount(t, map[string]string{"f": "x\n"}, func(c *daemon.Config) { c.IOURing = true })
	fifo := m.agentsFifo("go")
	id := m.spawnSh("read x < " + shq(fifo))
	m.waitStatus(id, tasks.StatusRunning)
	var released bool
	release := func() { // lets the task, and so every wait, end
		if !released {
			released = true
			if err := os.WriteFile(fifo, []byte("go\n"), 0); err != nil {
				t.Errorf("releasing the task: %v", err)
			}
		}
	}
	const waits = 8
	var cmds []*exec.Cmd
	t.Cleanup(func() {
		release()
		for _, c := range cmds {
			c.Wait()
		}
	})
	// One wait at a time, each in a FUSE request (its cat sleeps in
	// request_wait_answer, taskset having exec'd cat) before the next.
	deadline := time.Now().Add(agentsFailsafe)
	for range waits {
		c := exec.Command("taskset", "-c", "0", "cat", m.path(".rubino/agents/"+id+"/wait"))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		for {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", c.Process.Pid))
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.Process.Pid))
			if string(b) == "request_wait_answer" && strings.TrimSpace(string(comm)) == "cat" {
				break
			}
			if time.Now().After(deadline) {
				release()
				t.Fatalf("cat of agents/%s/wait (pid %d) never waited in a FUSE request (wchan %q)", id, c.Process.Pid, b)
			}
			time.Sleep(5 * time.Millisecond) // polls a state; no timing is asserted
		}
	}
	done := make(chan error, 1)
	go func() { done <- exec.Command("taskset", "-c", "0", "stat", m.path("f")).Run() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stat from CPU 0: %v", err)
		}
	case <-time.After(agentsFailsafe):
		release()
		<-done
		t.Fatalf("a stat from CPU 0 waited while %d blocking reads held CPU 0's queue", waits)
	}
	// The waits still wait: the stat was answered beside them.
	for _, c := range cmds {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", c.Process.Pid)); string(b) != "request_wait_answer" {
			t.Errorf("cat %d no longer waits (wchan %q) though the task runs", c.Process.Pid, b)
		}
	}
}
