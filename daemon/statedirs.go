package daemon

// State directories left behind: which ones under a user's state root
// belong to workspaces that are gone, and removing them
// (docs/DESIGN.md#state-retention).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// State directory kinds (StateDirInfo.Kind), as `rubinofs state ls`
// prints them; which are removed: docs/DESIGN.md#state-retention.
const (
	StateInUse      = "in use"         // a live mount holds its lock: never removed
	StateLive       = "workspace"      // its workspace exists: kept
	StateGone       = "gone"           // its recorded workspace is gone: removable
	StateLegacy     = "legacy"         // no marker; a guessed workspace exists: kept
	StateLegacyGone = "legacy, gone"   // no marker, made by a mount, no guess exists: removable with Legacy only
	StateForeign    = "not rubinofs's" // no marker and no lock file: never removed
)

// trashPrefix names a state directory being removed: renamed first (under
// its lock), so a mount starting meanwhile makes a fresh one.
const trashPrefix = ".rubinofs-prune-"

// maxMarkerSize bounds the marker file read.
const maxMarkerSize = 64 << 10

// StateDirInfo describes one directory under a state root, as
// ScanStateRoot found it (docs/DESIGN.md#state-retention).
type StateDirInfo struct {
	Dir       string    // absolute path
	Kind      string    // one of the State* kinds
	Workspace string    // the recorded workspace, or for a legacy one the guess ("" none)
	Size      int64     // bytes allocated on disk (du), -1 when not computed
	LastUse   time.Time // the newest mtime of the directory and its top-level entries
	HolderPid int       // with StateInUse: the pid its lock file names (0: unknown)
}

// Removable reports whether a prune may remove the directory: a gone
// workspace (or, with legacy, a legacy one whose workspace cannot exist)
// unused for at least olderThan before now. Never one in use, one whose
// workspace exists, or one rubinofs did not make.
func (i StateDirInfo) Removable(now time.Time, olderThan time.Duration, legacy bool) bool {
	switch {
	case i.Kind == StateGone:
	case i.Kind == StateLegacyGone && legacy:
	default:
		return false
	}
	return !i.LastUse.After(now.Add(-olderThan))
}

// CheckStateRoot refuses a state root that is not a directory (a symlink
// is refused) owned by uid and unwritable by group and others: another
// user could plant entries in it (docs/DESIGN.md#state-retention).
// A missing root is os.ErrNotExist.
func CheckStateRoot(root string, uid int) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(root, &st); err != nil {
		return &fs.PathError{Op: "state root", Path: root, Err: err}
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		return fmt.Errorf("state root %s is not a directory", root)
	case int(st.Uid) != uid:
		return fmt.Errorf("state root %s is owned by uid %d, not %d: only its owner prunes it", root, st.Uid, uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("state root %s is writable by others (mode %o): chmod 700 it first", root, st.Mode&0o7777)
	}
	return nil
}

// ScanStateRoot classifies every directory directly under root (a
// missing root: none) owned by uid; symlinks, files, other owners' entries
// and directories being removed are skipped. With sizes it measures each
// (a walk of the directory); otherwise Size is -1. Sorted by path.
func ScanStateRoot(root string, uid int, sizes bool) ([]StateDirInfo, error) {
	if err := CheckStateRoot(root, uid); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []StateDirInfo
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), trashPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		var st syscall.Stat_t
		if syscall.Lstat(dir, &st) != nil || int(st.Uid) != uid {
			continue
		}
		info := classify(dir, true)
		if sizes {
			info.Size = DirSize(dir)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Dir < out[b].Dir })
	return out, nil
}

// classify reads one state directory: its lock (probed unless the caller
// holds it: probe false), marker and workspace.
func classify(dir string, probe bool) StateDirInfo {
	info := StateDirInfo{Dir: dir, Size: -1, LastUse: lastUse(dir)}
	lock, err := os.OpenFile(filepath.Join(dir, LockFileName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	hasLock := err == nil
	if hasLock && !probe {
		lock.Close()
	} else if hasLock {
		if pid, held := lockHeld(lock); held {
			lock.Close()
			info.Kind, info.HolderPid = StateInUse, pid
			if m, err := readMarker(dir); err == nil {
				info.Workspace = m.Workspace
			}
			return info
		}
		lock.Close()
	}
	m, err := readMarker(dir)
	switch {
	case err == nil:
		info.Workspace = m.Workspace
		info.Kind = StateGone
		if workspaceExists(m.Workspace) {
			info.Kind = StateLive
		}
	case !hasLock:
		info.Kind = StateForeign
	default:
		// Made by a mount before the marker existed: guess the workspace
		// from the log's "mounted" record, else from the name.
		info.Kind = StateLegacyGone
		if ws := loggedWorkspace(dir); ws != "" {
			info.Workspace = ws
			if workspaceExists(ws) {
				info.Kind = StateLegacy
			}
		} else if ws, found, sure := decodeStateName(filepath.Base(dir)); found || !sure {
			info.Workspace, info.Kind = ws, StateLegacy
		}
	}
	return info
}

// lockHeld probes f's flock: held by a live mount reports its pid.
func lockHeld(f *os.File) (int, bool) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return 0, false
	}
	pid, _ := lockHolder(f)
	return pid, true
}

