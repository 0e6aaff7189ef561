// Package tests holds the cross-package real-mount tests. Every test mounts
// through newMount, the one shared helper: thin wrappers over
// internal/mounttest (which bench/ shares) that start the same assembly as
// `rubinofs mount` (package daemon), unmount in t.Cleanup, wait for the
// server to stop and fail on leaked descriptors of the daemon.
//
// Commands run with their working directory outside the mount and `cd` in
// the shell: a fork whose child chdirs into a mount served by the same
// process can deadlock (golang/go#11155).
package tests

import (
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/mounttest"
)

// requireFuse skips a real-mount test where /dev/fuse is absent, and fails
// it instead when RUBINOFS_REQUIRE_FUSE=1 (CI), so a CI run can never pass
// with its real-mount tests silently skipped.
func requireFuse(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("RUBINOFS_REQUIRE_FUSE") == "1" {
			t.Fatalf("RUBINOFS_REQUIRE_FUSE=1 but /dev/fuse is unusable: %v", err)
		}
		t.Skipf("real-mount test skipped: /dev/fuse is unusable: %v", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			if os.Getenv("RUBINOFS_REQUIRE_FUSE") == "1" {
				t.Fatalf("RUBINOFS_REQUIRE_FUSE=1 but not root and no fusermount3 (Debian package fuse3)")
			}
			t.Skip("real-mount test skipped: not root and no fusermount3 (Debian package fuse3)")
		}
	}
}

// mount is one mounted rubinofs for a test.
type mount struct {
	t     testing.TB
	ws    string // backing workspace
	mnt   string // mountpoint
	state string
	tmp   string
	d     *daemon.Daemon
	mt    *mounttest.Mount

	// mappedStores: the tool under test stores through shared mappings,
	// which inotify may report as outside edits (assertUntouched).
	mappedStores bool

	// stdLogDropped counts the standard logger's lines dropped while a
	// mount made with Debug lives (routeStdLog).
	stdLogDropped lineCounter
}

// newMount mounts a fresh temporary workspace. files are created in the
// backing directory before mounting; adjust edits the config. The change
// journal is on, as shipped, with its state under the test's temporary
// directory; a test that needs it off says why and passes withoutJournal
// (or calls it in its adjust). The
// mountpoint is registered as this run's (ownMounts); the daemon logs into
// the test's log (testLogWriter).
func newMount(t testing.TB, files map[string]string, adjust func(*daemon.Config)) *mount {
	t.Helper()
	requireFuse(t)
	tmp := t.TempDir()
	m := &mount{t: t, tmp: tmp, ws: filepath.Join(tmp, "ws"), mnt: filepath.Join(tmp, "mnt"), state: filepath.Join(tmp, "state")}
	for _, d := range []string{m.ws, m.mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		m.writeBacking(name, content)
	}
	// The daemon logs to the test's log (t.Log: shown for a failed test,
	// or with -v); go-fuse's per-request trace only with traceFuse.
	lw := newTestLogWriter(t)
	level := slog.LevelInfo
	if traceFuse() {
		level = slog.LevelDebug
	}
	cfg := daemon.Config{
		Workspace: m.ws, Mountpoint: m.mnt, Guard: config.Guard{Mode: guard.ModeEnforce},
		StateDir: m.state, Cache: config.Cache{CacheTimeout: time.Hour, Watch: true}, Version: "test",
		Debug: traceFuse(),
		Slog:  slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: level})),
	}
	withJournal(&cfg) // on, as shipped; withoutJournal in adjust turns it off
	// RUBINOFS_TEST_IO_URING=1 runs every in-process mount with FUSE over
	// io_uring (cache.io_uring), where the kernel offers it.
	cfg.IOURing = os.Getenv("RUBINOFS_TEST_IO_URING") == "1"
	if adjust != nil {
		adjust(&cfg)
	}
	m.ws = cfg.Workspace // adjust may share another mount's backing directory (newMountOn)
	if cfg.InPlace {
		cfg.Mountpoint = cfg.Workspace
		m.mnt = cfg.Workspace
	}
	ownMounts.add(m.mnt)
	if cfg.Debug {
		m.routeStdLog(lw)
	}
	mt, err := mounttest.Start(cfg, m.tmp)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	m.mt, m.d = mt, mt.D
	t.Cleanup(func() {
		leaked, err := mt.Close()
		if err != nil {
			t.Errorf("unmount: %v", err)
		}
		if len(leaked) > 0 {
			t.Errorf("descriptors leaked by the mount: %v", leaked)
		}
	})
	return m
}

// traceFuse reports whether go-fuse's per-request trace ("rx 12: LOOKUP
// ...", "tx 12: OK ...") goes into the tests' logs: only when
// RUBINOFS_TEST_DEBUG=1, and then it shows with `go test -v` or for a
// failed test. Otherwise a mount made with Debug still runs go-fuse's debug
// code paths, but its trace is dropped.
func traceFuse() bool { return os.Getenv("RUBINOFS_TEST_DEBUG") == "1" }

// testLogWriter is an io.Writer into t.Log, one call per line, for the
// loggers of a mount made by the test. From the test's cleanup on (after
// which t.Log would panic) it discards what a late goroutine still writes.
type testLogWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

