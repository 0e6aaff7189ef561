package guard

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
// read on a request path goes through procBounded.

import (
	"errors"
	"os"
	"sync"
	"time"
)

// ProcBound is the longest a request waits for a /proc read about a
// process (its caller, or an ancestor on the session walk). A healthy read
// takes microseconds; a read that takes longer is almost surely waiting on
// an exec in progress, which may be waiting on the very request asking, so
// waiting longer could never help. 100 ms keeps the stall invisible to
// interactive use and is far above any scheduling delay of a loaded
// machine.
const ProcBound = 100 * time.Millisecond

// UnknownSession is the session name of a caller whose session could not
// be resolved within ProcBound (and was not cached). It is never a valid
// session name (those start alphanumeric), so no tracker, record or
// registered session can carry it. Callers of that session may look up,
// stat and read, but the guard's callers refuse their guarded mutations
// with EAGAIN (see fusefs decide), and their reads are not registered.
const UnknownSession = "-"

// ErrProcSlow is returned by ReadProc when the read did not finish within
// ProcBound. The read goes on in the background and ends when the process
// it waits for does (its exec completes); it is shared with later reads of
// the same file meanwhile, so a stuck process costs one goroutine per file.
var ErrProcSlow = errors.New("/proc read did not finish in time (process in execve?)")

// procFlight is one /proc read in progress, shared by every caller asking
// for the same key until it ends.
type procFlight struct {
	done chan struct{}
	val  any
}

var procFlights = struct {
	mu sync.Mutex
	m  map[string]*procFlight
}{m: map[string]*procFlight{}}

// procBounded runs fn (which reads /proc) on a goroutine of its own and
// waits for its result at most ProcBound; ok is false when it did not
// finish in time. Calls with the same key while one is in flight share it
// (and its result), so a stuck process never accumulates goroutines.
// Safe for concurrent use.
func procBounded[T any](key string, fn func() T) (v T, ok bool) {
	procFlights.mu.Lock()
	f := procFlights.m[key]
	if f == nil {
		f = &procFlight{done: make(chan struct{})}
		procFlights.m[key] = f
		go func() {
			f.val = fn()
			procFlights.mu.Lock()
			delete(procFlights.m, key)
			procFlights.mu.Unlock()
			close(f.done)
		}()
	}
	procFlights.mu.Unlock()
	select {
	case <-f.done:
		return f.val.(T), true
	default:
	}
	t := time.NewTimer(ProcBound)
	defer t.Stop()
	select {
	case <-f.done:
		return f.val.(T), true
	case <-t.C:
		return v, false
	}
}

// procResult is a bounded read's value and error (procBoundedErr).
type procResult[T any] struct {
	v   T
	err error
}

// procBoundedErr is procBounded for a read that returns a value and an
// error: fn's result when it finished within ProcBound, else late and
// ErrProcSlow. Calls with the same key must agree on T.
func procBoundedErr[T any](key string, late T, fn func() (T, error)) (T, error) {
	r, ok := procBounded(key, func() procResult[T] {
		v, err := fn()
		return procResult[T]{v, err}
	})
	if !ok {
		return late, ErrProcSlow
	}
	return r.v, r.err
}

// ReadlinkProc reads the /proc symlink path (e.g. "/proc/123/cwd") without
// ever waiting longer than ProcBound: ErrProcSlow then, else os.Readlink's
// result. For request paths only. Safe for concurrent use.
func ReadlinkProc(path string) (string, error) {
	return procBoundedErr("readlink:"+path, "", func() (string, error) { return os.Readlink(path) })
}

// ReadProc reads the /proc file path (e.g. "/proc/123/comm") without ever
// waiting longer than ProcBound: ErrProcSlow then, else os.ReadFile's
// result. For request paths only; elsewhere read /proc directly. Safe for
// concurrent use.
func ReadProc(path string) ([]byte, error) {
	return procBoundedErr("read:"+path, nil, func() ([]byte, error) { return os.ReadFile(path) })
}
