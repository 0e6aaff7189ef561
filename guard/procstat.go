package guard

// Bounded /proc reads (docs/DESIGN.md#no-wait-on-caller) live in
// internal/procfs (docs/DESIGN.md#proc-room); these names forward to it
// for the callers outside guard that use them (fusefs, cmd/rubinofs,
// tests). New code calls procfs directly.

import (
	"github.com/rubinofs/rubinofs/internal/procfs"
)

// ProcBound is procfs.Bound: the longest a request waits for a /proc read
// about a process (100 ms; docs/DESIGN.md#no-wait-on-caller).
const ProcBound = procfs.Bound

// UnknownSession is the session name of a caller whose session could not
// be resolved within ProcBound (and was not cached). It is never a valid
// session name (those start alphanumeric), so no tracker, record or
// registered session can carry it. Callers of that session may look up,
// stat and read, but the guard's callers refuse their guarded mutations
// with EAGAIN (see fusefs decide), and their reads are not registered.
const UnknownSession = "-"

// ErrProcSlow is procfs.ErrSlow (the same value, so errors.Is matches
// either): a /proc read did not finish within ProcBound.
var ErrProcSlow = procfs.ErrSlow

// ReadlinkProc is procfs.Readlink: the /proc symlink path read without
// waiting longer than ProcBound (ErrProcSlow then). Safe for concurrent
// use.
func ReadlinkProc(path string) (string, error) { return procfs.Readlink(path) }

// ReadProc is procfs.ReadFile: the /proc file path read without waiting
// longer than ProcBound (ErrProcSlow then). For request paths only. Safe
// for concurrent use.
func ReadProc(path string) ([]byte, error) { return procfs.ReadFile(path) }
