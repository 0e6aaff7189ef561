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
// (probeChildMain): set to "1" in its environment by probeStats, never by
// a user.
const probeChildEnv = "RUBINOFS_PROBE_CHILD"

// probeExe is the probe child's executable: this binary, whatever its
// name or whether it was replaced since it started. A variable for tests.
var probeExe = "/proc/self/exe"

// probeChildMain is the probe child's whole run: it stats each path in
// paths in order and writes one line per path on out, "ok" or
// "err ERRNO MESSAGE" (ERRNO 0 for an error that carries no errno), and
// stops after the first "ok". It returns the exit status, 0.
func probeChildMain(paths []string, out io.Writer) int {
	w := bufio.NewWriter(out)
	for _, p := range paths {
		_, err := os.Stat(p)
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
	if os.Getenv(probeChildEnv) == "1" {
		// A probe child that got here (a test binary run as one without
		// its TestMain's check) must not start another, and that one
		// another: the stats run here instead.
		inProcess(paths, each)
		return
	}
	cmd := exec.Command(probeExe, paths...)
	cmd.Env = append(os.Environ(), probeChildEnv+"=1")
	cmd.Stdin, cmd.Stderr = nil, nil // /dev/null: the child holds none of the command's pipes
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		inProcess(paths, each)
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
		t := time.NewTimer(mountProbeTimeout)
		select {
		case line, ok := <-lines:
			t.Stop()
			if !ok {
				ended = true
				// The child ended without an answer for p (killed from
				// outside, or out of memory): stat it here instead.
				inProcess(paths[i:], func(j int, err error) bool { return each(i+j, err) })
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
}

// inProcess is probeStats' fallback: each path stat'ed in this process
// (statInProcess), in order, while each returns true.
func inProcess(paths []string, each func(i int, err error) bool) {
	for i, p := range paths {
		if !each(i, statInProcess(p)) {
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

// statInProcess is os.Stat of p, given up after mountProbeTimeout
// (errNoAnswer), in this process: the fallback of probeStats. The stat
// goes on in its goroutine.
func statInProcess(p string) error {
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(p)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(mountProbeTimeout):
		return errNoAnswer
	}
}
