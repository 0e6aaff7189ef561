package tests

// The shared helpers of the tests that drive the real CLI binary, as a user
// or systemd would (newMount in mount_helper_test.go is the helper of the
// tests that assemble the mount in this process): build the binary once
// (rubinofsBin), run it (cli, cliCode, runCLI, runCombined, runCmd), mount
// with it in the background (`--daemon`, mount(8): cliMount) or in the
// foreground (fgMount), wait for its daemons to exit (waitPidGone), read a
// mount's .rubino/status (readStatus) and wait for a condition (waitFor).
// Every wait is an event or a poll against a deadline (cliFailsafe), never
// a sleep that "waits long enough"; every process a test starts is waited
// for, and every daemon reaped, before the test returns.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/mounttest"
)

// cliFailsafe bounds every wait on the CLI binary, its daemons and the
// conditions of waitFor: a process still running after it is killed and
// the test fails, instead of hanging the suite. It is a failsafe, not a
// timing assertion: nothing a passing test waits for comes close to it.
const cliFailsafe = 60 * time.Second

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string // the temporary directory of the binary; TestMain removes it
)

// rubinofsBin builds the CLI (../cmd/rubinofs) once per test binary run and
// returns the path of the executable, named rubinofs as installed. Its
// directory (binDir, under the run's TMPDIR) is how the leftover checks
// (TestMain's, CI's) know this run's processes: by executable path, never
// by name. A failed build fails every test that asks, with the compiler's
// output.
func rubinofsBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "rubinofs-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "rubinofs")
		binErr = mounttest.BuildCLI(binPath) // its error carries go build's output
	})
	if binErr != nil {
		t.Fatalf("building rubinofs: %v", binErr)
	}
	return binPath
}

// cliCommand returns the command that runs the CLI binary with args in dir
// ("": the test's own directory) with env (nil: this process's
// environment), for runCombined or runCmd.
func cliCommand(t testing.TB, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(rubinofsBin(t), args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// runBounded starts cmd with the standard streams its caller set and waits
// for it; a cmd still running after cliFailsafe is killed, and hung says
// so. err is the error of Start or Wait (an *exec.ExitError for an exit
// status other than 0: see exitCode). Pipes that a process cmd left behind
// keeps open are closed 10 s after cmd exits (exec.Cmd.WaitDelay), so that
// a leaked descendant cannot hang the caller either. It never fails the
// test, for cleanups; tests use runCombined or runCmd.
func runBounded(cmd *exec.Cmd) (hung bool, err error) {
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return false, err
	}
	var killed atomic.Bool
	timer := time.AfterFunc(cliFailsafe, func() {
		killed.Store(true)
		cmd.Process.Kill()
	})
	err = cmd.Wait()
	timer.Stop()
	return killed.Load(), err
}

// runCmd runs cmd through runBounded and returns its error; it fails the
// test when cmd hung.
func runCmd(t testing.TB, cmd *exec.Cmd) error {
	t.Helper()
	hung, err := runBounded(cmd)
	if hung {
		t.Fatalf("%s hung (killed after %v)", strings.Join(cmd.Args, " "), cliFailsafe)
	}
	return err
}

// runCombined runs cmd through runBounded and returns its stdout and
// stderr, interleaved as written, and its error; it fails the test, with
// the output, when cmd hung.
func runCombined(t testing.TB, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	hung, err := runBounded(cmd)
	if hung {
		t.Fatalf("%s hung (killed after %v)\n%s", strings.Join(cmd.Args, " "), cliFailsafe, b.String())
	}
	return b.String(), err
}

// runCLI runs the CLI binary with args in dir ("": the test's directory)
// with env (nil: this process's environment) and returns its combined
// output and error (runCombined).
func runCLI(t testing.TB, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	return runCombined(t, cliCommand(t, dir, env, args...))
}

// cli runs the CLI binary with args in dir with this process's environment
// and returns its combined output and error (runCLI).
func cli(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	return runCLI(t, dir, nil, args...)
}

// cliCode is cli with the exit status instead of the error (exitCode); it
// fails the test when the binary did not run and exit by itself.
func cliCode(t testing.TB, dir string, args ...string) (string, int) {
	t.Helper()
	out, err := cli(t, dir, args...)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("rubinofs %v: %v\n%s", args, err, out)
	}
	return out, exitCode(err)
}

