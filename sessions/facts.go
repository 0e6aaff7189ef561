package sessions

// A process's identity and facts for the guard's scanner and harness rules
// (docs/DESIGN.md#scanner-reads): which process a read comes from, and what
// it runs. The guard decides what the facts mean; this file only reads
// them, bounded (docs/DESIGN.md#no-wait-on-caller).

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// ProcKey identifies a process across pid reuse: its thread-group id and
// its start time (clock ticks since boot, /proc/<pid>/stat field 22).
type ProcKey struct {
	Pid   uint32
	Start uint64
}

// ProcFacts is what the guard needs to know of the process a read or a
// mutation comes from. ReadFacts reads them from /proc.
type ProcFacts struct {
	// Known is true when Proc and Comm were read in time; the other
	// fields are meaningless otherwise.
	Known bool
	Proc  ProcKey
	// Comm is the process's command name (its thread-group leader's
	// comm), at most 15 bytes.
	Comm string
	// Exe is the base name of /proc/<pid>/exe (the program file; "" when
	// unreadable), Argv0 the base name of the first word of its command
	// line ("" when empty).
	Exe, Argv0 string
}

// ReadFacts reads the facts of the process of thread tid (a FUSE request's
// pid is the calling thread's id): its stat, its thread group (a leader
// is known by pidfd_open(2), any other thread by Tgid in
// /proc/<tid>/status), the leader's stat (which names its comm), exe link
// and cmdline.
// It never waits longer than procfs.Bound (docs/DESIGN.md#no-wait-on-caller);
// Known is false when the reads did not finish in time or the thread is
// gone. Safe for concurrent use.
func ReadFacts(tid uint32) ProcFacts {
	if tid == 0 {
		return ProcFacts{}
	}
	// The kept facts' check is one pread of a kept comm descriptor, which
	// never sleeps on the thread: inline, with no goroutine and no wakeup
	// (docs/DESIGN.md#kept-proc-fds).
	if f, ok := keptFacts(tid); ok {
		return f
	}
	// A miss reads afresh, bounded (the kept check just failed: not again).
	f, ok := procfs.Bounded("facts:"+strconv.FormatUint(uint64(tid), 10), func() ProcFacts { return readFactsFresh(tid) })
	if !ok {
		return ProcFacts{}
	}
	return f
}

// readFactsUncached reads the facts of thread tid, whose stat is st.
func readFactsUncached(s *Registry, tid uint32, st procStat) ProcFacts {
	procDir := s.procDir
	pid, st, err := s.leader(tid, st)
	if err != nil {
		return ProcFacts{}
	}
	dir := fmt.Sprintf("%s/%d", procDir, pid)
	var buf [4096]byte
	// The leader's stat carries its comm as the comm file shows it (both
	// the unescaped task name: fs/proc/array.c).
	f := ProcFacts{Known: true, Proc: ProcKey{pid, st.start}, Comm: st.comm}
	if exe, err := os.Readlink(dir + "/exe"); err == nil {
		f.Exe = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	if cl, err := readSmall(dir+"/cmdline", buf[:]); err == nil {
		if a0, _, _ := strings.Cut(string(cl), "\x00"); a0 != "" {
			f.Argv0 = filepath.Base(a0)
		}
	}
	return f
}

// Comm returns the command name of thread tid (/proc/<tid>/comm), or ""
// when the thread is gone (or tid is 0) or its /proc files did not answer
// within procfs.Bound (it is in execve: docs/DESIGN.md#no-wait-on-caller).
// It is read afresh every time, never cached by (pid, start time): execve
// changes the name and keeps both, and `sh` becoming `git` is exactly what
// callers of Comm ask about. Safe for concurrent use.
func Comm(tid uint32) string {
	if tid == 0 {
		return ""
	}
	b, err := procfs.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
