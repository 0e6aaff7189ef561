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

	"github.com/rubinofs/rubinofs/internal/procfs"
)

type procStat struct {
	ppid  uint32
	sid   uint32 // the POSIX session id (field 6); 0 when not known
	start uint64
	comm  string // the thread's comm (field 2, without its parentheses)
}

// leader returns the thread group leader of thread tid (whose stat is st)
// and the leader's stat. A non-leader thread's stat gives the process's
// parent as ppid, which would skip the process itself in a walk.
func (s *Registry) leader(tid uint32, st procStat) (uint32, procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/status", s.procDir, tid))
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