// exitCode returns the exit status of a finished command from the error of
// its Wait: 0 for nil, the status of an *exec.ExitError (-1 when a signal
// ended it), and -1 for any other error (it did not run).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// waitFor polls cond every 10 ms until it holds, and fails the test,
// naming what, when it still does not after cliFailsafe.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(cliFailsafe)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// adoptOrphans makes this test process the child subreaper
// (PR_SET_CHILD_SUBREAPER) until the test ends: a daemon of
// `rubinofs mount --daemon`, orphaned when its launcher exits, becomes our
// child, so the test reaps it (waitPidGone) instead of leaving a zombie
// named rubinofs to an init that may never reap it. No test runs in
// parallel, so the process-wide flag belongs to the running test.
func adoptOrphans(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	// Not reset at cleanup: TestMain keeps the flag for the whole run and
	// reaps what is left at the end (reapOrphans).
}

// gone reports whether process pid has exited: it has no /proc entry, or
// it is a zombie (state Z or X) that only waits for its parent to reap it.
func gone(pid int) bool {
	st, ok := procState("/proc/" + strconv.Itoa(pid) + "/stat")
	return !ok || st == 'Z' || st == 'X'
}

// procState returns the state letter of a /proc stat file (a process's or
// a thread's); ok is false when it cannot be read.
func procState(statFile string) (state byte, ok bool) {
	b, err := os.ReadFile(statFile)
	if err != nil {
		return 0, false
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
}

// waitPidGone waits up to cliFailsafe for process pid to exit and reports
// whether it did. A child of this process (a daemon adopted through
// adoptOrphans) is reaped with wait4; any other process is waited for until
// gone. Never call it for a child an exec.Cmd waits for: it would take that
// Wait's status. Polls every 5 ms against the deadline.
func waitPidGone(pid int) bool {
	deadline := time.Now().Add(cliFailsafe)
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		switch {
		case wpid == pid:
			return true
		case errors.Is(err, unix.ECHILD) && gone(pid):
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // polling for exit with a deadline
	}
}

// mountinfo returns the fields of the lines of /proc/self/mountinfo whose
// mount point (field 5) is path, in mount order (the last is on top).
func mountinfo(t testing.TB, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			out = append(out, f)
		}
	}
	return out
}

// isMounted reports whether path is a mount point.
func isMounted(t testing.TB, path string) bool {
	t.Helper()
	return len(mountinfo(t, path)) > 0
}

// readStatus returns the JSON document .rubino/status of the mount at mnt,
// failing the test when it cannot be read or parsed.
func readStatus(t testing.TB, mnt string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mnt, ".rubino", "status"))
	if err != nil {
		t.Fatalf("reading %s/.rubino/status: %v", mnt, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("status: %v\n%s", err, b)
	}
	return doc
}

// statusPid returns the pid of the daemon serving mnt from its
// .rubino/status, or 0 when it cannot be read (not mounted, a dead mount).
func statusPid(mnt string) int {
	b, err := os.ReadFile(filepath.Join(mnt, ".rubino", "status"))
	if err != nil {
		return 0
	}
	var doc struct {
		Pid int `json:"pid"`
	}
	if json.Unmarshal(b, &doc) != nil {
		return 0
	}
	return doc.Pid
}

