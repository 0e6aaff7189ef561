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
	"sync"
	"time"
)

// Bound is the longest a request waits for a /proc read about a process
// (its caller, or an ancestor on the session walk). A healthy read takes
// microseconds; a read that takes longer is almost surely waiting on an
// exec in progress, which may be waiting on the very request asking, so
// waiting longer could never help. 100 ms keeps the stall invisible to
// interactive use and is far above any scheduling delay of a loaded
// machine.
const Bound = 100 * time.Millisecond

// ErrSlow is returned by ReadFile, Readlink and BoundedErr when the read
// did not finish within Bound. The read goes on in the background and ends
// when the process it waits for does (its exec completes); it is shared
// with later reads of the same key meanwhile, so a stuck process costs one
// goroutine per file.
var ErrSlow = errors.New("/proc read did not finish in time (process in execve?)")

// flight is one /proc read in progress, shared by every caller asking for
// the same key until it ends.
type flight struct {
	done chan struct{}
	val  any
}

var flights = struct {
	mu sync.Mutex
	m  map[string]*flight
}{m: map[string]*flight{}}

// Bounded runs fn (which reads /proc) on a goroutine of its own and waits
// for its result at most Bound; ok is false when it did not finish in
// time. Calls with the same key while one is in flight share it (and its
// result), so a stuck process never accumulates goroutines: a key names
// one read (say "stat:PID"), and calls with one key must agree on T. Safe
// for concurrent use.
func Bounded[T any](key string, fn func() T) (v T, ok bool) {
	flights.mu.Lock()
	f := flights.m[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		flights.m[key] = f
		go func() {
			f.val = fn()
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
	t := time.NewTimer(Bound)
	defer t.Stop()
	select {
	case <-f.done:
		return f.val.(T), true
	case <-t.C:
		return v, false
	}
}

// result is a bounded read's value and error (BoundedErr).
type result[T any] struct {
	v   T
	err error
}

// BoundedErr is Bounded for a read that returns a value and an error: fn's
// result when it finished within Bound, else late and ErrSlow. Calls with
// the same key must agree on T. Safe for concurrent use.
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

// Readlink reads the /proc symlink path (e.g. "/proc/123/cwd") without
// ever waiting longer than Bound: ErrSlow then, else os.Readlink's result.
// For request paths only. Safe for concurrent use.
func Readlink(path string) (string, error) {
	return BoundedErr("readlink:"+path, "", func() (string, error) { return os.Readlink(path) })
}

// ReadFile reads the /proc file path (e.g. "/proc/123/comm") without ever
// waiting longer than Bound: ErrSlow then, else os.ReadFile's result. For
// request paths only; elsewhere read /proc directly. Safe for concurrent
// use.
func ReadFile(path string) ([]byte, error) {
	return BoundedErr("read:"+path, nil, func() ([]byte, error) { return os.ReadFile(path) })
}
