package main

// The mount probe in a child process: a command finds its mount without
// ever making a FUSE request of its own that a daemon could hold
// (docs/DESIGN.md#cli-probe-child).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// probeChildEnv marks the CLI binary's run as a mount probe child
// (probeChildMain): set in its environment by probeStats to the probe's
// mode (probeStat or probeMount), never by a user.
const probeChildEnv = "RUBINOFS_PROBE_CHILD"

// probeExe is the probe child's executable: this binary, whatever its
// name or whether it was replaced since it started. A variable for tests.
var probeExe = "/proc/self/exe"

// The probe modes (probeOnce).
const (
	probeStat  = "stat"  // stat(2) of the path
	probeMount = "mount" // stat(2), then statfs(2) unless stat gave ENOTCONN: is a mount's server gone
)

// probeOnce probes p as mode says and returns the error (nil: it exists,
// or its mount answers).
func probeOnce(mode, p string) error {
	_, err := os.Stat(p)
	if mode != probeMount || errors.Is(err, syscall.ENOTCONN) {
		return err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return &os.PathError{Op: "statfs", Path: p, Err: err}
	}
	return nil
}

// probeChildMain is the probe child's whole run: it probes each path in
// paths in order (probeOnce, in mode) and writes one line per path on
// out, "ok" or "err ERRNO MESSAGE" (ERRNO 0 for an error that carries no
// errno), and stops after the first "ok". It returns the exit status, 0.
func probeChildMain(mode string, paths []string, out io.Writer) int {
	w := bufio.NewWriter(out)
	for _, p := range paths {
		err := probeOnce(mode, p)
		if err == nil {
			fmt.Fprintln(w, "ok")
			w.Flush()
			return 0
		}
		var errno syscall.Errno
		errors.As(err, &errno)
		fmt.Fprintf(w, "err %d %s\n", int(errno), strings.ReplaceAll(err.Error(), "\n", " "))
		w.Flush() // the parent times each line
	}
	return 0
}

// probeStats stats paths in order, in a child process (the CLI binary
// again, probeChildMain), until one exists, and calls each with the
// result of every path stat'ed: nil, the stat's error (an *os.PathError
// carrying its errno), or errNoAnswer when a stat did not finish within
// mountProbeTimeout. each returns whether to go on. After errNoAnswer
// the child is killed and left unwaited-for in the parent's path: a FUSE
// request the daemon has read is waited for by its caller, uninterruptibly,
// until the daemon answers, and a process with such a thread cannot exit.
// The child holds that thread instead of the command, which then returns.
// When the child cannot be started (no /proc/self/exe in a container),
// the stats run in this process, each on a goroutine of its own, bounded
// the same way: the command still says so after mountProbeTimeout, but
// may not exit until the daemon answers.
func probeStats(paths []string, each func(i int, err error) bool) {
	probeIn(probeStat, mountProbeTimeout, paths, each)
}

// probeIn is probeStats with the probe's mode and how long each path's
// probe may take.
func probeIn(mode string, timeout time.Duration, paths []string, each func(i int, err error) bool) {
	if os.Getenv(probeChildEnv) != "" {
		// A probe child that got here (a test binary run as one without
		// its TestMain's check) must not start another, and that one
		// another: the stats run here instead.
		inProcess(mode, timeout, paths, each)
		return
	}
	cmd := exec.Command(probeExe, paths...)
	cmd.Env = append(os.Environ(), probeChildEnv+"="+mode)
	cmd.Stdin, cmd.Stderr = nil, nil // /dev/null: the child holds none of the command's pipes
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		inProcess(mode, timeout, paths, each)
		return
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	ended := false // the child closed its output: it has exited or is exiting
	defer func() {
		if ended {
			cmd.Wait()
			return
		}
		// Stopped early (each), or a stat that did not finish: the child
		// may be holding a request the daemon has read, so it is not
		// waited for here; a long-lived caller (mcp) reaps it once the
		// daemon answers.
		cmd.Process.Kill()
		go func() {
			for range lines {
			}
			cmd.Wait()
		}()
	}()
	for i, p := range paths {
		t := time.NewTimer(timeout)
		select {
		case line, ok := <-lines:
			t.Stop()
			if !ok {
				ended = true
				// The child ended without an answer for p (killed from
				// outside, or out of memory): stat it here instead.
				inProcess(mode, timeout, paths[i:], func(j int, err error) bool { return each(i+j, err) })
				return
			}
			if line == "ok" {
				// The child's last line: it exits now.
				for range lines {
				}
				ended = true
			}
			if !each(i, probeResult(p, line)) {
				return
			}
		case <-t.C:
			each(i, errNoAnswer)
			return
		}
	}
	for range lines { // every path answered: the child is exiting
	}
	ended = true
}

// inProcess is probeIn's fallback: each path probed in this process
// (probeInProcess), in order, while each returns true.
func inProcess(mode string, timeout time.Duration, paths []string, each func(i int, err error) bool) {
	for i, p := range paths {
		if !each(i, probeInProcess(mode, timeout, p)) {
			return
		}
	}
}

// probeResult turns one line of the probe child's ("ok", "err ERRNO
// MESSAGE") into the result of the stat of p.
func probeResult(p, line string) error {
	if line == "ok" {
		return nil
	}
	f := strings.SplitN(line, " ", 3)
	if len(f) == 3 && f[0] == "err" {
		if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
			return &os.PathError{Op: "stat", Path: p, Err: syscall.Errno(n)}
		}
		return errors.New(f[2])
	}
	return fmt.Errorf("stat %s: the probe answered %q", p, line)
}

// probeInProcess is probeOnce of p, given up after timeout
// (errNoAnswer), in this process: the fallback of probeIn. The probe
// goes on in its goroutine.
func probeInProcess(mode string, timeout time.Duration, p string) error {
	done := make(chan error, 1)
	go func() { done <- probeOnce(mode, p) }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return errNoAnswer
	}
}

// unmountProbeTimeout bounds `rubinofs unmount`'s probe of whether the
// mount's server is gone; a server that does not answer by then is taken
// for alive (and the unmount goes on), as fusefs.DeadMount does.
const unmountProbeTimeout = 5 * time.Second

// mountGone is the unmount's probe (fusefs.UnmountWith) of whether the
// server of the mount at abs is gone, made by a child process (probeIn,
// probeMount), so that a server that holds the probe's request cannot keep
// the command from exiting: the kernel's ENOTCONN when it is gone, else
// nil or another error.
func mountGone(abs string) error {
	var res error
	probeIn(probeMount, unmountProbeTimeout, []string{abs}, func(_ int, err error) bool {
		res = err
		return false
	})
	return res
}
