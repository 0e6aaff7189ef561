package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain runs the real-mount tests, removes the built CLI binary, and then
// fails the package if a test left a rubinofs process or a fuse.rubinofs
// mount behind. CI (.ci/run) checks the same after the whole suite; checking
// here as well names the leftover in this package's output, with its command
// line, instead of a bare CI failure.
func TestMain(m *testing.M) {
	for _, mnt := range strayMounts() {
		mountsBefore[mnt] = true
	}
	// Every daemon a test starts with `mount --daemon` (directly, through
	// mount(8)'s helper or systemd's way) is orphaned when its launcher
	// exits. As a child subreaper this process adopts it instead of init,
	// which in a container may never reap it: a zombie named rubinofs
	// would then fail CI's leftover check. Tests reap the daemons they
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
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// leftovers waits up to grace for the processes of this run's CLI binary to
// exit and for fuse.rubinofs mounts under the
// temporary directory to go, and describes what is still there: one line per
// process (pid, state, command line) and per mount. A daemon that is merely
// slow to exit after its unmount gets the grace; a real leak does not pass.
// Leftover processes are then killed, so that one leak does not cascade
// into the next package or CI step; mounts are only reported (on a shared
// machine another run's live mount may be among them).
func leftovers(grace time.Duration) string {
	deadline := time.Now().Add(grace)
	for {
		reapOrphans()
		procs, mounts := strayProcs(), strayMounts()
		if len(procs) == 0 && len(mounts) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range procs {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
				stat, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
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

// mountsBefore are the fuse.rubinofs mounts that existed before this test
// binary started (someone else's); they are not this run's leftovers.
var mountsBefore = map[string]bool{}

// strayProcs lists live processes running the CLI binary this test run
// built (binDir), daemons included: they re-execute that binary. Zombies
// are not counted: they hold nothing and their waiters reap them.
func strayProcs() []int {
	if binDir == "" {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, binDir+"/") || gone(pid) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// strayMounts lists fuse.rubinofs mountpoints under os.TempDir(), where
// every test mounts, that were not there before the run (mountsBefore).
func strayMounts() []string {
	b, _ := os.ReadFile("/proc/mounts")
	var out []string
	tmp := os.TempDir()
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "fuse.rubinofs" && strings.HasPrefix(f[1], tmp) && !mountsBefore[f[1]] {
			out = append(out, f[1])
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
