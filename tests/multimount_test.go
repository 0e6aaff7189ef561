package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// newMounts mounts n rubinofs daemons over one backing directory, each with
// its own mountpoint and state directory: how n hosts see one shared
// filesystem. files are created in the backing directory first; adjust
// edits every mount's config.
func newMounts(t *testing.T, n int, files map[string]string, adjust func(*daemon.Config)) []*mount {
	t.Helper()
	first := newMount(t, files, adjust)
	ms := []*mount{first}
	for i := 1; i < n; i++ {
		ms = append(ms, newMount(t, nil, func(c *daemon.Config) {
			c.Workspace = first.ws
			if adjust != nil {
				adjust(c)
			}
		}))
	}
	return ms
}

// counterWorker is a read-increment-write loop on one counter file that
// retries when refused: it prints its successful writes and refusals.
const counterWorker = `
import os, sys, errno
path, rounds = sys.argv[1], int(sys.argv[2])
ok = refused = 0
while ok < rounds:
    with open(path) as f:
        s = f.read().strip()
    if not s:
        continue  # read between another writer's truncate and its write
    try:
        with open(path, "w") as f:
            f.write(str(int(s) + 1) + "\n")
        ok += 1
    except (PermissionError, BlockingIOError):
        refused += 1
print(ok, refused)
`

