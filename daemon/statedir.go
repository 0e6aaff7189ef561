package daemon

// The state directory: validation before anything is created in it, its
// lock, and the health of the saves into it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/fusefs"
)

// LockFileName is the lock file in the state directory: a mount holds an
// exclusive flock(2) on it for its whole life, and writes its pid and
// mountpoint into it for the message of a mount refused by the lock.
const LockFileName = "mount.lock"

// CheckWorkspace reports, naming ws, a workspace that does not exist, is
// not a directory, or that this process's user may not read and search
// (access(2) R_OK|X_OK with the real uid: the daemon serves every request
// with it).
func CheckWorkspace(ws string) error {
	st, err := os.Stat(ws)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", ws, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("workspace %s is not a directory", ws)
	}
	if err := unix.Access(ws, unix.R_OK|unix.X_OK); err != nil {
		return fmt.Errorf("workspace %s: uid %d may not read and search it (%v): mount it as its owner, or give this user access", ws, os.Getuid(), err)
	}
	return nil
}

// Check validates cfg without creating or changing anything: the workspace
// is an existing directory, the mountpoint fits (fusefs.CheckMountpoint),
// --in-place is used consistently, the state directory (if any) is
// absolute and no other mount holds it (its lock file, LockFileName). Start
// runs it before it creates the state directory; the CLI runs it before
// `mount --daemon` creates the state directory and its log, so a mistyped
// argument leaves nothing behind. Errors name the argument or option to fix.
func Check(cfg Config) error {
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return err
	}
	mnt, err := filepath.Abs(cfg.Mountpoint)
	if err != nil {
		return err
	}
	if err := CheckWorkspace(ws); err != nil {
		return err
	}
	if cfg.InPlace && mnt != ws {
		return errors.New("--in-place mounts over the workspace itself: give only the workspace")
	}
	if !cfg.InPlace && mnt == ws {
		return errors.New("the mountpoint is the workspace: use --in-place to mount over it")
	}
	if err := fusefs.CheckMountpoint(mnt, cfg.InPlace); err != nil {
		return err
	}
	if cfg.StateDir == "" {
		return nil
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return fmt.Errorf("--state-dir %s: must be an absolute path", cfg.StateDir)
	}
	f, err := os.OpenFile(filepath.Join(cfg.StateDir, LockFileName), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing there yet: no mount holds it
	}
	if err != nil {
		return fmt.Errorf("--state-dir %s: %w", cfg.StateDir, err)
	}
	defer f.Close()
	// A probe: taken and at once released (closing the descriptor drops
	// it). A mount that takes the lock meanwhile is caught by lockState.
	return tryLock(f, cfg.StateDir)
}

// lockState creates dir's lock file and takes an exclusive flock on it,
// without waiting, and returns the open file: the lock is held while it
// stays open. It is released by closing it (Close does) or by the death
// of the process, however it dies: a mount killed with SIGKILL leaves no
// stale lock. The descriptor is close-on-exec (os.OpenFile), so tasks the
// daemon runs do not inherit the lock. A lock held by another mount is an
// error naming --state-dir and that mount's pid.
func lockState(dir, mountpoint string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--state-dir %s: creating its lock file: %w", dir, err)
	}
	if err := tryLock(f, dir); err != nil {
		f.Close()
		return nil, err
	}
	// Who holds it, for the message of a refused mount; best effort (a
	// full disk must not stop a mount whose lock is taken).
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(fmt.Sprintf("pid %d\nmountpoint %s\n", os.Getpid(), mountpoint)), 0)
	}
	return f, nil
}

// tryLock takes an exclusive flock on f without waiting. EWOULDBLOCK means
// another mount holds the state directory: the error names --state-dir,
// the holder's pid and mountpoint as its lock file records them, and what
// to do.
func tryLock(f *os.File, dir string) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("--state-dir %s: locking %s: %w", dir, LockFileName, err)
	}
	holder := "another rubinofs mount"
	if pid, mnt := lockHolder(f); pid > 0 {
		holder = fmt.Sprintf("the rubinofs mount of pid %d", pid)
		if mnt != "" {
			holder += " at " + mnt
		}
	}
	return fmt.Errorf("--state-dir %s is in use by %s: give each mount of a workspace its own --state-dir", dir, holder)
}

// lockHolder reads the pid and mountpoint a lock file records (0, "" when
// it records none).
func lockHolder(f *os.File) (int, string) {
	buf := make([]byte, 4096)
	n, _ := f.ReadAt(buf, 0)
	pid, mnt := 0, ""
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			pid, _ = strconv.Atoi(v)
		case "mountpoint":
			mnt = v
		}
	}
	return pid, mnt
}

// stateHealth is what .rubino/status shows under "state": the state
// directory and how saving the read state into it went.
type stateHealth struct {
	mu        sync.Mutex
	dir       string
	saves     uint64
	lastSave  time.Time
	failures  uint64
	lastErr   string
	lastErrAt time.Time
}

// note records the outcome of one save and reports whether err is new
// (differs from the last failure, or follows a success), so it is logged
// once rather than at every checkpoint, and whether a success ends a run of
// failures (recovered).
func (s *stateHealth) note(err error) (newErr, recovered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.saves++
		s.lastSave = time.Now()
		recovered = s.lastErr != ""
		s.lastErr = ""
		return false, recovered
	}
	s.failures++
	newErr = s.lastErr != err.Error()
	s.lastErr, s.lastErrAt = err.Error(), time.Now()
	return newErr, false
}

func (s *stateHealth) snapshot() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]any{"dir": s.dir, "saves": s.saves, "save_failures": s.failures}
	if !s.lastSave.IsZero() {
		m["last_save"] = s.lastSave.UTC().Format(time.RFC3339Nano)
	}
	if s.lastErr != "" {
		m["last_error"] = s.lastErr
		m["last_error_time"] = s.lastErrAt.UTC().Format(time.RFC3339Nano)
	}
	return m
}

// MarkerFileName is the state directory's record (JSON, mode 0600): that
// rubinofs made it, for which workspace and when it was first and last
// mounted. Start writes it right after taking the lock; `rubinofs state
// prune` and the retention at mount remove only directories holding it
// (docs/DESIGN.md#state-retention).
const MarkerFileName = "statedir.json"

// Marker is the content of MarkerFileName. Workspace and Mountpoint are
// absolute; times are UTC.
type Marker struct {
	Format     int       `json:"rubinofs_state"` // 1
	Workspace  string    `json:"workspace"`
	Mountpoint string    `json:"mountpoint"`
	Created    time.Time `json:"created"`
	Mounted    time.Time `json:"mounted"`
}

// writeMarker records workspace and mountpoint in dir's marker, keeping
// the creation time of an earlier one, atomically (temp file, rename).
// The caller holds dir's lock.
func writeMarker(dir, workspace, mountpoint string) error {
	now := time.Now().UTC()
	m := Marker{Format: 1, Workspace: workspace, Mountpoint: mountpoint, Created: now, Mounted: now}
	if old, err := readMarker(dir); err == nil && !old.Created.IsZero() {
		m.Created = old.Created
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, MarkerFileName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, MarkerFileName))
}

// touchLock sets the lock file's times to now at unmount, so a state
// directory's last use (StateDirInfo.LastUse) is when its last mount ended.
func touchLock(f *os.File) {
	now := time.Now()
	os.Chtimes(f.Name(), now, now)
}
