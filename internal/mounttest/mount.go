// Package mounttest mounts rubinofs for the real-mount tests (tests/) and
// the benchmarks (bench/), which share it: an in-process mount through the
// same assembly as `rubinofs mount` (daemon.Start), the watcher batches it
// applied, the daemon's descriptors it leaked at close, shell commands run
// inside it with a reproducible environment, and the CLI binary built from
// this module. It reports errors; the tests' thin wrappers turn them into
// test failures (docs/DESIGN.md#mounttest-room).
//
// Commands run with their working directory outside the mount and `cd` in
// the shell: a fork whose child chdirs into a mount served by the same
// process can deadlock (golang/go#11155).
package mounttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/watcher"
)

// Mount is one in-process rubinofs mount. Its fields are set by Start and
// not changed after; its methods are safe for concurrent use.
type Mount struct {
	// WS is the backing workspace, Mnt the mountpoint (WS for an in-place
	// mount), State the state directory and Tmp the directory the mount's
	// commands run from (their HOME).
	WS, Mnt, State, Tmp string
	// D is the running daemon.
	D *daemon.Daemon

	// applied records the watcher batches the mount has applied (nil
	// entries are full invalidations), for WaitApplied.
	appliedMu sync.Mutex
	applied   [][]watcher.Event
	appliedCh chan struct{}

	before map[string]string // DaemonFds before the mount
}

// Start mounts cfg through daemon.Start (cfg.Workspace, cfg.Mountpoint and
// cfg.StateDir must be set; an in-place cfg mounts over its workspace),
// records the daemon's descriptors before it for Close's leak check and
// records the watcher batches the mount applies. tmp is the directory
// commands run from (Sh). Errors: those of daemon.Start and of listing
// /proc/self/fd.
func Start(cfg daemon.Config, tmp string) (*Mount, error) {
	if cfg.InPlace {
		cfg.Mountpoint = cfg.Workspace
	}
	m := &Mount{WS: cfg.Workspace, Mnt: cfg.Mountpoint, State: cfg.StateDir, Tmp: tmp, appliedCh: make(chan struct{}, 1)}
	var err error
	if m.before, err = DaemonFds(m.WS, m.Mnt); err != nil {
		return nil, err
	}
	if m.D, err = daemon.Start(cfg); err != nil {
		return nil, err
	}
	if m.D.Invalidation != nil {
		m.D.Invalidation.SetBatchHook(func(evs []watcher.Event) {
			m.appliedMu.Lock()
			m.applied = append(m.applied, evs)
			m.appliedMu.Unlock()
			select {
			case m.appliedCh <- struct{}{}:
			default:
			}
		})
	}
	return m, nil
}

// Close unmounts (daemon.Daemon.Close), waits for the server to stop and
// returns the descriptors of this process into the workspace, the
// mountpoint or /dev/fuse that were not there before Start ("fd -> target"),
// and Close's error.
func (m *Mount) Close() (leaked []string, err error) {
	err = m.D.Close()
	<-m.D.Done()
	after, ferr := DaemonFds(m.WS, m.Mnt)
	if ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	return DiffFds(m.before, after), err
}

// DaemonFds lists this process's descriptors that point into one of roots
// or to /dev/fuse (fd -> target). Errors: those of reading /proc/self/fd.
func DaemonFds(roots ...string) (map[string]string, error) {
	out := map[string]string{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue
		}
		interesting := target == "/dev/fuse"
		for _, r := range roots {
			if target == r || strings.HasPrefix(target, r+"/") {
				interesting = true
			}
		}
		if interesting {
			out[e.Name()] = target
		}
	}
	return out, nil
}

// DiffFds returns the entries of after ("fd -> target") that before does
// not hold with the same target.
func DiffFds(before, after map[string]string) []string {
	var leaked []string
	for fd, target := range after {
		if before[fd] != target {
			leaked = append(leaked, fd+" -> "+target)
		}
	}
	return leaked
}

// AppliedMark returns a mark for WaitApplied: take it before making an
// external change.
func (m *Mount) AppliedMark() int {
	m.appliedMu.Lock()
	defer m.appliedMu.Unlock()
	return len(m.applied)
}

// Applied returns the watcher batches the mount has applied so far, in
// order (a nil batch is a full invalidation).
func (m *Mount) Applied() [][]watcher.Event {
	m.appliedMu.Lock()
	defer m.appliedMu.Unlock()
	return append([][]watcher.Event(nil), m.applied...)
}

// WaitApplied waits until a watcher batch applied after mark names rel,
// or one of alsoRels (or invalidated everything), and returns how long it
// waited. It synchronises on the mount's own event, never on a sleep;
// after timeout it returns an error naming rel.
func (m *Mount) WaitApplied(mark int, rel string, timeout time.Duration, alsoRels ...string) (time.Duration, error) {
	rels := append([]string{rel}, alsoRels...)
	start := time.Now()
	deadline := time.After(timeout)
	for {
		m.appliedMu.Lock()
		for _, evs := range m.applied[mark:] {
			if evs == nil {
				m.appliedMu.Unlock()
				return time.Since(start), nil
			}
			for _, ev := range evs {
				if slices.Contains(rels, ev.Path) {
					m.appliedMu.Unlock()
					return time.Since(start), nil
				}
			}
		}
		m.appliedMu.Unlock()
		select {
		case <-m.appliedCh:
		case <-deadline:
			return time.Since(start), fmt.Errorf("the watcher applied no change of %s", rel)
		}
	}
}

// Path returns the path of rel through the mount.
func (m *Mount) Path(rel string) string { return filepath.Join(m.Mnt, rel) }

// Backing returns the path of rel in the backing workspace.
func (m *Mount) Backing(rel string) string { return filepath.Join(m.WS, rel) }

// WriteBacking writes a file directly in the backing directory (an
// external edit, bypassing the mount), making its parents. Errors: those
// of mkdir and write.
func (m *Mount) WriteBacking(rel, content string) error {
	return WriteFile(m.Backing(rel), content)
}

// WriteFile writes content to path with mode 0644, making its parents
// (0755). Errors: those of mkdir and write.
func WriteFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// Sh runs script with /bin/sh in the mount's subdirectory dir ("" for its
// root), from Tmp with Env(Tmp) plus env, and returns its combined output
// and error.
func (m *Mount) Sh(dir, script string, env ...string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("cd %s && %s", Shq(m.Path(dir)), script))
	cmd.Dir = m.Tmp
	cmd.Env = append(Env(m.Tmp), env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// Shq quotes s for /bin/sh.
func Shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
