package procfs

// Bounded /proc reads: a FUSE request never waits on its caller's state
// (docs/DESIGN.md#no-wait-on-caller).
//
// /proc/<pid>/stat, status, comm, wchan and cmdline of a task that is in
// execve wait for the exec to finish: the exec holds the task's exec locks
// (cred_guard_mutex, exec_update_lock) from its start to the point where
// the new program is installed. The exec closes the close-on-exec
// descriptors inside that window, and closing a descriptor on the mount
// sends FLUSH and waits, uninterruptibly, for our reply. A request handler
// that reads the caller's /proc files while serving that FLUSH (or any
// request the exec makes: opening or reading a binary on the mount) waits
// for the exec, which waits for the handler: a deadlock that leaves the
// caller in D state and the mount impossible to unmount. So every /proc
// read on a request path goes through Bounded.

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Bound is the longest a request waits for a /proc read about a process
// (its caller, or an ancestor on the session walk) that is blocked in the
// kernel. A healthy read takes microseconds; a read that sleeps in the
// kernel longer than this is almost surely waiting on an exec in progress,
// which may be waiting on the very request asking, so waiting longer could
// never help. 100 ms keeps the stall invisible to interactive use.
const Bound = 100 * time.Millisecond

// MaxWait is the longest a request waits for a /proc read that is still
// making progress: its thread is runnable but not running (a loaded
// machine: tens of runnable threads per core, a race-instrumented test
// binary), or parked in the Go runtime (the read has finished and waits
// for a processor to report it). Such a read is waited for in steps of
// Bound, each after a look at the reading thread (stuckInKernel), up to
// MaxWait; a read asleep in the kernel at any look is given up at once
// (docs/DESIGN.md#proc-bound-load).
const MaxWait = 2 * time.Second

// ErrSlow is returned by ReadFile, Readlink and BoundedErr when the read
// did not finish in time: it was asleep in the kernel after Bound, or
// still unfinished after MaxWait. The read goes on in the background and
// ends when the process it waits for does (its exec completes); it is
// shared with later reads of the same key meanwhile, so a stuck process
// costs one goroutine per file.
var ErrSlow = errors.New("/proc read did not finish in time (process in execve?)")

// flight is one /proc read in progress, shared by every caller asking for
// the same key until it ends.
type flight struct {
	done chan struct{}
	val  any
	// tid is the thread running the read while it runs (its goroutine is
	// locked to it), 0 before and after.
	tid atomic.Int32
}

var flights = struct {
	mu sync.Mutex
	m  map[string]*flight
}{m: map[string]*flight{}}

// procReadCalls are the system calls a /proc read sleeps in when it waits
// on another process's exec: the open (a file whose open checks access to
// the process's memory), the read, and readlink.
var procReadCalls = []int{unix.SYS_OPENAT, unix.SYS_READ, unix.SYS_PREAD64, unix.SYS_READLINKAT}

// stuckInKernel reports whether thread tid of this process is asleep in
// the kernel in one of procReadCalls: its goroutine is locked to it and
// reads /proc. A thread that is runnable or on a CPU reads "running"; one
// asleep elsewhere (futex, where the Go runtime parks a thread: the read
// returned and waits for a processor, or fn waits on a Go lock; a runtime
// mmap) is not stuck in a /proc read; tid 0 (the read has not started, or
// has ended) is not stuck; a thread that cannot be looked at counts as
// stuck, the conservative side.
func stuckInKernel(tid int32) bool {
	if tid == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(int(tid)) + "/syscall")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return true
	}
	if f[0] == "running" {
		return false
	}
	nr, err := strconv.Atoi(f[0])
	return err != nil || slices.Contains(procReadCalls, nr)
}

// Bounded runs fn (which reads /proc) on a goroutine of its own, locked to
// its thread, and waits for its result: ok is false when fn's thread was
// asleep in the kernel after Bound (at a look every Bound), or fn did not
// finish within MaxWait. A fn that is slow only because the machine is
// loaded is waited for (docs/DESIGN.md#proc-bound-load). Calls with the
// same key while one is in flight share it (and its result), so a stuck
// process never accumulates goroutines: a key names one read (say
// "stat:PID"), and calls with one key must agree on T. Safe for
// concurrent use.
func Bounded[T any](key string, fn func() T) (v T, ok bool) {
	flights.mu.Lock()
	f := flights.m[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		flights.m[key] = f
		go func() {
			runtime.LockOSThread()
			f.tid.Store(int32(unix.Gettid()))
			f.val = fn()
			f.tid.Store(0)
			runtime.UnlockOSThread()
			flights.mu.Lock()
			delete(flights.m, key)
			flights.mu.Unlock()
			close(f.done)
		}()
	}
	flights.mu.Unlock()
	select {
	case <-f.done:
		return f.val.(T), true
	default:
	}
	start := time.Now()
	t := time.NewTimer(Bound)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return f.val.(T), true
		case <-t.C:
		}
		// A waiter woken late may find the read done as well as the
		// timer fired: the read wins.
		select {
		case <-f.done:
			return f.val.(T), true
		default:
		}
		if stuckInKernel(f.tid.Load()) || time.Since(start) >= MaxWait {
			return v, false
		}
		t.Reset(Bound)
	}
}

// result is a bounded read's value and error (BoundedErr).
type result[T any] struct {
	v   T
	err error
}

// BoundedErr is Bounded for a read that returns a value and an error: fn's
// result when it finished in time (Bounded), else late and ErrSlow. Calls
// with the same key must agree on T. Safe for concurrent use.
func BoundedErr[T any](key string, late T, fn func() (T, error)) (T, error) {
	r, ok := Bounded(key, func() result[T] {
		v, err := fn()
		return result[T]{v, err}
	})
	if !ok {
		return late, ErrSlow
	}
	return r.v, r.err
}

// Readlink reads the /proc symlink path (e.g. "/proc/123/cwd") as Bounded
// waits: ErrSlow when the read sleeps in the kernel past Bound (or runs
// past MaxWait), else os.Readlink's result.
// For request paths only. Safe for concurrent use.
func Readlink(path string) (string, error) {
	return BoundedErr("readlink:"+path, "", func() (string, error) { return os.Readlink(path) })
}

// ReadFile reads the /proc file path (e.g. "/proc/123/comm") as Bounded
// waits: ErrSlow when the read sleeps in the kernel past Bound (or runs
// past MaxWait), else os.ReadFile's result. For
// request paths only; elsewhere read /proc directly. Safe for concurrent
// use.
func ReadFile(path string) ([]byte, error) {
	return BoundedErr("read:"+path, nil, func() ([]byte, error) { return os.ReadFile(path) })
}
