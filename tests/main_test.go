package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// TestMain runs the real-mount tests in a temporary directory of their own,
// removes it with the built CLI binary, and then fails the package if a
// test left one of this run's processes or mounts behind. CI (.ci/run)
// checks the same after the whole suite, for its own directory; checking
// here as well names the leftover in this package's output, with its
// command line, instead of a bare CI failure.
//
// The machine may be shared: other runs of these tests, or a user's own
// rubinofs, may mount and unmount fuse.rubinofs file systems under the same
// /tmp at any time. So this run judges only what is provably its own: the
// mountpoints registered in ownMounts and any mount under the run's
// directory (runDir, made TMPDIR for the tests and every process they
// start), and those of its descendants whose executable is the CLI binary
// this run built (binDir, inside runDir).
func TestMain(m *testing.M) {
	// A child process that runs this binary again for a test ends with
	// os.Exit, before the removal below: its run directory must be made
	// inside its parent's (TMPDIR), which the parent removes.
	for _, child := range []string{"RUBINOFS_POSIX_CHILD", "RUBINOFS_TRUST_CHILD"} {
		if os.Getenv(child) != "" && os.Getenv("TMPDIR") == "" {
			fmt.Fprintf(os.Stderr, "%s is set but TMPDIR is not: the child's run directory would be left in %s\n", child, os.TempDir())
			os.Exit(2)
		}
	}
	var err error
	runDir, err = os.MkdirTemp("", "rubinofs-tests-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "making the run's directory: %v\n", err)
		os.Exit(2)
	}
	// MkdirTemp makes it 0700; it takes the permissions of the directory
	// it stands in for (/tmp: 1777), so that a test's child running as
	// another user (nobody) reaches its files as it would there.
	if fi, err := os.Stat(filepath.Dir(runDir)); err == nil {
		os.Chmod(runDir, fi.Mode()&(os.ModePerm|os.ModeSticky))
	}
	// t.TempDir, os.MkdirTemp("", ...) and every child process (the CLI's
	// demo, shells, git) now make their temporary files, and mountpoints,
	// under runDir.
	os.Setenv("TMPDIR", runDir)
	ownMounts.addRoot(runDir)
	// Every daemon a test starts with `mount --daemon` (directly, through
	// mount(8)'s helper or systemd's way) is orphaned when its launcher
	// exits. As a child subreaper this process adopts it instead of init,
	// which in a container may never reap it; it also keeps every daemon
	// of the run among this process's descendants (strayProcs). Tests reap the daemons they
	// know (waitPidGone); reapOrphans takes whatever else exited.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "PR_SET_CHILD_SUBREAPER: %v\n", err)
		os.Exit(2)
	}
	code := m.Run()
	if left := leftovers(10 * time.Second); left != "" {
		fmt.Fprintf(os.Stderr, "FAIL: tests left these behind:\n%s", left)
		if code == 0 {
			code = 1
		}
	}
	// Never remove a directory with a mount below it: RemoveAll would
	// delete a workspace through its mount. A leftover is reported above.
	if mounts := mountsUnder(readMountTable(), runDir); len(mounts) == 0 {
		os.RemoveAll(runDir)
	} else {
		fmt.Fprintf(os.Stderr, "kept %s: mounts below it: %v\n", runDir, mounts)
	}
	os.Exit(code)
}

// runDir is this test process's own temporary directory, TMPDIR for the
// tests (TestMain). A helper process started from the test binary (a
// stress worker, a faults helper) makes its own inside its parent's.
var runDir string

// mountRegistry is the set of mountpoints a test run owns: the mountpoints
// the helpers registered (add) and every path below a registered root
// (addRoot). Safe for concurrent use.
type mountRegistry struct {
	mu     sync.Mutex
	mounts map[string]bool
	roots  []string
}

// ownMounts is this run's registry: newMount, the CLI helpers (cliMountAt,
// startForeground) and any test that mounts elsewhere register their
// mountpoints here, and runDir is a root. The leftover check looks at these
// and nothing else.
var ownMounts = &mountRegistry{}

// add registers mountpoint mnt (an absolute, clean path) as this run's.
func (r *mountRegistry) add(mnt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mounts == nil {
		r.mounts = map[string]bool{}
	}
	r.mounts[filepath.Clean(mnt)] = true
}

// addRoot registers dir: every mountpoint below it is this run's.
func (r *mountRegistry) addRoot(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roots = append(r.roots, filepath.Clean(dir))
}

// owns reports whether mountpoint mnt is this run's.
func (r *mountRegistry) owns(mnt string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mounts[mnt] {
		return true
	}
	for _, root := range r.roots {
		if mnt == root || strings.HasPrefix(mnt, root+"/") {
			return true
		}
	}
	return false
}

// mountEntry is one line of a mount table (/proc/self/mounts): the
// mountpoint, unescaped, and the file system type.
type mountEntry struct{ dir, fstype string }

// readMountTable returns this process's mount table; nil if it cannot be
// read (no /proc).
func readMountTable() []mountEntry {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	return parseMountTable(string(b))
}

// parseMountTable parses the text of /proc/self/mounts (fstab format:
// SOURCE DIR TYPE OPTIONS 0 0, with space, tab, newline and backslash in
// a field written as octal escapes \040 \011 \012 \134).
func parseMountTable(text string) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		out = append(out, mountEntry{dir: procfs.UnescapeMountField(f[1]), fstype: f[2]})
	}
	return out
}

