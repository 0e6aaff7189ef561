package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadFileSlow: a read that does not answer (a FIFO nobody writes, as
// a /proc read of a task in execve) returns ErrSlow instead of waiting;
// a second read of the same path shares the stuck one; a readable file
// reads as os.ReadFile does.
func TestReadFileSlow(t *testing.T) {
	dir := t.TempDir()
	stuck := filepath.Join(dir, "stat")
	if err := syscall.Mkfifo(stuck, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// O_RDWR on a FIFO never blocks; it releases the blocked open.
		if f, err := os.OpenFile(stuck, os.O_RDWR, 0); err == nil {
			f.Close()
		}
	})
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := ReadFile(stuck)
			done <- err
		}()
	}
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, ErrSlow) {
				t.Errorf("ReadFile of a file that does not answer: %v, want ErrSlow", err)
			}
		case <-time.After(20 * time.Second): // liveness only: the bound is Bound
			t.Fatal("ReadFile hangs on a file that does not answer")
		}
	}
	flights.mu.Lock()
	n := len(flights.m)
	flights.mu.Unlock()
	if n != 1 {
		t.Errorf("%d reads in flight for one stuck file, want 1", n)
	}
	ok := filepath.Join(dir, "comm")
	os.WriteFile(ok, []byte("sh\n"), 0o644)
	if b, err := ReadFile(ok); err != nil || string(b) != "sh\n" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	if _, err := Readlink(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Readlink of a missing link: %v", err)
	}
}

// TestBoundedWaitsForARunnableRead: a read that is slow only because its
// thread is not asleep in the kernel (a loaded machine: runnable but not
// running, as this busy loop is; or parked in the Go runtime) is waited
// for past Bound, up to MaxWait; only a read asleep in the kernel (the
// FIFO of TestReadFileSlow) is given up after Bound
// (docs/DESIGN.md#proc-bound-load).
func TestBoundedWaitsForARunnableRead(t *testing.T) {
	busy, ok := Bounded("test:busy", func() int {
		for end := time.Now().Add(3 * Bound); time.Now().Before(end); {
		}
		return 1
	})
	if !ok || busy != 1 {
		t.Errorf("a read whose thread ran for 3 x Bound: %d, %v; want 1, true", busy, ok)
	}
	release := make(chan struct{})
	parked, ok := Bounded("test:parked", func() int {
		<-release
		return 2
	})
	if ok {
		t.Errorf("a read parked past MaxWait reported done: %d", parked)
	}
	close(release)
}

// TestParkedReadIsNotStuck: a read's thread parked in the Go runtime (its
// goroutine, locked to the thread, waits on a channel: the thread sleeps
// in futex) is not stuck in the kernel, so Bounded waits for it (up to
// MaxWait). Asserted on the look itself, not on timing: how long a loaded
// machine takes to wake the read is not this test's business.
func TestParkedReadIsNotStuck(t *testing.T) {
	tid := make(chan int32)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- int32(unix.Gettid())
		<-release
	}()
	defer close(release)
	id := <-tid
	// Wait until the thread is asleep (state S in its stat), then look.
	stat := "/proc/self/task/" + strconv.Itoa(int(id)) + "/stat"
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "S" {
			break
		}
		runtime.Gosched()
	}
	if stuckInKernel(id) {
		b, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(int(id)) + "/syscall")
		t.Errorf("a thread parked on a channel counts as stuck in a /proc read (syscall: %q)", b)
	}
}

// TestFindCgroup2: the first cgroup2 mount of the hierarchy's root, its
// mount point unescaped; none is ErrNoCgroup2.
func TestFindCgroup2(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(f, []byte("30 1 0:26 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"+
		"41 31 0:38 /sub /x rw,relatime - cgroup2 cgroup2 rw\n"+
		"42 31 0:38 / /sys/fs/cgroup/uni\\040fied rw,relatime shared:9 - cgroup2 cgroup2 rw\n"+
		"43 31 0:38 / /second rw,relatime - cgroup2 cgroup2 rw\n"), 0o644)
	if got, err := findCgroup2(f); err != nil || got != "/sys/fs/cgroup/uni fied" {
		t.Fatalf("findCgroup2 = %q, %v", got, err)
	}
	os.WriteFile(f, []byte("30 1 0:26 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"), 0o644)
	if _, err := findCgroup2(f); !errors.Is(err, ErrNoCgroup2) {
		t.Fatalf("findCgroup2 without cgroup2: %v", err)
	}
	if _, err := findCgroup2(filepath.Join(t.TempDir(), "none")); !errors.Is(err, ErrNoCgroup2) {
		t.Fatalf("findCgroup2 of a missing file: %v", err)
	}
}

func TestUnescapeMountField(t *testing.T) {
	for in, want := range map[string]string{
		`a\134b\011c\040`: "a\\b\tc ",
		`/a\040b\134c`:    `/a b\c`,
		`plain`:           "plain",
		`x\04`:            `x\04`,
		`x\999y`:          `x\999y`,
		`x\400`:           `x\400`,
	} {
		if got := UnescapeMountField(in); got != want {
			t.Errorf("UnescapeMountField(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMountpointsIn: a mount point is found unescaped, the type is the
// topmost mount's, and a device is found by major:minor.
func TestMountpointsIn(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(f, []byte("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"+
		"50 22 0:45 / /mnt/a\\040b rw,nosuid - fuse.rubinofs /ws rw,user_id=0\n"+
		"51 50 0:46 / /mnt/a\\040b rw,nosuid - fuse.other x rw\n"), 0o644)
	if ok, err := isMountpointIn(f, "/mnt/a b"); !ok || err != nil {
		t.Errorf("isMountpointIn(/mnt/a b) = %v, %v", ok, err)
	}
	if ok, _ := isMountpointIn(f, "/mnt"); ok {
		t.Error("/mnt is no mount point")
	}
	if typ, ok := mountTypeIn(f, "/mnt/a b"); !ok || typ != "fuse.other" {
		t.Errorf("mountTypeIn = %q, %v, want the top mount's fuse.other", typ, ok)
	}
	if _, ok := mountTypeIn(f, "/none"); ok {
		t.Error("mountTypeIn(/none) found a mount")
	}
	if !deviceMountedIn(f, 0, 45) || deviceMountedIn(f, 0, 47) {
		t.Error("deviceMountedIn: want 0:45 listed, 0:47 not")
	}
	if !deviceMountedIn(filepath.Join(t.TempDir(), "none"), 0, 47) {
		t.Error("an unreadable table counts as mounted")
	}
}
