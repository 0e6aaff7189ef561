package sessions

// A process's identity in /proc for the session walk: its parent, start
// time and thread group leader (docs/DESIGN.md#sessions), read through the
// kept descriptors (docs/DESIGN.md#kept-proc-fds) and bounded on request
// paths (docs/DESIGN.md#no-wait-on-caller).

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

type procStat struct {
	ppid  uint32
	sid   uint32 // the POSIX session id (field 6); 0 when not known
	start uint64
	comm  string // the thread's comm (field 2, without its parentheses)
}

// readSmall reads the file at path, a /proc file of at most a few KiB
// (status, comm, cmdline), into buf with open, read and close and no
// *os.File (whose fcntl, poller registration and fstat cost a /proc read
// twice its system calls); a file that fills buf is read whole by
// os.ReadFile. The result aliases buf unless it was longer. Errors are
// those of open and read (a gone process: ENOENT or ESRCH). Unbounded:
// request paths call it through procfs.Bounded.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	unix.Close(fd)
	if n == len(buf) {
		return os.ReadFile(path)
	}
	return buf[:n], nil
}

// leader returns the thread group leader of thread tid (whose stat is st)
// and the leader's stat. A non-leader thread's stat gives the process's
// parent as ppid, which would skip the process itself in a walk. On the
// real /proc a leader is known without reading its status
// (isGroupLeader).
func (s *Registry) leader(tid uint32, st procStat) (uint32, procStat, error) {
	if s.procDir == "/proc" && isGroupLeader(tid) {
		return tid, st, nil
	}
	var buf [4096]byte
	b, err := readSmall(fmt.Sprintf("%s/%d/status", s.procDir, tid), buf[:])
	if err != nil {
		return 0, st, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil || uint32(n) == tid {
				return tid, st, err
			}
			lst, err := s.stat(uint32(n))
			return uint32(n), lst, err
		}
	}
	return tid, st, nil
}

// isGroupLeader reports whether thread tid is known to lead its thread
// group, without /proc: pidfd_open(2) without PIDFD_THREAD opens only a
// thread group leader's pid and refuses any other thread's id with EINVAL.
// false means not known (another thread, a gone one, a kernel before
// Linux 5.3): the caller reads Tgid from /proc/<tid>/status. Most callers
// of the mount are single-threaded processes (a shell's cat, sed, git),
// whose status is the dearest of the /proc files a first request reads,
// and the open and close here take no lock of the thread.
func isGroupLeader(tid uint32) bool {
	fd, err := unix.PidfdOpen(int(tid), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// stat reads ppid and start time (clock ticks since boot) from
// /proc/<pid>/stat; pid may be any thread's id.
func (s *Registry) stat(pid uint32) (procStat, error) {
	var b []byte
	var err error
	if s.procDir == "/proc" {
		var buf [2048]byte
		b, err = readProcStat(pid, buf[:])
	} else {
		b, err = os.ReadFile(fmt.Sprintf("%s/%d/stat", s.procDir, pid))
	}
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) may contain spaces and parentheses: the
	// fields after it start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, errors.New("malformed stat")
	}
	ppid, err1 := strconv.ParseUint(f[1], 10, 32)
	sid, _ := strconv.ParseUint(f[3], 10, 32)
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, errors.New("malformed stat")
	}
	comm := ""
	if j := strings.IndexByte(string(b), '('); j >= 0 && j < i {
		comm = string(b[j+1 : i])
	}
	return procStat{ppid: uint32(ppid), sid: uint32(sid), start: start, comm: comm}, nil
}

// statBounded is stat waiting at most procfs.Bound: procfs.ErrSlow after that.
func (s *Registry) statBounded(pid uint32) (procStat, error) {
	return procfs.BoundedErr(fmt.Sprintf("stat:%p:%d", s, pid), procStat{}, func() (procStat, error) {
		return s.stat(pid)
	})
}

// leaderBounded returns the thread group leader (the process id) of thread
// tid, waiting at most procfs.Bound on /proc (procfs.ErrSlow past it).
func (s *Registry) leaderBounded(tid uint32) (uint32, error) {
	return procfs.BoundedErr(fmt.Sprintf("leader:%p:%d", s, tid), tid, func() (uint32, error) {
		st, err := s.stat(tid)
		if err != nil {
			return tid, err
		}
		pid, _, err := s.leader(tid, st)
		return pid, err
	})
}
