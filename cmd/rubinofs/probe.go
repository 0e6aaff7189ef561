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
	"sync/atomic"
	"syscall"
	"time"
)

// probeChildEnv and probeChildArg0 mark the CLI binary's run as a mount
// probe child (probeChildMain): probeIn sets the variable to the probe's
// mode (probeStat or probeMount) and argv[0] to probeChildArg0. Both must
// be there (isProbeChild), so a variable left in a user's environment
// changes nothing.
const (
	probeChildEnv  = "RUBINOFS_PROBE_CHILD"
	probeChildArg0 = "rubinofs-probe-child"
)

// isProbeChild reports whether this run, with arguments args (os.Args),
// is a probe child, and its mode.
func isProbeChild(args []string) (mode string, ok bool) {
	mode = os.Getenv(probeChildEnv)
	return mode, mode != "" && len(args) > 0 && args[0] == probeChildArg0
}

// maxProbeMessage bounds the message of an error line of the probe child
// (an error without an errno), so that no line outgrows the parent's
// reader, whatever the path.
const maxProbeMessage = 1024

// probeExe is the probe child's executable: this binary, whatever its
// name or whether it was replaced since it started. A variable for tests.
var probeExe = "/proc/self/exe"

// maxHeldProbes bounds the probe children a process leaves behind, killed
// but not yet ended (heldProbes): each waits for a daemon to answer a
// request it holds, and a long-lived caller (the MCP server) probing a
// stuck mount again and again would otherwise gather one per probe. Past
// it a probe answers errNoAnswer at once, starting nothing.
const maxHeldProbes = 8

// heldProbes counts the probe children left behind and not yet ended.
var heldProbes atomic.Int32

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
// paths in order
// (probeOnce, in mode) and writes one line per path on out, "ok" or
// "err ERRNO OP MESSAGE" (ERRNO 0 and a message of at most
// maxProbeMessage bytes for an error that carries no errno; OP the system
// call), and stops after the first "ok". It returns the exit status: 0,
// or 2 for an unknown mode.
func probeChildMain(mode string, paths []string, out io.Writer) int {
	if mode != probeStat && mode != probeMount {
		fmt.Fprintf(os.Stderr, "rubinofs: unknown probe mode %q\n", mode)
		return 2
	}
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
		op, msg := "stat", ""
		var pe *os.PathError
		if errors.As(err, &pe) {
			op = pe.Op
		}
		if errno == 0 {
			msg = strings.ReplaceAll(err.Error(), "\n", " ")
			if len(msg) > maxProbeMessage {
				msg = msg[:maxProbeMessage]
			}
		}
		fmt.Fprintf(w, "err %d %s %s\n", int(errno), op, msg)
		w.Flush() // the parent times each line
	}
	return 0
}

// probeStats stats paths in order, in a child process (the CLI binary
// again, probeChildMain), until one exists, and calls each with the
// result of every path stat'ed: nil, the stat's error (an *os.PathError
// carrying its errno, or one with the message alone when it had no
// errno), or errNoAnswer when a stat did not finish within
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
// probe may take. The child is started with argv[0] probeChildArg0 and
// probeChildEnv set to mode (isProbeChild).
func probeIn(mode string, timeout time.Duration, paths []string, each func(i int, err error) bool) {
	if os.Getenv(probeChildEnv) != "" {
		// A probe child (or a process whose environment says it is one)
		// that got here (a test binary run as one without
		// its TestMain's check) must not start another, and that one
		// another: the stats run here instead.
		inProcess(mode, timeout, paths, each)
		return
	}
	if heldProbes.Load() >= maxHeldProbes {
		// Children already wait on requests a daemon holds: no more of
		// them, and no request of this process's own either.
		each(0, errNoAnswer)
		return
	}
	cmd := exec.Command(probeExe, paths...)
	cmd.Args[0] = probeChildArg0
	cmd.Env = append(os.Environ(), probeChildEnv+"="+mode)
	// /dev/null for stdin and stderr: a stuck child holds none of the
	// command's standard pipes. A descriptor the command inherited
	// without close-on-exec (a make jobserver's) passes to the child as
	// to any program the command runs; closing it in the child would
	// also close the Go runtime's own (docs/DESIGN.md#cli-probe-child).
	cmd.Stdin, cmd.Stderr = nil, nil
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		inProcess(mode, timeout, paths, each)
		return
	}
	lines := make(chan string)
	var scanErr error // read once lines is closed
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		scanErr = sc.Err()
		if scanErr != nil {
			io.Copy(io.Discard, out) // the child never blocks on a full pipe
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
		heldProbes.Add(1)
		go func() {
			defer heldProbes.Add(-1)
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
				if scanErr != nil {
					// An unreadable answer: the child may still be
					// probing; it is killed, not waited for.
					each(i, fmt.Errorf("stat %s: reading the probe's answer: %w", p, scanErr))
					return
				}
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
				ended = scanErr == nil
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
	ended = scanErr == nil
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

// probeResult turns one line of the probe child's ("ok", "err ERRNO OP
// MESSAGE") into the result of the probe of p.
func probeResult(p, line string) error {
	if line == "ok" {
		return nil
	}
	f := strings.SplitN(line, " ", 4)
	if len(f) == 4 && f[0] == "err" {
		if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
			return &os.PathError{Op: f[2], Path: p, Err: syscall.Errno(n)}
		}
		return errors.New(f[3])
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
