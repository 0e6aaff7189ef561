package sessions

// Kept /proc descriptors: the /proc read that validates a cached session or
// cached process facts on every request by name costs one pread(2) instead
// of open, fstat, two reads and close (docs/DESIGN.md#kept-proc-fds).

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// maxKeptFds bounds the descriptors one keptFds table keeps, in
// descriptors. Past it the table drops them all (as the session cache is
// cleared).
const maxKeptFds = 256

// keptFd is one kept descriptor of a /proc/<pid> file. refs counts the reads
// using fd; a dropped entry (dead) is closed when the last read ends, so a
// descriptor is never closed under a pread (which could then read whatever
// file took its number). comm and facts are what the entry vouches for
// (commFds: the process facts read while the descriptor was open); they
// never change once kept.
type keptFd struct {
	fd    int
	refs  int
	dead  bool
	comm  string
	facts ProcFacts
	start uint64 // the thread's start time (commFds)
}

// keptFds holds kept descriptors of /proc/<pid>/<file> by pid.
// Concurrency: mu guards the map and every entry's refs and dead; preads
// run without it.
type keptFds struct {
	file string
	mu   sync.Mutex
	m    map[uint32]*keptFd
}

// statFds keeps /proc/<pid>/stat descriptors (Registry.stat); commFds keeps
// /proc/<tid>/comm descriptors with the facts they vouch for (readFactsKept).
var (
	statFds = &keptFds{file: "stat", m: map[uint32]*keptFd{}}
	commFds = &keptFds{file: "comm", m: map[uint32]*keptFd{}}
)

// path names pid's file.
func (k *keptFds) path(pid uint32) string { return fmt.Sprintf("/proc/%d/%s", pid, k.file) }

// acquire returns pid's kept descriptor with a reference taken, or nil.
func (k *keptFds) acquire(pid uint32) *keptFd {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.m[pid]
	if e != nil {
		e.refs++
	}
	return e
}

// read preads e at offset 0 into buf and drops the reference acquire took;
// a failed read (the process is gone: ESRCH) also drops the entry.
func (k *keptFds) read(pid uint32, e *keptFd, buf []byte) (int, error) {
	n, err := unix.Pread(e.fd, buf, 0)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.dropLocked(pid, e)
	}
	e.refs--
	if e.refs == 0 && e.dead {
		unix.Close(e.fd)
	}
	return n, err
}

// release drops the reference acquire took, without reading.
func (k *keptFds) release(pid uint32, e *keptFd) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.dead {
		unix.Close(e.fd)
	}
}

// dropLocked removes e from the map if it is still pid's entry and marks
// it dead; its descriptor is closed by the last reference (or here when it
// has none). Called with k.mu held.
func (k *keptFds) dropLocked(pid uint32, e *keptFd) {
	if k.m[pid] == e {
		delete(k.m, pid)
	}
	if !e.dead {
		e.dead = true
		if e.refs == 0 {
			unix.Close(e.fd)
		}
	}
}

// keep keeps e (its descriptor just read) as pid's entry, replacing an
// older one.
func (k *keptFds) keep(pid uint32, e *keptFd) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old := k.m[pid]; old != nil {
		k.dropLocked(pid, old)
	}
	if len(k.m) >= maxKeptFds {
		for p, o := range k.m {
			k.dropLocked(p, o)
		}
	}
	k.m[pid] = e
}

