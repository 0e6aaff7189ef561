package tests

// The callers of TestTrustTable: a copy of this test binary run as uid and
// gid 65534 with no supplementary groups (setpriv), or as the test's own
// uid inside a session of its own (rubinofs run), which performs
// control-file operations and reports each outcome as JSON. Reads never
// wait: every file is opened O_NONBLOCK, so a file that would block (the
// access log, a task's wait) answers EAGAIN, which counts as readable. The
// one blocking read is a task's wait after the child spawned that task
// itself (trustOp "spawn"): it returns when the task ends.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// trustOp is one operation of the child.
type trustOp struct {
	// Op is read, write, clone, readlink, readdir, spawn (write Data to
	// the agents clone file at Path, then read the new task's wait file,
	// blocking) or hold (open Path, print "TRUSTREADY", wait for a line
	// on stdin, then read what is pending).
	Op   string `json:"op"`
	Path string `json:"path"`
	Data string `json:"data,omitempty"`
}

// trustResult is the outcome of one trustOp: "ok" or the errno's name,
// what was read (a clone file's reply, a listing as one name a line), and
// for a failed write the reason the handle gave ("error: REASON").
type trustResult struct {
	Errno  string `json:"errno"`
	Data   string `json:"data,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// trustReadMax bounds what the child reads from one file, in bytes.
const trustReadMax = 4 << 20

// TestTrustTableChild is the child process of TestTrustTable (as uid
// 65534, or inside a session of the test's uid): it runs the
// operations in $RUBINOFS_TRUST_CHILD and prints "TRUSTCHILD <results>".
// Without that variable it does nothing.
func TestTrustTableChild(t *testing.T) {
	spec := os.Getenv("RUBINOFS_TRUST_CHILD")
	if spec == "" {
		t.Skip("the child process of TestTrustTable")
	}
	var ops []trustOp
	if err := json.Unmarshal([]byte(spec), &ops); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	results := make([]trustResult, len(ops))
	for i, o := range ops {
		results[i] = runTrustOp(o)
	}
	b, _ := json.Marshal(results)
	fmt.Printf("TRUSTCHILD %s\n", b)
	os.Exit(0)
}

func errnoOf(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return "error " + err.Error()
}

// readAll reads fd until end of file, EAGAIN or trustReadMax bytes.
// EAGAIN (nothing pending on a non-blocking handle) ends the read and is
// not an error.
func readAll(fd int) (string, error) {
	var out bytes.Buffer
	buf := make([]byte, 64<<10)
	for out.Len() < trustReadMax {
		n, err := unix.Read(fd, buf)
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			return out.String(), err
		}
		if n == 0 {
			break
		}
		out.Write(buf[:n])
	}
	return out.String(), nil
}

// reasonOf reads the "error: REASON" line a control file leaves on a
// handle after a failed write.
func reasonOf(fd int) string {
	buf := make([]byte, 4096)
	n, _ := unix.Pread(fd, buf, 0)
	if n <= 0 {
		return ""
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	return strings.TrimSpace(strings.TrimPrefix(line, "error:"))
}

func runTrustOp(o trustOp) trustResult {
	switch o.Op {
	case "read":
		fd, err := unix.Open(o.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return trustResult{Errno: errnoOf(err)}
		}
		defer unix.Close(fd)
		data, err := readAll(fd)
		return trustResult{Errno: errnoOf(err), Data: data}
	case "write":
		fd, err := unix.Open(o.Path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return trustResult{Errno: errnoOf(err)}
		}
		_, werr := unix.Write(fd, []byte(o.Data))
		reason := ""
		if werr != nil {
			reason = reasonOf(fd)
		}
		// An append file passes a final partial line at close.
		cerr := unix.Close(fd)
		if werr == nil {
			werr = cerr
		}
		return trustResult{Errno: errnoOf(werr), Reason: reason}
	case "clone":
		fd, err := unix.Open(o.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return trustResult{Errno: errnoOf(err)}
		}
		defer unix.Close(fd)
		if _, err := unix.Write(fd, []byte(o.Data)); err != nil {
			return trustResult{Errno: errnoOf(err), Reason: reasonOf(fd)}
		}
		buf := make([]byte, trustReadMax)
		n, err := unix.Pread(fd, buf, 0)
		if n < 0 {
			n = 0
		}
		return trustResult{Errno: errnoOf(err), Data: string(buf[:n])}
	case "readlink":
		target, err := os.Readlink(o.Path)
		return trustResult{Errno: errnoOf(err), Data: target}
	case "readdir":
		ents, err := os.ReadDir(o.Path)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return trustResult{Errno: errnoOf(err), Data: strings.Join(names, "\n")}
	case "spawn":
		r := runTrustOp(trustOp{Op: "clone", Path: filepath.Join(o.Path, "clone"), Data: o.Data})
		if r.Errno != "ok" {
			return r
		}
		id := strings.TrimSpace(r.Data)
		b, err := os.ReadFile(filepath.Join(o.Path, id, "wait")) // blocks until the task ends
		return trustResult{Errno: errnoOf(err), Data: string(b)}
	case "hold":
		fd, err := unix.Open(o.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Println("TRUSTREADY")
			return trustResult{Errno: errnoOf(err)}
		}
		defer unix.Close(fd)
		fmt.Println("TRUSTREADY")
		bufio.NewReader(os.Stdin).ReadString('\n')
		data, err := readAll(fd)
		return trustResult{Errno: errnoOf(err), Data: data}
	}
	return trustResult{Errno: "error unknown op " + o.Op}
}

// trustChild is a running child binary: its stdout gives its results,
// its stdin stays open for a hold.
type trustChild struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdin  *os.File
	out    *bufio.Reader
	stderr bytes.Buffer
	n      int
}

// startTrustChild starts the child binary bin as uid 65534 (setpriv)
// with ops.
func startTrustChild(t *testing.T, bin string, ops []trustOp) *trustChild {
	t.Helper()
	return startTrustChildAs(t, bin, ops, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
}

// startTrustChildAs starts the child binary bin with ops under the
// command wrap (its arguments then bin's): setpriv for another uid,
// `rubinofs run --session NAME --` for a session of the test's own uid.
func startTrustChildAs(t *testing.T, bin string, ops []trustOp, wrap ...string) *trustChild {
	t.Helper()
	spec, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	args := append(append(wrap[1:len(wrap):len(wrap)], bin), "-test.run=^TestTrustTableChild$", "-test.timeout=3m")
	cmd := exec.CommandContext(ctx, wrap[0], args...)
	cmd.Dir = "/"
	// atexit_sleep_ms: a race-enabled binary otherwise sleeps 1 s in exit.
	// TMPDIR: the child's TestMain makes its run directory there, and
	// the child exits without removing it; the binary's directory (the
	// test's own, 0755) is removed with the test.
	tmp := filepath.Join(filepath.Dir(bin), "tmp")
	if err := os.MkdirAll(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	cmd.Env = []string{"RUBINOFS_TRUST_CHILD=" + string(spec), "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0", "TMPDIR=" + tmp}
	c := &trustChild{cmd: cmd, cancel: cancel, n: len(ops)}
	cmd.Stderr = &c.stderr
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = pr
	c.stdin = pw
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	return c
}

// line returns the child's next line of output.
func (c *trustChild) line() string {
	s, _ := c.out.ReadString('\n')
	return strings.TrimRight(s, "\n")
}

// results waits for the child and returns its results, one per op.
func (c *trustChild) results(t *testing.T) []trustResult {
	t.Helper()
	defer c.cancel()
	c.stdin.Close()
	var results []trustResult
	var rest strings.Builder
	for {
		s, err := c.out.ReadString('\n')
		if r, ok := strings.CutPrefix(strings.TrimRight(s, "\n"), "TRUSTCHILD "); ok {
			if err := json.Unmarshal([]byte(r), &results); err != nil {
				t.Fatalf("child: %v in %q", err, r)
			}
		} else {
			rest.WriteString(s)
		}
		if err != nil {
			break
		}
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child as uid 65534: %v\n%s%s", err, rest.String(), c.stderr.String())
	}
	if len(results) != c.n {
		t.Fatalf("child: %d results for %d operations\n%s%s", len(results), c.n, rest.String(), c.stderr.String())
	}
	return results
}