// counterStress runs perMount sessions on each mount, rounds successful
// increments each, and returns the successful writes, the refusals and
// the final counter.
func counterStress(t *testing.T, ms []*mount, perMount, rounds int) (total, refused, final int) {
	t.Helper()
	worker := ms[0].tmp + "/worker.py"
	if err := os.WriteFile(worker, []byte(counterWorker), 0o644); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for _, m := range ms {
		for i := 0; i < perMount; i++ {
			cmd := exec.Command(rubinofsBin(t), "run", "--mount", m.mnt, "--", "python3", worker, m.path("counter"), fmt.Sprint(rounds))
			cmd.Dir, cmd.Env = m.tmp, testEnv(m.tmp)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
		var ok, r int
		if _, err := fmt.Sscan(outs[i].String(), &ok, &r); err != nil {
			t.Fatalf("worker %d output %q", i, outs[i])
		}
		total, refused = total+ok, refused+r
	}
	return total, refused, atoi(strings.TrimSpace(ms[0].readBacking("counter")))
}

// TestMultiMountCounterInotify: six sessions, three on each of two mounts
// over one backing directory, increment one counter with the watcher on
// (inotify): no update is lost.
func TestMultiMountCounterInotify(t *testing.T) {
	multiMountCounter(t, nil)
}

// TestMultiMountCounterNoWatch is TestMultiMountCounterInotify with no
// watcher on either mount (short kernel cache timeouts, no report of the
// other mount's changes at all).
func TestMultiMountCounterNoWatch(t *testing.T) {
	multiMountCounter(t, func(c *daemon.Config) { c.Cache.Watch = false; c.Cache.CacheTimeout = time.Second })
}

// TestMultiMountCounterPoll is TestMultiMountCounterInotify with
// --watch=poll on both mounts: no inotify, a poller reports the other
// mount's changes, and the mounts are shared (close-to-open) by it.
func TestMultiMountCounterPoll(t *testing.T) {
	multiMountCounter(t, func(c *daemon.Config) { c.Cache.WatchMode = "poll" })
}

// TestMultiMountCounterThree is the counter stress over three mounts, two
// sessions on each, the third one polling.
func TestMultiMountCounterThree(t *testing.T) {
	i := 0
	ms := newMounts(t, 3, map[string]string{"counter": "0\n"}, func(c *daemon.Config) {
		c.Cache.Shared = true
		if i++; i == 3 {
			c.Cache.WatchMode = "poll"
		}
	})
	total, refused, final := counterStress(t, ms, 2, 30)
	if final != total {
		t.Fatalf("final counter %d after %d successful writes: %d updates lost", final, total, total-final)
	}
	t.Logf("%d writes, %d refused and retried, 0 lost", total, refused)
}

// TestMultiMountPollInvalidates: with --watch=poll, a change made through
// another mount is reported by the poller's next pass, and the bytes read
// through this mount afterwards are the new ones, although nothing told
// the kernel at the time of the change.
func TestMultiMountPollInvalidates(t *testing.T) {
	ms := newMounts(t, 2, map[string]string{"f.txt": "v1\n"}, func(c *daemon.Config) { c.Cache.WatchMode = "poll" })
	a, b := ms[0], ms[1]
	if st := a.status(); st["poller"] == nil || st["watcher"] != nil {
		t.Fatalf("status: poller %v, watcher %v: want the poller only", st["poller"], st["watcher"])
	}
	if got := a.rawRead("f.txt"); got != "v1\n" {
		t.Fatalf("first read %q", got)
	}
	mark := a.appliedMark()
	b.mustSh("cat f.txt >/dev/null && echo 'v2 longer' > f.txt")
	a.waitApplied(mark, "f.txt")
	if got := a.rawRead("f.txt"); got != "v2 longer\n" {
		t.Fatalf("after the poller's pass: %q, want v2", got)
	}
	// Its own change is not reported to itself as another mount's.
	mark = a.appliedMark()
	a.mustSh("cat f.txt >/dev/null && echo v3 > f.txt")
	a.waitPasses(2)
	for _, evs := range a.mt.Applied()[mark:] {
		for _, ev := range evs {
			if ev.Path == "f.txt" {
				t.Fatalf("the mount's own write was reported as another's: %v", ev)
			}
		}
	}
}

// waitPasses waits until the mount's poller has taken n passes more than
// when called (its .rubino/status counter): every change made before the
// call has been seen by a pass after it. It fails after a generous
// deadline.
func (m *mount) waitPasses(n float64) {
	m.t.Helper()
	passes := func() float64 {
		p, _ := m.status()["poller"].(map[string]any)
		v, _ := p["passes"].(float64)
		return v
	}
	want := passes() + n
	deadline := time.Now().Add(30 * time.Second)
	for passes() < want {
		if time.Now().After(deadline) {
			m.t.Fatalf("the poller took no %v passes", n)
		}
		runtime.Gosched()
	}
}

// multiMountCounter runs the counter stress over two shared mounts
// (Config.Shared, as --shared or a network backing sets it), three
// sessions on each, 40 increments each, and fails on any lost update.
func multiMountCounter(t *testing.T, adjust func(*daemon.Config)) {
	ms := newMounts(t, 2, map[string]string{"counter": "0\n"}, func(c *daemon.Config) {
		c.Cache.Shared = true
		if adjust != nil {
			adjust(c)
		}
	})
	total, refused, final := counterStress(t, ms, 3, 40)
	if final != total {
		t.Fatalf("final counter %d after %d successful writes: %d updates lost", final, total, total-final)
	}
	t.Logf("%d writes, %d refused and retried, 0 lost", total, refused)
}

// TestMultiMountStaleRefused: with two and three mounts over one backing
// directory, with and without the watcher: session A reads through mount
// 1, session B writes through mount 2 (and 3), and A's write through mount
// 1 is refused as stale, the backing file keeping B's bytes.
func TestMultiMountStaleRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		watch bool
		poll  bool
	}{{"two-inotify", 2, true, false}, {"three-inotify", 3, true, false}, {"two-nowatch", 2, false, false},
		{"three-nowatch", 3, false, false}, {"two-poll", 2, true, true}, {"three-poll", 3, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newMounts(t, tc.n, map[string]string{"f.txt": "v1\n"}, func(c *daemon.Config) {
				if !tc.watch {
					c.Cache.Watch, c.Cache.CacheTimeout = false, time.Second
				}
				if tc.poll {
					c.Cache.WatchMode = "poll"
				}
			})
			a := ms[0]
			a.mustSh("cat f.txt >/dev/null")
			for i, m := range ms[1:] {
				m.mustSh(fmt.Sprintf("cat f.txt >/dev/null && printf 'v%d\\n' > f.txt", i+2))
			}
			want := fmt.Sprintf("v%d\n", tc.n)
			a.mustFail("echo lost > f.txt")
			if got := a.readBacking("f.txt"); got != want {
				t.Fatalf("backing file %q after the refused write, want %q", got, want)
			}
		})
	}
}