// ownRubinofsMounts returns the fuse.rubinofs mountpoints of table that
// reg owns, in table order: this run's leftovers when nothing should be
// mounted any more. Mounts of other processes, anywhere, are not looked at.
func ownRubinofsMounts(table []mountEntry, reg *mountRegistry) []string {
	var out []string
	for _, e := range table {
		if e.fstype == "fuse.rubinofs" && reg.owns(e.dir) {
			out = append(out, e.dir)
		}
	}
	return out
}

// mountsUnder returns the mountpoints of table, of any type, at or below
// dir.
func mountsUnder(table []mountEntry, dir string) []string {
	var out []string
	for _, e := range table {
		if e.dir == dir || strings.HasPrefix(e.dir, dir+"/") {
			out = append(out, e.dir)
		}
	}
	return out
}

// leftovers waits up to grace for the processes of this run's CLI binary to
// exit and for this run's fuse.rubinofs mounts (ownMounts) to go, and
// describes what is still there: one line per process (pid, state, command
// line) and per mount. A daemon that is merely slow to exit after its
// unmount gets the grace; a real leak does not pass. Leftover processes
// are then killed, by pid, so that one leak does not cascade into the next
// package or CI step; mounts are only reported.
func leftovers(grace time.Duration) string {
	deadline := time.Now().Add(grace)
	for {
		reapOrphans()
		procs, mounts := strayProcs(), ownRubinofsMounts(readMountTable(), ownMounts)
		if len(procs) == 0 && len(mounts) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range procs {
				var cmdline, stat []byte // bounded: a stuck process may not answer
				bounded(func() { cmdline, _ = os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline")) })
				bounded(func() { stat, _ = os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat")) })
				fmt.Fprintf(&b, "  process %d (%s): %s\n", p, strings.TrimSpace(string(stat)), strings.ReplaceAll(string(cmdline), "\x00", " "))
				unix.Kill(p, unix.SIGKILL)
				unix.Wait4(p, nil, 0, nil) // reap it if it is our (adopted) child; ECHILD otherwise
			}
			for _, mnt := range mounts {
				fmt.Fprintf(&b, "  mount %s\n", mnt)
			}
			return b.String()
		}
		time.Sleep(50 * time.Millisecond) // polling for exit; not a synchronisation sleep
	}
}

// strayProcs lists the live processes of this run's CLI binary (binDir),
// daemons included: they re-execute that binary (ownProcs over
// readProcTable). They are found by executable path among this process's
// descendants, never by name: another rubinofs on the machine is not this
// run's. Every daemon a test starts stays a descendant: TestMain makes this
// process the subreaper of orphans.
func strayProcs() []int {
	if binDir == "" {
		return nil
	}
	return ownProcs(readProcTable(), os.Getpid(), binDir, procExe)
}

// procReadTimeout bounds each /proc read of the leftover check. On a shared
// machine another process may be stuck (in an exec that waits on a FUSE
// reply, say) so that reading its /proc entry blocks; an unbounded read
// would hang this run on someone else's process.
const procReadTimeout = 2 * time.Second

// bounded runs read in a goroutine and reports whether it returned within
// procReadTimeout. A read that does not return is abandoned; its goroutine
// stays blocked until the process exits.
func bounded(read func()) bool {
	done := make(chan struct{})
	go func() { read(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(procReadTimeout): // a bound, not a synchronisation
		return false
	}
}

// procStat is what the leftover check needs of one process, from
// /proc/PID/stat: its pid, its parent's pid and its state letter (Z and X:
// exited, waiting to be reaped).
type procStat struct {
	pid, ppid int
	state     byte
}

// readProcTable reads /proc/PID/stat of every process; a process that
// exits meanwhile, or whose stat does not answer within procReadTimeout,
// is left out.
func readProcTable() []procStat {
	ents, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var b []byte
		if !bounded(func() { b, _ = os.ReadFile(filepath.Join("/proc", e.Name(), "stat")) }) {
			continue
		}
		if st, ok := parseProcStat(pid, b); ok {
			out = append(out, st)
		}
	}
	return out
}

// parseProcStat parses a /proc/PID/stat line: "PID (COMM) STATE PPID ...",
// where COMM may hold spaces and parentheses.
func parseProcStat(pid int, b []byte) (procStat, bool) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, ppid: ppid, state: f[0][0]}, true
}

// procExe returns the target of /proc/PID/exe; "" when it cannot be read
// (the process exited, or it is a zombie), and "?" when the read did not
// answer within procReadTimeout.
func procExe(pid int) string {
	var exe string
	if !bounded(func() { exe, _ = os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe")) }) {
		return "?"
	}
	return exe
}

// ownProcs returns, from table, the live descendants of process self whose
// executable (exeOf) lies in dir. Only descendants are looked at: exeOf is
// never asked about anyone else's process. A descendant whose executable
// does not answer ("?") is counted too: it is this run's, and stuck.
// Zombies are not counted: they hold nothing and their waiters (this
// process, as subreaper) reap them.
func ownProcs(table []procStat, self int, dir string, exeOf func(pid int) string) []int {
	children := map[int][]procStat{}
	for _, p := range table {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []int
	queue := []int{self}
	seen := map[int]bool{self: true}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, p := range children[parent] {
			if seen[p.pid] {
				continue
			}
			seen[p.pid] = true
			queue = append(queue, p.pid)
			if p.state == 'Z' || p.state == 'X' {
				continue
			}
			if exe := exeOf(p.pid); exe == "?" || strings.HasPrefix(exe, dir+"/") {
				out = append(out, p.pid)
			}
		}
	}
	return out
}

// reapOrphans reaps every child of this process that has exited, without
// waiting for live ones: after m.Run no exec.Cmd is left to wait for its
// own child, so what remains are adopted orphans.
func reapOrphans() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
