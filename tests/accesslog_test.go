package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
)

// accessLogLine is the shape of an operation's line, JuiceFS's:
// "2026.11.24 10:00:00.123456 [uid:0,gid:0,pid:123,session:default] write (42,4096,0,7): OK (4096) <0.000031>".
var accessLogLine = regexp.MustCompile(`^\d{4}\.\d\d\.\d\d \d\d:\d\d:\d\d\.\d{6} \[uid:\d+,gid:\d+,pid:\d+,session:[^\]]+\] [a-z_]+ \(.*\): [A-Z0-9]+( \(\d+\))? <\d+\.\d{6}>$`)

// alogReader reads .rubino/accesslog line by line on a goroutine of its
// own, as `cat` would.
type alogReader struct {
	t     *testing.T
	f     *os.File
	lines chan string
	done  chan struct{}
	once  sync.Once
}

// openAccessLog opens .rubino/accesslog; if read, a goroutine starts
// reading lines. t.Cleanup closes it (before the mount's own cleanup
// unmounts: cleanups run last registered first).
func openAccessLog(t *testing.T, m *mount, read bool) *alogReader {
	t.Helper()
	f, err := os.Open(m.path(".rubino/accesslog"))
	if err != nil {
		t.Fatalf("opening .rubino/accesslog: %v", err)
	}
	r := &alogReader{t: t, f: f, lines: make(chan string, 1<<16), done: make(chan struct{})}
	if read {
		go r.loop()
	} else {
		close(r.done)
	}
	t.Cleanup(r.close)
	return r
}

// close closes the reader's file and waits for its goroutine: a read in
// flight returns at the latest with the next heartbeat, and the file is
// released then, so the mount is not kept busy.
func (r *alogReader) close() {
	r.once.Do(func() {
		r.f.Close()
		<-r.done
	})
}

func (r *alogReader) loop() {
	defer close(r.done)
	defer close(r.lines)
	sc := bufio.NewScanner(r.f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		r.lines <- sc.Text()
	}
}

// waitLine returns the first line for which match is true, failing after a
// generous deadline or when the feed ends. Lines read meanwhile are
// checked against the line format.
func (r *alogReader) waitLine(what string, match func(string) bool) string {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("the access log ended before %s", what)
			}
			if !strings.Contains(l, " #") && !accessLogLine.MatchString(l) {
				r.t.Errorf("malformed access-log line %q", l)
			}
			if match(l) {
				return l
			}
		case <-deadline:
			r.t.Fatalf("no access-log line with %s", what)
		}
	}
}

// TestAccessLogTwoReaders checks that two readers of .rubino/accesslog
// both see the operations of a shell command, one JuiceFS-style line each,
// including a refusal with its errno.
func TestAccessLogTwoReaders(t *testing.T) {
	m := newMount(t, map[string]string{"old.txt": "keep\n"}, nil)
	r1 := openAccessLog(t, m, true)
	r2 := openAccessLog(t, m, true)
	m.mustSh("echo hello > new-marker.txt && cat new-marker.txt >/dev/null")
	m.mustFail("echo blind > old.txt")
	for i, r := range []*alogReader{r1, r2} {
		create := r.waitLine("the create of new-marker.txt", func(l string) bool {
			return strings.Contains(l, "] create (1,new-marker.txt,") && strings.Contains(l, "): OK")
		})
		if !accessLogLine.MatchString(create) || !strings.Contains(create, "session:default") {
			t.Errorf("reader %d: create line %q lacks the caller or the format", i+1, create)
		}
		r.waitLine("a write of 6 bytes", func(l string) bool {
			return strings.Contains(l, "] write (") && strings.Contains(l, "): OK (6) <")
		})
		r.waitLine("a read", func(l string) bool { return strings.Contains(l, "] read (") })
		r.waitLine("the refused open of old.txt", func(l string) bool {
			return strings.Contains(l, "] open (") && strings.Contains(l, "): EACCES <")
		})
	}
}