// readMarker reads dir's marker: a regular file (not a symlink) of at most
// maxMarkerSize bytes, format 1, with an absolute workspace.
func readMarker(dir string) (Marker, error) {
	var m Marker
	f, err := os.OpenFile(filepath.Join(dir, MarkerFileName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return m, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return m, fmt.Errorf("%s: not a regular file", MarkerFileName)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMarkerSize))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, err
	}
	if m.Format != 1 || !filepath.IsAbs(m.Workspace) {
		return m, fmt.Errorf("%s: not a rubinofs state record", MarkerFileName)
	}
	return m, nil
}

// workspaceExists reports whether ws may still exist: only ENOENT and
// ENOTDIR say it is gone (EACCES, a dead mount's ENOTCONN: it may exist).
func workspaceExists(ws string) bool {
	_, err := os.Stat(ws)
	return !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR)
}

// lastUse is the newest mtime of dir and its direct entries (lstat).
func lastUse(dir string) time.Time {
	var t time.Time
	if st, err := os.Lstat(dir); err == nil {
		t = st.ModTime()
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

// DirSize is the disk usage of everything under dir, in bytes (st_blocks,
// as du counts); unreadable entries count nothing.
func DirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d == nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// PruneOptions says which state directories PruneStateRoot removes.
type PruneOptions struct {
	Root      string        // the state root (its direct subdirectories)
	UID       int           // its owner: only directories of this uid
	OlderThan time.Duration // unused for at least this long (0: any age)
	Legacy    bool          // also legacy ones whose workspace cannot exist
	DryRun    bool          // select and measure, remove nothing
	Now       time.Time     // zero: time.Now()
}

// PruneStateRoot removes the removable state directories under opts.Root
// (StateDirInfo.Removable) and returns them, measured before removal. Each
// is checked again under its lock, taken without waiting (a mount that
// took it meanwhile keeps it), renamed aside, then removed, so a mount
// starting during the removal makes a fresh directory. Directories a
// failed earlier prune left aside are removed too. The error joins the
// failures; the others are still removed.
func PruneStateRoot(opts PruneOptions) ([]StateDirInfo, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	infos, err := ScanStateRoot(opts.Root, opts.UID, false)
	if err != nil {
		return nil, err
	}
	var removed []StateDirInfo
	var errs []error
	for _, info := range infos {
		if !info.Removable(opts.Now, opts.OlderThan, opts.Legacy) {
			continue
		}
		info.Size = DirSize(info.Dir)
		if opts.DryRun {
			removed = append(removed, info)
			continue
		}
		ok, err := removeStateDir(info, opts)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, info)
		}
	}
	if !opts.DryRun {
		ents, _ := os.ReadDir(opts.Root)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), trashPrefix) && e.IsDir() {
				os.RemoveAll(filepath.Join(opts.Root, e.Name()))
			}
		}
	}
	return removed, errors.Join(errs...)
}

// removeStateDir removes one state directory under its lock after
// classifying it again; false without an error when it is no longer
// removable (a mount took it, its workspace came back).
func removeStateDir(info StateDirInfo, opts PruneOptions) (bool, error) {
	lock, err := os.OpenFile(filepath.Join(info.Dir, LockFileName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, fmt.Errorf("%s: %w", info.Dir, err)
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false, nil // a mount holds it now
	}
	if again := classify(info.Dir, false); !again.Removable(opts.Now, opts.OlderThan, opts.Legacy) {
		return false, nil
	}
	trash := filepath.Join(opts.Root, fmt.Sprintf("%s%d-%s", trashPrefix, os.Getpid(), filepath.Base(info.Dir)))
	if err := os.Rename(info.Dir, trash); err != nil {
		return false, fmt.Errorf("%s: %w", info.Dir, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return true, fmt.Errorf("%s (renamed %s): %w", info.Dir, trash, err)
	}
	return true, nil
}