// newTestLogWriter returns a writer into t.Log that stops at t's cleanup:
// registered first, that cleanup runs after every cleanup the test
// registers later, unmounts included.
func newTestLogWriter(t testing.TB) *testLogWriter {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	})
	return w
}

// Write logs p's lines; it never fails.
func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// routeStdLog points the standard logger at lw with traceFuse, and at
// m.stdLogDropped (which counts and discards) otherwise, until the test
// ends. go-fuse writes part of its debug trace ("tx N: OK fixup ...", a
// spliced read cut short at EOF) with the standard logger instead of
// MountOptions.Logger; left on stderr it would leak into the output of
// every `go test`. The standard logger is process-wide; no real-mount test
// runs in parallel.
func (m *mount) routeStdLog(lw io.Writer) {
	out, flags := log.Writer(), log.Flags()
	if traceFuse() {
		log.SetOutput(lw)
	} else {
		log.SetOutput(&m.stdLogDropped)
	}
	m.t.Cleanup(func() { log.SetOutput(out); log.SetFlags(flags) })
}

// lineCounter is an io.Writer that discards what it is given and counts
// the writes (the standard logger writes one line per call).
type lineCounter struct{ n atomic.Int64 }

// Write counts one line; it never fails.
func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return len(p), nil
}

// daemonFds lists this process's descriptors that point into the workspace,
// the mountpoint or /dev/fuse (fd -> target; mounttest.DaemonFds).
func daemonFds(t testing.TB, roots ...string) map[string]string {
	fds, err := mounttest.DaemonFds(roots...)
	if err != nil {
		t.Fatal(err)
	}
	return fds
}

// diffFds is mounttest.DiffFds: the entries of after that before lacks.
func diffFds(before, after map[string]string) []string { return mounttest.DiffFds(before, after) }

// appliedMark returns a mark for waitApplied: take it before making an
// external change (mounttest.Mount.AppliedMark).
func (m *mount) appliedMark() int { return m.mt.AppliedMark() }

// waitApplied waits until a watcher batch applied after mark names rel, or
// one of alsoRels (or invalidated everything), and returns how long it
// waited. It synchronises on the mount's own event, never on a sleep; it
// fails after a generous deadline.
func (m *mount) waitApplied(mark int, rel string, alsoRels ...string) time.Duration {
	m.t.Helper()
	d, err := m.mt.WaitApplied(mark, rel, 20*time.Second, alsoRels...)
	if err != nil {
		m.t.Fatal(err)
	}
	return d
}

// path returns the path of rel through the mount.
func (m *mount) path(rel string) string { return filepath.Join(m.mnt, rel) }

// backing returns the path of rel in the backing workspace.
func (m *mount) backing(rel string) string { return filepath.Join(m.ws, rel) }

// writeBacking writes a file directly in the backing directory (an external
// edit, bypassing the mount).
func (m *mount) writeBacking(rel, content string) {
	m.t.Helper()
	if err := mounttest.WriteFile(m.backing(rel), content); err != nil {
		m.t.Fatal(err)
	}
}

// readBacking returns a backing file's content.
func (m *mount) readBacking(rel string) string {
	m.t.Helper()
	b, err := os.ReadFile(m.backing(rel))
	if err != nil {
		m.t.Fatal(err)
	}
	return string(b)
}

// sh runs script with /bin/sh inside the mount root and returns its combined
// output and error.
func (m *mount) sh(script string, env ...string) (string, error) {
	return m.shIn("", script, env...)
}

// shIn runs script in the mount's subdirectory dir.
func (m *mount) shIn(dir, script string, env ...string) (string, error) {
	m.t.Helper()
	return m.mt.Sh(dir, script, env...)
}

// mustSh runs script and fails the test when it fails.
func (m *mount) mustSh(script string, env ...string) string {
	m.t.Helper()
	out, err := m.sh(script, env...)
	if err != nil {
		m.t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// mustFail runs script and fails the test when it succeeds.
func (m *mount) mustFail(script string) string {
	m.t.Helper()
	out, err := m.sh(script)
	if err == nil {
		m.t.Fatalf("%s: succeeded, want a refusal\n%s", script, out)
	}
	return out
}

// testEnv is a minimal, reproducible environment for tools run by tests
// (mounttest.Env): no user git config, a fixed identity for commits, and
// the run's own temporary directory (TestMain) as TMPDIR.
func testEnv(home string) []string { return mounttest.Env(home) }

// shq quotes s for /bin/sh.
func shq(s string) string { return mounttest.Shq(s) }

// sharedMode returns the mount's shared mode from .rubino/status: "on"
// (--shared, --watch=poll), "peer" (another mount of its backing
// directory on this host was seen) or "off".
func (m *mount) sharedMode() string {
	m.t.Helper()
	s, _ := m.status()["shared"].(string)
	return s
}

// asNobody prefixes a shell command so that it runs as uid and gid 65534
// with no supplementary groups: the second uid of the trust tests.
const asNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups "

// sharedBin copies the rubinofs binary where uid 65534 can execute it
// (rubinofsBin's directory is private) and returns its path.
func sharedBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	openUp(t, dir)
	dst := filepath.Join(dir, "rubinofs")
	in, err := os.Open(rubinofsBin(t))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