// TestAccessLogSlowReader checks that a reader that never reads does not
// block the mount: a writer does more operations than a reader's buffer
// holds and completes, and the idle reader is told how many lines it lost
// (and the drop counter in .rubino/metrics moved).
func TestAccessLogSlowReader(t *testing.T) {
	m := newMount(t, nil, nil)
	idle := openAccessLog(t, m, false)
	const ops = 6000 // more than a reader's buffer (4096 lines)
	done := make(chan error, 1)
	go func() {
		for i := range ops {
			// Each lstat of a new name is one LOOKUP (ENOENT).
			if _, err := os.Lstat(m.path(fmt.Sprintf("absent-%d", i))); err == nil {
				done <- fmt.Errorf("absent-%d exists", i)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the writer did not complete: an idle access-log reader blocks the mount")
	}
	br := bufio.NewReader(idle.f)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the idle reader: %v", err)
	}
	mt := regexp.MustCompile(` #dropped (\d+) lines`).FindStringSubmatch(first)
	if mt == nil {
		t.Fatalf("first line of the idle reader is %q, want a #dropped report", first)
	}
	if n, _ := strconv.Atoi(mt[1]); n < 1 {
		t.Errorf("dropped %d lines, want > 0", n)
	}
	// The lines it kept are the oldest, whole and well-formed.
	next, err := br.ReadString('\n')
	if err != nil || !accessLogLine.MatchString(strings.TrimSuffix(next, "\n")) {
		t.Errorf("line after the report: %q %v", next, err)
	}
	if v, ok := metricValue(scrapeMetrics(t, m), "rubinofs_accesslog_dropped_lines_total"); !ok || v < 1 {
		t.Errorf("rubinofs_accesslog_dropped_lines_total = %v (present %v), want > 0", v, ok)
	}
}

// TestAccessLogHeartbeat checks that an idle reader gets heartbeat lines,
// that `cat` of the access log ends on SIGINT, and that the mount
// unmounts while a `cat` is reading (its read ends with end-of-file).
func TestAccessLogHeartbeat(t *testing.T) {
	m := newMount(t, nil, nil)
	r := openAccessLog(t, m, true)
	r.waitLine("a heartbeat", func(l string) bool { return strings.HasSuffix(l, " #heartbeat") })
	r.close()

	startCat := func() (*exec.Cmd, *bufio.Reader) {
		cmd := exec.Command("cat", m.path(".rubino/accesslog"))
		cmd.Dir = m.tmp
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) })
		br := bufio.NewReader(out)
		if _, err := br.ReadString('\n'); err != nil { // cat is reading
			t.Fatalf("cat of the access log: %v", err)
		}
		return cmd, br
	}
	waitExit := func(cmd *exec.Cmd, what string) error {
		ch := make(chan error, 1)
		go func() { ch <- cmd.Wait() }()
		select {
		case err := <-ch:
			return err
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("cat of the access log did not end %s", what)
		}
		return nil
	}

	cmd, _ := startCat()
	cmd.Process.Signal(syscall.SIGINT)
	if err := waitExit(cmd, "on SIGINT"); err == nil {
		t.Errorf("cat ended without an error after SIGINT, want killed by the signal")
	}

	cmd, br := startCat()
	go func() { // keep cat's pipe drained
		for {
			if _, err := br.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	closed := make(chan error, 1)
	go func() { closed <- m.d.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("unmounting with a reader of the access log: %v", err)
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill() // releases the mount, so Close and the cleanup end
		<-closed
		t.Fatal("the mount did not unmount while cat read the access log: its read never ended")
	}
	if err := waitExit(cmd, "at unmount"); err != nil {
		t.Errorf("cat of the access log at unmount: %v, want end-of-file (exit 0)", err)
	}
}

// TestAccessLogReadersBoundedPerUID: uid 65534 attaches at most 8 readers
// of .rubino/accesslog (the ninth open fails with EMFILE, and the reason
// is in .rubino/errors), and root still attaches one meanwhile. Each
// reader costs every request a look and holds up to 4,096 lines: 4,000
// readers of one uid took the daemon from 26 MB to 418 MB before.
func TestAccessLogReadersBoundedPerUID(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	m := newMount(t, nil, func(c *daemon.Config) { c.Options = append(c.Options, "allow_other") })
	openUp(t, m.tmp)
	script := `
import os, sys
fds, err = [], 0
for i in range(20):
    try:
        fds.append(os.open(".rubino/accesslog", os.O_RDONLY | os.O_NONBLOCK))
    except OSError as e:
        err = e.errno
        break
print(len(fds), err, flush=True)
sys.stdin.read()
`
	line := holdAsNobody(t, m.mnt, m.tmp, script)
	if got := strings.TrimSpace(line); got != "8 "+strconv.Itoa(int(syscall.EMFILE)) {
		t.Errorf("uid 65534 attached %q (readers, then errno), want 8 and EMFILE", got)
	}
	f, err := os.OpenFile(m.mnt+"/.rubino/accesslog", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("root could not attach a reader while 65534 held its 8: %v", err)
	}
	f.Close()
	if errs := m.mustSh("cat .rubino/errors"); !strings.Contains(errs, "readers of the access log are attached") {
		t.Errorf(".rubino/errors does not give the reason of the refused open:\n%s", errs)
	}
}