// makeWorkspace makes the directory tmp/ws holding files (name → content,
// mode 0644) and returns its path.
func makeWorkspace(t testing.TB, tmp string, files map[string]string) string {
	t.Helper()
	ws := filepath.Join(tmp, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// cliMount is a workspace ws mounted at mnt, with state directory state, by
// a daemon process of the CLI binary: `rubinofs mount --daemon`
// (mountDaemon), or mount(8) and the mount.fuse.rubinofs helper (adopt).
// tmp is the test's directory, the working directory of the commands.
type cliMount struct {
	t                   *testing.T
	tmp, ws, mnt, state string
	pid                 int   // the daemon serving mnt now (0: none known)
	daemons             []int // the daemons not yet seen to exit, for the cleanup
}

// daemonPidRe finds the daemon's pid in the output of `mount --daemon`.
var daemonPidRe = regexp.MustCompile(`\(pid (\d+),`)

// cliMountAt prepares a CLI mount of ws at tmp/mnt with state directory
// state, and mounts nothing: it skips the test without FUSE (requireFuse),
// makes the mountpoint and registers it as this run's (ownMounts), makes this process the subreaper of orphaned
// daemons (adoptOrphans), and registers the cleanup. The cleanup unmounts
// mnt if it is still mounted, live or dead (`rubinofs unmount`, else
// `unmount --lazy`), then waits for every daemon the test started and did
// not see exit (mountDaemon, adopt, or the status of the mount it found) to
// exit, and reaps it; one still running after cliFailsafe is killed and
// fails the test, as does a mount left behind (it is detached). A cleanup
// that must run after this one (a tmpfs under ws or state) is registered
// before the call.
func cliMountAt(t *testing.T, tmp, ws, state string) *cliMount {
	t.Helper()
	requireFuse(t)
	adoptOrphans(t)
	m := &cliMount{t: t, tmp: tmp, ws: ws, mnt: filepath.Join(tmp, "mnt"), state: state}
	ownMounts.add(m.mnt)
	if err := os.MkdirAll(m.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.cleanup)
	return m
}

// cliDirs is cliMountAt for a new temporary directory tmp holding the
// workspace tmp/ws with files (makeWorkspace), the mountpoint tmp/mnt and
// the state directory tmp/state (made by the daemon).
func cliDirs(t *testing.T, files map[string]string) *cliMount {
	t.Helper()
	tmp := t.TempDir()
	return cliMountAt(t, tmp, makeWorkspace(t, tmp, files), filepath.Join(tmp, "state"))
}

// cliInPlaceDirs is cliDirs for an in-place mount: its mountpoint is the
// workspace itself, registered as this run's (ownMounts). The test mounts
// it (`mount --in-place`) and tracks the daemon (trackAgentDaemon).
func cliInPlaceDirs(t *testing.T, files map[string]string) *cliMount {
	t.Helper()
	m := cliDirs(t, files)
	m.mnt = m.ws
	ownMounts.add(m.ws)
	return m
}

// newCLIMount is cliMountAt followed by mountDaemon(extra...).
func newCLIMount(t *testing.T, tmp, ws, state string, extra ...string) *cliMount {
	t.Helper()
	m := cliMountAt(t, tmp, ws, state)
	m.mountDaemon(extra...)
	return m
}

// mountDaemon runs `rubinofs mount --daemon --state-dir STATE EXTRA... WS
// MNT` in tmp, fails the test unless it exits 0, learns the daemon's pid
// from its output ("(pid N,") and returns the output.
func (m *cliMount) mountDaemon(extra ...string) string {
	m.t.Helper()
	args := append([]string{"mount", "--daemon", "--state-dir", m.state}, extra...)
	out, code := cliCode(m.t, m.tmp, append(args, m.ws, m.mnt)...)
	if code != 0 {
		m.t.Fatalf("rubinofs mount --daemon: exit %d\n%s", code, out)
	}
	sm := daemonPidRe.FindStringSubmatch(out)
	if sm == nil {
		m.t.Fatalf("no daemon pid in %q", out)
	}
	pid, _ := strconv.Atoi(sm[1])
	m.track(pid)
	return out
}

// adopt learns the pid of the daemon serving mnt from .rubino/status, for a
// mount made otherwise than by mountDaemon (mount(8), the helper, a
// launcher with its own environment), so that waitDaemon and the cleanup
// wait for it; it returns the pid.
func (m *cliMount) adopt() int {
	m.t.Helper()
	pid, ok := m.status()["pid"].(float64)
	if !ok || pid <= 0 {
		m.t.Fatalf("status of %s has no pid", m.mnt)
	}
	m.track(int(pid))
	return int(pid)
}

// track makes pid the daemon serving mnt and one the cleanup waits for.
func (m *cliMount) track(pid int) {
	m.pid = pid
	for _, p := range m.daemons {
		if p == pid {
			return
		}
	}
	m.daemons = append(m.daemons, pid)
}

// exited records that daemon pid has exited and was reaped: the cleanup
// does not wait for it (its pid may be reused by then).
func (m *cliMount) exited(pid int) {
	for i, p := range m.daemons {
		if p == pid {
			m.daemons = append(m.daemons[:i], m.daemons[i+1:]...)
			return
		}
	}
}

// waitDaemon waits for the daemon (m.pid) to exit and reaps it
// (waitPidGone), failing the test when it is still running after
// cliFailsafe.
func (m *cliMount) waitDaemon() {
	m.t.Helper()
	if !waitPidGone(m.pid) {
		m.t.Fatalf("daemon pid %d still running %v after its unmount", m.pid, cliFailsafe)
	}
	m.exited(m.pid)
}

// unmount runs argv (none: `rubinofs unmount MNT`) and fails the test when
// it fails, then waits for the daemon to exit (waitDaemon), and fails the
// test when mnt is still mounted.
func (m *cliMount) unmount(argv ...string) {
	m.t.Helper()
	if len(argv) == 0 {
		argv = []string{rubinofsBin(m.t), "unmount", m.mnt}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = m.tmp
	if out, err := runCombined(m.t, cmd); err != nil {
		m.t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	m.waitDaemon()
	if m.mounted() {
		m.t.Fatalf("%s still mounted after %v", m.mnt, argv)
	}
}

// cleanup is registered by cliMountAt (see there).
func (m *cliMount) cleanup() {
	t := m.t
	if m.mounted() { // live, or dead after a kill
		if pid := statusPid(m.mnt); pid > 0 {
			m.track(pid)
		}
		var out bytes.Buffer
		cmd := exec.Command(rubinofsBin(t), "unmount", m.mnt)
		cmd.Dir, cmd.Stdout, cmd.Stderr = m.tmp, &out, &out
		if _, err := runBounded(cmd); err != nil {
			t.Logf("cleanup: unmount: %v %s; detaching", err, out.String())
			runBounded(exec.Command(rubinofsBin(t), "unmount", "--lazy", m.mnt))
		}
	}
	for _, pid := range m.daemons {
		if !waitPidGone(pid) {
			t.Errorf("daemon %d did not exit after its unmount; killing it", pid)
			syscall.Kill(pid, syscall.SIGKILL)
			waitPidGone(pid)
		}
	}
	m.daemons = nil
	if m.mounted() {
		syscall.Unmount(m.mnt, syscall.MNT_DETACH)
		t.Errorf("%s still mounted after the cleanup's unmount; detached", m.mnt)
	}
}

// mounted reports whether mnt is in the mount table.
func (m *cliMount) mounted() bool { return isMounted(m.t, m.mnt) }

// path returns rel under the mountpoint.
func (m *cliMount) path(rel string) string { return filepath.Join(m.mnt, rel) }

// status returns the mount's .rubino/status (readStatus).
func (m *cliMount) status() map[string]any {
	m.t.Helper()
	return readStatus(m.t, m.mnt)
}

// fgMount is a foreground `rubinofs mount` process (startForeground).
type fgMount struct {
	t   *testing.T
	cmd *exec.Cmd
	mnt string   // the mountpoint: the last argument
	log *os.File // the process's stdout and stderr; other processes may write it too
	// done is closed once the process has exited; err is then its Wait's.
	done chan struct{}
	err  error
}

// startForeground starts `rubinofs mount ARGS...` (the mountpoint last) in
// the foreground, in dir ("": the test's directory) with env (nil: this
// process's environment), with its stdout and stderr in a log file (output),
// and registers the mountpoint as this run's (ownMounts).
// With ready it returns once the process reports the mount answering on
// the readiness descriptor a --daemon launcher reads (RUBINOFS_READY_FD=3:
// a line "ok", or the error), and fails the test, with the log, when it
// reports an error, exits, or says nothing within cliFailsafe. Without
// ready it returns at once: the caller synchronises (systemd's READY=1;
// with RUBINOFS_READY_FD set the CLI sends no READY=1). The cleanup stops a
// process still running with SIGTERM (an unmount) and waits for it; one
// still running after cliFailsafe is killed and fails the test, as does a
// mount left behind after it exited (it is detached).
func startForeground(t *testing.T, dir string, env []string, ready bool, args ...string) *fgMount {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "mount-*.log")
	if err != nil {
		t.Fatal(err)
	}
	f := &fgMount{t: t, mnt: args[len(args)-1], log: logf, done: make(chan struct{})}
	if !filepath.IsAbs(f.mnt) {
		base := dir
		if base == "" {
			base, _ = os.Getwd()
		}
		f.mnt = filepath.Join(base, f.mnt)
	}
	ownMounts.add(f.mnt)
	f.cmd = cliCommand(t, dir, env, append([]string{"mount"}, args...)...)
	f.cmd.Stdout, f.cmd.Stderr = logf, logf // a file: no copying goroutines
	var r, w *os.File
	if ready {
		if r, w, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if f.cmd.Env == nil {
			f.cmd.Env = os.Environ()
		}
		f.cmd.Env = append(f.cmd.Env[:len(f.cmd.Env):len(f.cmd.Env)], "RUBINOFS_READY_FD=3")
		f.cmd.ExtraFiles = []*os.File{w}
	}
	err = f.cmd.Start()
	if w != nil {
		w.Close() // the child's copy is its own; ours would keep the read from seeing EOF
	}
	if err != nil {
		t.Fatalf("rubinofs mount %v: %v", args, err)
	}
	go func() {
		f.err = f.cmd.Wait()
		close(f.done)
	}()
	t.Cleanup(f.cleanup)
	if !ready {
		return f
	}
	r.SetReadDeadline(time.Now().Add(cliFailsafe))
	line, err := bufio.NewReader(r).ReadString('\n')
	if strings.TrimSpace(line) != "ok" {
		// It failed, exited, or hung before mounting.
		t.Fatalf("rubinofs mount %v: %q %v\n%s", args, line, err, f.output())
	}
	return f
}

// wait waits for the process to exit and returns its Wait's error; one
// still running after cliFailsafe is killed and fails the test.
func (f *fgMount) wait() error {
	f.t.Helper()
	select {
	case <-f.done:
	case <-time.After(cliFailsafe): // a failsafe, not a timing assertion
		f.cmd.Process.Kill()
		<-f.done
		f.t.Fatalf("rubinofs mount did not exit (killed after %v)\n%s", cliFailsafe, f.output())
	}
	return f.err
}

// stop sends SIGTERM (a clean unmount) and waits for the process (wait).
func (f *fgMount) stop() error {
	f.t.Helper()
	f.cmd.Process.Signal(syscall.SIGTERM)
	return f.wait()
}

// output returns what was written to the log so far.
func (f *fgMount) output() string {
	b, _ := os.ReadFile(f.log.Name())
	return string(b)
}

// cleanup is registered by startForeground (see there).
func (f *fgMount) cleanup() {
	select {
	case <-f.done:
	default:
		f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.done:
		case <-time.After(cliFailsafe): // a failsafe, not a timing assertion
			f.t.Errorf("rubinofs mount did not exit after SIGTERM; killing it")
			f.cmd.Process.Kill()
			<-f.done
		}
	}
	f.log.Close()
	if isMounted(f.t, f.mnt) {
		syscall.Unmount(f.mnt, syscall.MNT_DETACH)
		f.t.Errorf("%s still mounted after rubinofs mount exited; detached", f.mnt)
	}
}

// TestCLIDemo runs `rubinofs demo` and checks the tour shows a refused blind
// write, an allowed read-then-edit and the denial log.
func TestCLIDemo(t *testing.T) {
	requireFuse(t)
	out, err := cli(t, t.TempDir(), "demo")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"refused", "Permission denied", "read it first", "-> ok", `"code":"unread"`, `"code":"stale"`, "unmounted"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestCLIMountDaemon mounts with --daemon, reads status through the CLI and
// unmounts, waiting for the daemon to exit, and checks the clear errors of
// bad invocations.
func TestCLIMountDaemon(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	tmp, ws, mnt, state := m.tmp, m.ws, m.mnt, m.state
	m.mountDaemon()
	// The mount answers as soon as --daemon returned.
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "x\n" {
		t.Fatalf("reading through the daemon mount: %q %v", b, err)
	}
	out, err := cli(t, tmp, "status", mnt)
	if err != nil || !strings.Contains(out, "mode:       enforce") || !strings.Contains(out, ws) {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = cli(t, mnt, "status")
	if err != nil {
		t.Fatalf("status from inside the mount: %v\n%s", err, out)
	}
	// Mounting again on the same mountpoint is a clear error.
	out, err = cli(t, tmp, "mount", "--state-dir", state, ws, mnt)
	if err == nil || !strings.Contains(out, "already a mount point") {
		t.Fatalf("double mount: %v\n%s", err, out)
	}
	// rubinofs unmount; the daemon exits and the mountpoint is no longer
	// mounted.
	m.unmount()

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", filepath.Join(tmp, "nope"), mnt}, "workspace"},
		{[]string{"mount", ws, filepath.Join(tmp, "nope")}, "does not exist"},
		{[]string{"mount", ws, ws + "/.."}, "not empty"},
		{[]string{"mount", "--mode", "bogus", ws, mnt}, "mode"},
		{[]string{"mount", ws}, "usage"},
	} {
		out, err := cli(t, tmp, append([]string{c.args[0], "--state-dir", state}, c.args[1:]...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("rubinofs %v: err=%v, want an error mentioning %q:\n%s", c.args, err, c.want, out)
		}
	}
	if out, err := cli(t, tmp, "version"); err != nil || !strings.HasPrefix(out, "rubinofs ") {
		t.Errorf("version: %v %q", err, out)
	}
}
