package tests

// The leftover check of TestMain judges only this run's own mounts and
// processes, so that the suite runs clean on a machine where other
// fuse.rubinofs mounts come and go under the same /tmp.

import (
	"bytes"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/procfs"
)

// TestLeftoversOwnMountsOnly checks the leftover logic against an
// injected mount table: it reports the registered mountpoints and those
// below a registered root, of type fuse.rubinofs only, and nothing of
// anyone else's, wherever it is mounted.
func TestLeftoversOwnMountsOnly(t *testing.T) {
	reg := &mountRegistry{}
	reg.addRoot("/tmp/rubinofs-tests-1")
	reg.add("/srv/own mnt") // registered outside the root; a space is escaped in the table
	table := parseMountTable(`sysfs /sys sysfs rw 0 0
/tmp/other/ws /tmp/other/mnt fuse.rubinofs rw,user_id=0 0 0
/tmp/rubinofs-tests-1/ws /tmp/rubinofs-tests-1/TestA/001/mnt fuse.rubinofs rw 0 0
/tmp/rubinofs-tests-10/ws /tmp/rubinofs-tests-10/TestB/001/mnt fuse.rubinofs rw 0 0
/tmp/rubinofs-tests-1/x /tmp/rubinofs-tests-1/sshfs fuse.sshfs rw 0 0
/srv/ws /srv/own\040mnt fuse.rubinofs rw 0 0
/srv/ws /srv/own fuse.rubinofs rw 0 0
/tmp/a /tmp/rubinofs-tests-1 fuse.rubinofs rw 0 0
`)
	got := ownRubinofsMounts(table, reg)
	want := []string{"/tmp/rubinofs-tests-1/TestA/001/mnt", "/srv/own mnt", "/tmp/rubinofs-tests-1"}
	if !slices.Equal(got, want) {
		t.Errorf("own leftovers %q, want %q", got, want)
	}
	if under := mountsUnder(table, "/tmp/rubinofs-tests-1"); !slices.Equal(under, []string{
		"/tmp/rubinofs-tests-1/TestA/001/mnt", "/tmp/rubinofs-tests-1/sshfs", "/tmp/rubinofs-tests-1"}) {
		t.Errorf("mounts under the run's directory: %q", under)
	}
	if got := procfs.UnescapeMountField(`a\134b\011c\040`); got != "a\\b\tc " {
		t.Errorf("unescape: %q", got)
	}
}

// TestLeftoversIgnoreForeignMount mounts a fuse.rubinofs file system the
// way another process on the machine would, in the temporary directory the
// suite was started with but outside this run's registry, next to a mount
// of this run's (newMount): the leftover check sees only the run's own,
// although the foreign one is in the mount table. Both are live, as a
// leaked mount would be at the end of the run.
func TestLeftoversIgnoreForeignMount(t *testing.T) {
	requireFuse(t)
	foreign, err := os.MkdirTemp(filepath.Dir(runDir), "foreign-")
	if err != nil {
		t.Fatal(err)
	}
	ws, mnt := filepath.Join(foreign, "ws"), filepath.Join(foreign, "mnt")
	for _, d := range []string{ws, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d, err := daemon.Start(daemon.Config{Workspace: ws, Mountpoint: mnt, StateDir: filepath.Join(foreign, "state"),
		Guard: config.Guard{Mode: guard.ModeEnforce}, Cache: config.Cache{CacheTimeout: time.Second}, Version: "test", Slog: slog.New(slog.DiscardHandler)})
	if err != nil {
		os.RemoveAll(foreign)
		t.Fatalf("foreign mount: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("unmounting the foreign mount: %v", err)
		}
		<-d.Done()
		if !isMounted(t, mnt) {
			os.RemoveAll(foreign)
		}
	})
	own := newMount(t, map[string]string{"f": "x\n"}, nil)

	table := readMountTable()
	if !slices.Contains(ownRubinofsMounts(table, &mountRegistry{roots: []string{foreign}}), mnt) {
		t.Fatalf("the foreign mount %s is not in the mount table as fuse.rubinofs", mnt)
	}
	got := ownRubinofsMounts(table, ownMounts)
	if slices.Contains(got, mnt) {
		t.Errorf("the leftover check counts the foreign mount %s as this run's: %q", mnt, got)
	}
	if !slices.Contains(got, own.mnt) {
		t.Errorf("the leftover check misses this run's live mount %s: %q", own.mnt, got)
	}
}

