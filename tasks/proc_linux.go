package tasks

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// procStat is what the runner needs of /proc/PID/stat.
type procStat struct {
	State   byte
	Pgrp    int
	Session int
}

// readProcStat reads /proc/PID/stat (parseProcStat). It waits as long as
// the read takes: not for request paths (readProcStatBounded).
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(pid, b)
}

// readProcStatBounded is readProcStat for request paths: it never waits
// longer than procfs.Bound (procfs.ErrSlow then), since the stat of
// a process in execve waits for the exec, which may wait for the very
// request (docs/DESIGN.md#no-wait-on-caller).
func readProcStatBounded(pid int) (procStat, error) {
	b, err := procfs.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(pid, b)
}

// parseProcStat parses pid's /proc/PID/stat content b: the fields after the
// last ')' (the command name may contain anything) are state, ppid, pgrp,
// session.
func parseProcStat(pid int, b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	var st procStat
	var err error
	st.State = f[0][0]
	if st.Pgrp, err = strconv.Atoi(string(f[2])); err != nil {
		return procStat{}, err
	}
	if st.Session, err = strconv.Atoi(string(f[3])); err != nil {
		return procStat{}, err
	}
	return st, nil
}

// killSessionAndWait sends SIGKILL to process group and session sid until
// no live (non-zombie) member is left, or bound elapses; it reports whether
// they are all gone. kill(2) returns before the target dies, so this is
// what makes teardown synchronous.
func killSessionAndWait(sid int, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	pause := 100 * time.Microsecond
	for {
		syscall.Kill(-sid, syscall.SIGKILL)
		if signalSession(sid, syscall.SIGKILL) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// signalSession sends sig to every process whose POSIX session is sid
// (members that moved to another process group of the task's session,
// e.g. under a job-control shell). Processes that called setsid(2)
// themselves leave the session and are not found.
// It returns how many processes it signalled.
func signalSession(sid int, sig syscall.Signal) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.Session == sid && st.State != 'Z' {
			syscall.Kill(pid, sig)
			n++
		}
	}
	return n
}