// TestMultiMountCrossLockBusy: while another holder (here the test, as
// another host would) keeps the cross-mount lock byte of a backing file
// locked, a guarded write through the mount waits a bounded time and is
// refused with EAGAIN, the file unchanged; once released the write goes
// through. An application's own whole-file fcntl lock through the mount
// does not meet the cross-mount lock: its holder writes under it.
func TestMultiMountCrossLockBusy(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "v1\n"}, func(c *daemon.Config) { c.Cache.Shared = true })
	m.mustSh("cat f.txt >/dev/null")
	fd, err := unix.Open(m.backing("f.txt"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 1 << 62, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	out := m.mustFail("echo v2 > f.txt")
	if !strings.Contains(out, "Resource temporarily unavailable") {
		t.Fatalf("refusal %q, want EAGAIN", out)
	}
	if got := m.readBacking("f.txt"); got != "v1\n" {
		t.Fatalf("backing %q after the refusal", got)
	}
	lk.Type = unix.F_UNLCK
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	m.mustSh("echo v2 > f.txt")
	// An application's whole-file lock through the mount, then its write.
	m.mustSh(`python3 -c '
import fcntl, os
fd = os.open("f.txt", os.O_RDWR)
os.read(fd, 100)
fcntl.lockf(fd, fcntl.LOCK_EX)
os.pwrite(fd, b"v3\n", 0)
fcntl.lockf(fd, fcntl.LOCK_UN)
'`)
	if got := m.readBacking("f.txt"); got != "v3\n" {
		t.Fatalf("backing %q after the locked write", got)
	}
}

// TestMultiMountAutoPollOnFuse: with --watch=auto (the default) over a
// backing directory on a FUSE filesystem (here another rubinofs mount,
// as JuiceFS would be), the daemon polls instead of using inotify, and a
// change made through the lower mount shows through the upper one after
// a pass.
func TestMultiMountAutoPollOnFuse(t *testing.T) {
	lower := newMount(t, map[string]string{"f.txt": "v1\n"}, func(c *daemon.Config) { c.Guard.Mode = guard.ModeOff })
	upper := newMount(t, nil, func(c *daemon.Config) { c.Workspace = lower.mnt; c.Cache.WatchMode = "auto" })
	if st := upper.status(); st["poller"] == nil || st["watcher"] != nil {
		t.Fatalf("status: poller %v, watcher %v: want the poller only", st["poller"], st["watcher"])
	}
	if got := upper.rawRead("f.txt"); got != "v1\n" {
		t.Fatalf("first read %q", got)
	}
	mark := upper.appliedMark()
	lower.mustSh("echo 'v2 longer' > f.txt")
	upper.waitApplied(mark, "f.txt")
	if got := upper.rawRead("f.txt"); got != "v2 longer\n" {
		t.Fatalf("after the poller's pass: %q", got)
	}
}

// TestMultiMountPeerDefault: two mounts of one local backing directory
// with the default options (no --shared, inotify) find each other through
// the host's registry of backing roots and are both shared ("peer" in
// .rubino/status): the counter stress loses no update, and a write
// derived from a read older than the other mount's write is refused.
func TestMultiMountPeerDefault(t *testing.T) { peerCounter(t, nil) }

// TestMultiMountPeerNoWatch is TestMultiMountPeerDefault without a
// watcher on either mount (--watch=off): nothing reports the other
// mount's changes, and detection alone makes both shared.
func TestMultiMountPeerNoWatch(t *testing.T) {
	peerCounter(t, func(c *daemon.Config) { c.Cache.Watch, c.Cache.CacheTimeout = false, time.Second })
}

// peerCounter mounts one backing directory twice with adjust's options
// and without --shared, checks that both mounts show "peer", that a stale
// write through the first is refused, and that the counter stress loses
// no update.
func peerCounter(t *testing.T, adjust func(*daemon.Config)) {
	ms := newMounts(t, 2, map[string]string{"counter": "0\n", "f.txt": "v1\n"}, adjust)
	for i, m := range ms {
		if got := m.sharedMode(); got != "peer" {
			t.Fatalf("mount %d: shared %q, want peer", i+1, got)
		}
	}
	a, b := ms[0], ms[1]
	a.mustSh("cat f.txt >/dev/null")
	b.mustSh("cat f.txt >/dev/null && echo v2 > f.txt")
	a.mustFail("echo lost > f.txt")
	if got := a.readBacking("f.txt"); got != "v2\n" {
		t.Fatalf("backing file %q after the refused write, want v2", got)
	}
	total, refused, final := counterStress(t, ms, 3, 40)
	if final != total {
		t.Fatalf("final counter %d after %d successful writes: %d updates lost", final, total, total-final)
	}
	t.Logf("%d writes, %d refused and retried, 0 lost", total, refused)
}

// TestMultiMountPeerNested: a mount whose backing root is a directory
// inside another mount's backing root, and that other mount, see each
// other as peers; a mount of an unrelated directory sees neither.
func TestMultiMountPeerNested(t *testing.T) {
	outer := newMount(t, map[string]string{"sub/deep/f.txt": "v1\n"}, nil)
	if got := outer.sharedMode(); got != "off" {
		t.Fatalf("outer alone: shared %q, want off", got)
	}
	inner := newMount(t, nil, func(c *daemon.Config) { c.Workspace = outer.backing("sub/deep") })
	if got := inner.sharedMode(); got != "peer" {
		t.Fatalf("inner: shared %q, want peer (a mount above it)", got)
	}
	if got := outer.sharedMode(); got != "peer" {
		t.Fatalf("outer: shared %q, want peer (a mount beneath it)", got)
	}
	other := newMount(t, nil, nil)
	if got := other.sharedMode(); got != "off" {
		t.Fatalf("unrelated mount: shared %q, want off", got)
	}
	// The same file through both: a stale write through either is refused.
	outer.mustSh("cat sub/deep/f.txt >/dev/null")
	inner.mustSh("cat f.txt >/dev/null && echo v2 > f.txt")
	outer.mustFail("echo lost > sub/deep/f.txt")
	if got := outer.readBacking("sub/deep/f.txt"); got != "v2\n" {
		t.Fatalf("backing file %q after the refused write, want v2", got)
	}
}

// TestMultiMountPeerModes: a lone mount is not shared; a second mount of
// its backing directory makes it "peer", and it stays so after that
// mount is gone (shared until unmount); --shared shows "on"; with
// --peer-detect=false on both, two mounts of one directory do not see
// each other (the mode before detection).
func TestMultiMountPeerModes(t *testing.T) {
	a := newMount(t, map[string]string{"f.txt": "v1\n"}, nil)
	if got := a.sharedMode(); got != "off" {
		t.Fatalf("lone mount: shared %q, want off", got)
	}
	b := newMount(t, nil, func(c *daemon.Config) { c.Workspace = a.ws })
	if got := a.sharedMode(); got != "peer" {
		t.Fatalf("with a second mount: shared %q, want peer", got)
	}
	if err := b.d.Close(); err != nil {
		t.Fatal(err)
	}
	<-b.d.Done()
	if got := a.sharedMode(); got != "peer" {
		t.Fatalf("after the second mount's unmount: shared %q, want peer (kept until unmount)", got)
	}
	if got := newMount(t, nil, func(c *daemon.Config) { c.Cache.Shared = true }).sharedMode(); got != "on" {
		t.Fatalf("--shared: %q, want on", got)
	}
	off := newMounts(t, 2, nil, func(c *daemon.Config) { c.Cache.NoPeerDetect = true })
	for i, m := range off {
		if got := m.sharedMode(); got != "off" {
			t.Fatalf("--peer-detect=false, mount %d: shared %q, want off", i+1, got)
		}
	}
}

// TestMultiMountPeerLateHandle: a session's writable handle, opened and
// written through a mount while it was alone, writes again after a second
// mount of the directory appeared and changed the file: the write is
// refused as stale, the other mount's bytes stay. No watcher on either
// mount, so only the stat the handle's first write left (recorded before
// the mount had a peer) tells the first mount of the change, at the cross-
// mount lock its now shared handle takes.
func TestMultiMountPeerLateHandle(t *testing.T) {
	noWatch := func(c *daemon.Config) { c.Cache.Watch, c.Cache.CacheTimeout = false, time.Second }
	a := newMount(t, map[string]string{"f.txt": "v1\n"}, noWatch)
	cmd := exec.Command("python3", "-c", `
import os, sys
fd = os.open("f.txt", os.O_RDWR)
os.read(fd, 100)
os.pwrite(fd, b"a1\n", 0)
print("written", flush=True)
sys.stdin.readline()
try:
    os.pwrite(fd, b"a2\n", 0)
    print("allowed", flush=True)
except PermissionError:
    print("refused", flush=True)
`)
	cmd.Dir, cmd.Env = a.mnt, testEnv(a.tmp)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close() // first: the worker's readline ends, and so does it
	out := bufio.NewScanner(outPipe)
	if !out.Scan() || out.Text() != "written" {
		t.Fatalf("first write: %q", out.Text())
	}
	if got := a.sharedMode(); got != "off" {
		t.Fatalf("alone: shared %q, want off", got)
	}
	b := newMount(t, nil, func(c *daemon.Config) { noWatch(c); c.Workspace = a.ws })
	b.mustSh("cat f.txt >/dev/null && echo b1 > f.txt")
	fmt.Fprintln(in, "go")
	if !out.Scan() || out.Text() != "refused" {
		t.Fatalf("the handle's write after the other mount's: %q, want refused", out.Text())
	}
	if got := a.readBacking("f.txt"); got != "b1\n" {
		t.Fatalf("backing file %q after the refused write, want b1", got)
	}
}