// open opens pid's file and preads it into buf.
func (k *keptFds) open(pid uint32, buf []byte) (fd, n int, err error) {
	fd, err = unix.Open(k.path(pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, &os.PathError{Op: "open", Path: k.path(pid), Err: err}
	}
	n, err = unix.Pread(fd, buf, 0)
	if err != nil {
		unix.Close(fd)
		return -1, 0, &os.PathError{Op: "read", Path: k.path(pid), Err: err}
	}
	return fd, n, nil
}

// readProcStat returns the content of /proc/<pid>/stat as a fresh open and
// read of that path would: through a kept descriptor of it when there is
// one, else by opening the path (and keeping the descriptor).
//
// A descriptor of a /proc/<pid> file refers to the process's pid itself,
// not to its number: a pread at offset 0 formats the file anew from the
// task holding that pid now, the one a fresh lookup of the number finds,
// and fails with ESRCH once the task is gone, so a recycled number is never
// read through a descriptor kept for an earlier process; the path is then
// opened again. Unbounded like os.ReadFile: callers on a request path read
// through procfs.Bounded. Safe for concurrent use.
func readProcStat(pid uint32, buf []byte) ([]byte, error) {
	if e := statFds.acquire(pid); e != nil {
		if n, err := statFds.read(pid, e, buf); err == nil && n < len(buf) {
			return buf[:n], nil
		}
	}
	fd, n, err := statFds.open(pid, buf)
	if err != nil {
		return nil, err
	}
	if n == len(buf) { // longer than buf (never seen): read it whole
		unix.Close(fd)
		return os.ReadFile(statFds.path(pid))
	}
	statFds.keep(pid, &keptFd{fd: fd})
	return buf[:n], nil
}

// readFactsKept is ReadFacts' /proc work, unbounded: the facts of thread tid
// are read once and kept with a descriptor of /proc/<tid>/comm opened
// before them, and later calls read only that descriptor. They get the
// kept facts while its pread succeeds (the pid is the same process's: see
// readProcStat) and shows the same command name (no exec since).
func readFactsKept(tid uint32) ProcFacts {
	if f, ok := keptFacts(tid); ok {
		return f
	}
	return readFactsFresh(tid)
}

// keptFacts returns the facts kept for thread tid while its kept comm
// descriptor still reads the same name (readFactsKept); ok is false when
// none are kept or they no longer hold. It reads nothing but that
// descriptor, one pread(2), and so needs no bound: formatting comm copies
// the task's name and takes no lock an exec or a page fault of the thread
// holds (fs/proc/base.c, comm_show), so the read never waits on the
// thread's state (docs/DESIGN.md#kept-proc-fds). Safe for concurrent use.
func keptFacts(tid uint32) (ProcFacts, bool) {
	var buf [64]byte // comm is at most 15 bytes and a newline
	if e := commFds.acquire(tid); e != nil {
		if n, err := commFds.read(tid, e, buf[:]); err == nil && string(buf[:n]) == e.comm {
			return e.facts, true
		}
	}
	return ProcFacts{}, false
}

// readFactsFresh is readFactsKept's miss: it opens /proc/<tid>/comm, reads
// the facts and keeps them with the descriptor. Kept out of
// readFactsKept, whose small frame fits the stack of the new goroutine
// procfs.Bounded runs it on.
//
//go:noinline
func readFactsFresh(tid uint32) ProcFacts {
	var buf [64]byte
	fd, n, err := commFds.open(tid, buf[:])
	if err != nil {
		return ProcFacts{}
	}
	before := string(buf[:n])
	s := &Registry{procDir: "/proc"}
	f := ProcFacts{}
	st, err := s.stat(tid)
	if err == nil {
		f = readFactsUncached(s, tid, st)
	}
	// The facts are kept only when the descriptor still reads the same
	// name: the process neither exec'd nor was gone while they were read.
	if n, err := unix.Pread(fd, buf[:], 0); !f.Known || err != nil || string(buf[:n]) != before {
		unix.Close(fd)
		return f
	}
	commFds.keep(tid, &keptFd{fd: fd, comm: before, facts: f, start: st.start})
	return f
}

// keptAlive reports whether thread tid is still the thread that started at
// start (clock ticks since boot), as a read of its /proc/<tid>/stat would
// tell, by one pread of the /proc/<tid>/comm descriptor kept with its
// facts (readFactsKept): the descriptor was opened for a thread of that
// start time and still reads, so the pid has not been recycled since.
// false when no such descriptor is kept (the caller reads stat then).
// Like keptFacts it reads only the kept descriptor and needs no bound.
func keptAlive(tid uint32, start uint64) bool {
	e := commFds.acquire(tid)
	if e == nil {
		return false
	}
	if e.start != start {
		commFds.release(tid, e)
		return false
	}
	var buf [64]byte
	_, err := commFds.read(tid, e, buf[:])
	return err == nil
}
