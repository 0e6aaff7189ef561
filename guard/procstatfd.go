package guard

// Kept /proc/<pid>/stat descriptors: the stat read that validates a cached
// session or cached process facts on every request by name costs one
// pread(2) instead of open, fstat, two reads and close
// (docs/DESIGN.md#kept-proc-stat).

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// maxStatFds bounds the kept /proc/<pid>/stat descriptors, in descriptors.
// Past it every kept descriptor is dropped (as the facts cache is cleared).
const maxStatFds = 256

// statFd is one kept descriptor of /proc/<pid>/stat. refs counts the reads
// using fd; a dropped entry (dead) is closed when the last read ends, so a
// descriptor is never closed under a pread (which could then read whatever
// file took its number).
type statFd struct {
	fd   int
	refs int
	dead bool
}

// statFds holds the kept descriptors by pid. Concurrency: mu guards the map
// and every entry's refs and dead; preads run without it.
var statFds = struct {
	mu sync.Mutex
	m  map[uint32]*statFd
}{m: map[uint32]*statFd{}}

// readProcStat returns the content of /proc/<pid>/stat as a fresh open and
// read of that path would: through a kept descriptor of it when there is
// one, else by opening the path (and keeping the descriptor).
//
// A descriptor of /proc/<pid>/stat refers to the process's pid itself, not
// to its number: a pread at offset 0 formats the file anew from the task
// that holds that pid now, the one a fresh lookup of the number finds, and
// fails with ESRCH once the task is gone, so a recycled number is never
// read through a descriptor kept for an earlier process; the path is then
// opened again. Unbounded like os.ReadFile: callers on a request path read
// through procBounded. Safe for concurrent use.
func readProcStat(pid uint32, buf []byte) ([]byte, error) {
	if e := acquireStatFd(pid); e != nil {
		n, err := unix.Pread(e.fd, buf, 0)
		releaseStatFd(pid, e, err != nil)
		if err == nil && n < len(buf) {
			return buf[:n], nil
		}
	}
	path := fmt.Sprintf("/proc/%d/stat", pid)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if n == len(buf) { // longer than buf (never seen): read it whole
		unix.Close(fd)
		return os.ReadFile(path)
	}
	keepStatFd(pid, fd)
	return buf[:n], nil
}

// acquireStatFd returns pid's kept descriptor with a reference taken, or nil.
func acquireStatFd(pid uint32) *statFd {
	statFds.mu.Lock()
	defer statFds.mu.Unlock()
	e := statFds.m[pid]
	if e != nil {
		e.refs++
	}
	return e
}

// releaseStatFd drops the reference acquireStatFd took; drop also drops
// the entry (its read failed: the process is gone).
func releaseStatFd(pid uint32, e *statFd, drop bool) {
	statFds.mu.Lock()
	defer statFds.mu.Unlock()
	if drop {
		dropStatFdLocked(pid, e)
	}
	e.refs--
	if e.refs == 0 && e.dead {
		unix.Close(e.fd)
	}
}

// dropStatFdLocked removes e from the map if it is still pid's entry and
// marks it dead; its descriptor is closed by the last reference (or here
// when it has none). Called with statFds.mu held.
func dropStatFdLocked(pid uint32, e *statFd) {
	if statFds.m[pid] == e {
		delete(statFds.m, pid)
	}
	if !e.dead {
		e.dead = true
		if e.refs == 0 {
			unix.Close(e.fd)
		}
	}
}

// keepStatFd keeps fd, a descriptor of /proc/<pid>/stat just read, as
// pid's entry (replacing an older one).
func keepStatFd(pid uint32, fd int) {
	statFds.mu.Lock()
	defer statFds.mu.Unlock()
	if old := statFds.m[pid]; old != nil {
		dropStatFdLocked(pid, old)
	}
	if len(statFds.m) >= maxStatFds {
		for p, e := range statFds.m {
			dropStatFdLocked(p, e)
		}
	}
	statFds.m[pid] = &statFd{fd: fd}
}