// TestLeftoversOwnProcessTree checks the process logic against an
// injected process table: only live descendants of the test process whose
// executable lies in the binary's directory count, or whose executable
// does not answer; nobody else's executable is even looked up.
func TestLeftoversOwnProcessTree(t *testing.T) {
	const self, bin = 100, "/tmp/run/rubinofs-bin-1"
	table := []procStat{
		{pid: 1, ppid: 0, state: 'S'},
		{pid: 100, ppid: 1, state: 'S'},   // the test process
		{pid: 101, ppid: 100, state: 'S'}, // a shell it started
		{pid: 102, ppid: 101, state: 'S'}, // the shell's rubinofs
		{pid: 103, ppid: 100, state: 'S'}, // an adopted daemon
		{pid: 104, ppid: 100, state: 'Z'}, // an exited daemon, not yet reaped
		{pid: 105, ppid: 100, state: 'D'}, // a daemon whose /proc does not answer
		{pid: 106, ppid: 100, state: 'S'}, // a process named rubinofs elsewhere
		{pid: 200, ppid: 1, state: 'S'},   // someone else's rubinofs
		{pid: 201, ppid: 1, state: 'D'},   // someone else's stuck process
	}
	exes := map[int]string{101: "/bin/sh", 102: bin + "/rubinofs", 103: bin + "/rubinofs",
		105: "?", 106: "/tmp/run/x/rubinofs", 200: bin + "/rubinofs", 201: "?"}
	var asked []int
	got := ownProcs(table, self, bin, func(pid int) string { asked = append(asked, pid); return exes[pid] })
	slices.Sort(got)
	if want := []int{102, 103, 105}; !slices.Equal(got, want) {
		t.Errorf("own processes %v, want %v", got, want)
	}
	for _, pid := range asked {
		if pid == 1 || pid >= 200 {
			t.Errorf("the executable of process %d, not a descendant, was looked up", pid)
		}
	}
	st, ok := parseProcStat(7, []byte("7 (a) b (c)) Z 3 7 7 0 -1"))
	if !ok || st != (procStat{pid: 7, ppid: 3, state: 'Z'}) {
		t.Errorf("parseProcStat: %+v %v", st, ok)
	}
}

// TestLeftoversJudgeOwnProcesses checks that the process check knows this
// run's CLI processes by executable path: a live daemon of the binary this
// run built is counted, a process merely named rubinofs is not.
func TestLeftoversJudgeOwnProcesses(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	fg := startForeground(t, dm.tmp, nil, true, "--state-dir", dm.state, dm.ws, dm.mnt)

	// A process named rubinofs that is not this run's binary: sleep,
	// copied under that name (comm and argv[0] "rubinofs").
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	impostor := filepath.Join(t.TempDir(), "rubinofs")
	if err := os.WriteFile(impostor, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(impostor, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	procs := strayProcs()
	if !slices.Contains(procs, fg.cmd.Process.Pid) {
		t.Errorf("the run's own daemon (pid %d) is not counted: %v", fg.cmd.Process.Pid, procs)
	}
	if slices.Contains(procs, cmd.Process.Pid) {
		t.Errorf("a foreign process named rubinofs (pid %d) is counted: %v", cmd.Process.Pid, procs)
	}
	if err := fg.stop(); err != nil {
		t.Fatalf("stopping the daemon: %v\n%s", err, fg.output())
	}
}

// TestDebugTraceStaysOutOfTestOutput mounts with Debug (go-fuse's request
// trace) and makes go-fuse log a line with the standard logger, not its
// Logger: a spliced read cut short at EOF ("tx N: OK fixup ..."), forced by
// shrinking a file behind the kernel's cached size (no watcher, one-hour
// attribute timeout) and read through a read-write handle, which the daemon
// serves (a read-only handle would be kernel passthrough and never reach
// it). That line must not reach what the standard logger
// wrote to before the mount (stderr: the output of `go test`); without
// RUBINOFS_TEST_DEBUG=1 it is dropped.
func TestDebugTraceStaysOutOfTestOutput(t *testing.T) {
	var before lockedBuffer
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(&before) // stands for stderr; restored after the unmount
	t.Cleanup(func() { log.SetOutput(out); log.SetFlags(flags) })

	long := strings.Repeat("x", 100000) + "\n"
	// /dev/fuse, even under RUBINOFS_TEST_IO_URING: the fixup is logged
	// on the path that splices a READ's reply.
	m := newMount(t, map[string]string{"f": long}, func(c *daemon.Config) { c.Debug, c.Watch, c.IOURing = true, false, false })
	if got := m.mustSh("wc -c < f"); strings.TrimSpace(got) != "100001" {
		t.Fatalf("size through the mount: %q", got)
	}
	// wc's read-only handle is a passthrough one; the kernel sends its
	// RELEASE in the background. While the daemon still holds it, an
	// O_RDWR open of the file can only be passthrough too and is decided
	// at open (stale: the file changed behind the mount).
	m.waitHandlesReleased()
	m.writeBacking("f", "short\n")   // the kernel still believes 100001 bytes
	m.mustSh("cat 0<>f > /dev/null") // O_RDWR: read by the daemon, not passthrough
	if before.String() != "" {
		t.Errorf("the standard logger wrote into the test's output during a Debug mount:\n%s", before.String())
	}
	if !traceFuse() && m.stdLogDropped.n.Load() == 0 {
		t.Errorf("go-fuse logged no short-read fixup with the standard logger: the test no longer reproduces the leak")
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
