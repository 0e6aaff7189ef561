// Package branch lays out, mounts and lists the branches of a workspace: a
// branch is a copy-on-write view of the workspace, the kernel's overlayfs
// with the workspace's backing directory as its read-only lower layer and
// an upper and a work directory of its own, under the workspace mount's
// state directory (docs/DESIGN.md#branches). A rubinofs daemon serving the
// view is started and stopped by the CLI; this package never imports FUSE.
//
// Nothing here holds state in memory: a branch is its directory. Calls on
// distinct branches may run concurrently; two calls creating or removing
// the same branch race as two mkdir(2) or rmdir(2) calls do (one wins, the
// other gets ErrExists or ErrNotFound).
package branch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// DirName is the directory of the branches inside a mount's state
// directory: STATE/branches/NAME/.
const DirName = "branches"

// nameRE is the shape of a branch name: the shape of a session name
// (docs/DESIGN.md#sessions), 1 to 64 characters of [A-Za-z0-9._-] that
// start with a letter or digit, so a name is one path element and never
// "." or "..".
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether name has the shape of a branch name (nameRE).
func ValidName(name string) bool { return nameRE.MatchString(name) }

// ErrExists is returned by Create for a name that already has a
// directory; ErrNotFound by Open for one that has none (or no meta.json).
var (
	ErrExists   = errors.New("branch exists")
	ErrNotFound = errors.New("no such branch")
)

// Meta is a branch's meta.json: what it branched from and who made it.
type Meta struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"` // UTC
	// Workspace is the workspace's backing directory (the overlay's lower
	// layer; hidden under the mount when the workspace is mounted in place).
	Workspace string `json:"workspace"`
	// Mount is the workspace's mountpoint: the path `run --branch` shows
	// the branch at.
	Mount string `json:"mount"`
	Owner int    `json:"owner"` // the uid that made the branch
	// From and Session are the checkpoint and the session a branch made
	// with --from starts at (docs/DESIGN.md#branch-from); both "" for a
	// branch of the workspace as it is.
	From    string `json:"from,omitempty"`
	Session string `json:"session,omitempty"`
}

// Branch is one branch directory, Dir = STATE/branches/NAME.
type Branch struct {
	Dir  string
	Meta Meta
}

// Upper is the overlay's upper directory: the branch's changes (copied-up
// files, whiteouts for deletions).
func (b *Branch) Upper() string { return filepath.Join(b.Dir, "upper") }

// BaseLayer is the overlay's base layer of a branch made from a checkpoint
// (Meta.From set): the paths the session changed since, as they were at
// it, over the workspace (docs/DESIGN.md#branch-from).
func (b *Branch) BaseLayer() string { return filepath.Join(b.Dir, "base") }

// Lowers are the overlay's lower layers, the top one first: BaseLayer then
// Meta.Workspace for a branch made from a checkpoint, else
// Meta.Workspace alone. What the branch changed is Changes(Upper(),
// Lowers()...).
func (b *Branch) Lowers() []string {
	if b.Meta.From != "" {
		return []string{b.BaseLayer(), b.Meta.Workspace}
	}
	return []string{b.Meta.Workspace}
}

// Work is the overlay's work directory.
func (b *Branch) Work() string { return filepath.Join(b.Dir, "work") }

// Merged is the overlay's mountpoint: the branch's view, served by the
// branch daemon as its workspace.
func (b *Branch) Merged() string { return filepath.Join(b.Dir, "merged") }

// Mnt is the branch daemon's mountpoint: the guarded view of the branch.
func (b *Branch) Mnt() string { return filepath.Join(b.Dir, "mnt") }

// State is the branch daemon's state directory (its journal, read state).
func (b *Branch) State() string { return filepath.Join(b.Dir, "state") }

// metaPath is the branch's meta.json.
func (b *Branch) metaPath() string { return filepath.Join(b.Dir, "meta.json") }

// Root returns the branches' directory of the state directory stateDir.
func Root(stateDir string) string { return filepath.Join(stateDir, DirName) }

// Create makes the branch m.Name under stateDir (its directories and
// meta.json) and mounts the overlay at Merged with lower as the lower
// layer: a path, or /proc/self/fd/N for a descriptor of this process
// (LowerFD), resolved by the kernel at mount time. It needs CAP_SYS_ADMIN
// (EPERM otherwise). On any failure nothing is left behind. Errors:
// ErrExists, or the mkdir/mount error wrapped with what failed.
func Create(stateDir string, m Meta, lower string) (*Branch, error) {
	return create(stateDir, m, lower, nil)
}

// create is Create, calling prep (when not nil) after the branch's
// directories and meta.json are made and before its overlay is mounted;
// a branch with m.From set has BaseLayer over lower as its lower layers.
func create(stateDir string, m Meta, lower string, prep func(*Branch) error) (*Branch, error) {
	if !ValidName(m.Name) {
		return nil, fmt.Errorf("bad branch name %q", m.Name)
	}
	root := Root(stateDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	b := &Branch{Dir: filepath.Join(root, m.Name), Meta: m}
	if err := os.Mkdir(b.Dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, ErrExists
		}
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(b.Dir)
		}
	}()
	for _, d := range []string{b.Upper(), b.Work(), b.Merged(), b.Mnt()} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(b.metaPath(), append(js, '\n'), 0o644); err != nil {
		return nil, err
	}
	if prep != nil {
		if err := prep(b); err != nil {
			return nil, err
		}
	}
	lowers := lower
	if m.From != "" {
		lowers = b.BaseLayer() + ":" + lower
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lowers, b.Upper(), b.Work())
	if err := unix.Mount("overlay", b.Merged(), "overlay", 0, opts); err != nil {
		return nil, fmt.Errorf("mounting the overlay at %s (lower %s): %w", b.Merged(), lowers, err)
	}
	ok = true
	return b, nil
}

// Open returns the branch name of stateDir from its meta.json, or
// ErrNotFound.
func Open(stateDir, name string) (*Branch, error) {
	if !ValidName(name) {
		return nil, ErrNotFound
	}
	b := &Branch{Dir: filepath.Join(Root(stateDir), name)}
	js, err := os.ReadFile(b.metaPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(js, &b.Meta); err != nil {
		return nil, fmt.Errorf("%s: %v", b.metaPath(), err)
	}
	return b, nil
}

// List returns the branches of stateDir sorted by name; directories
// without a readable meta.json are skipped. No branch: nil, nil.
func List(stateDir string) ([]*Branch, error) {
	ents, err := os.ReadDir(Root(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Branch
	for _, e := range ents {
		if b, err := Open(stateDir, e.Name()); err == nil {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.Name < out[j].Meta.Name })
	return out, nil
}

// Changed counts the paths the branch changed: the entries of Upper (a
// copied-up or new file, a symbolic link, a whiteout for a deletion, an
// opaque or new directory), not counting a directory that only holds
// copied-up entries of a directory of the lower layers. It walks Upper
// only: O(changes), never the workspace.
func (b *Branch) Changed() (int, error) {
	n := 0
	up := b.Upper()
	low := lowerView{layers: b.Lowers()}
	err := filepath.WalkDir(up, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == up {
			return nil
		}
		if !d.IsDir() || isOpaque(p) {
			n++
			return nil
		}
		rel, _ := filepath.Rel(up, p)
		if st, _, err := low.lookup(rel); err != nil || st == nil || !st.IsDir() {
			n++ // a directory the lower layer does not have
		}
		return nil
	})
	return n, err
}

// isOpaque reports whether the upper directory p hides its lower
// counterpart (overlayfs's trusted.overlay.opaque = "y": a directory
// removed and made again).
func isOpaque(p string) bool {
	buf := make([]byte, 4)
	n, err := unix.Lgetxattr(p, "trusted.overlay.opaque", buf)
	return err == nil && n > 0 && buf[0] == 'y'
}

// OverlayMounted reports whether the overlay is mounted at Merged.
func (b *Branch) OverlayMounted() bool {
	ok, _ := procfs.IsMountpoint(b.Merged())
	return ok
}

// DaemonMounted reports whether anything (the branch daemon) is mounted
// at Mnt.
func (b *Branch) DaemonMounted() bool {
	ok, _ := procfs.IsMountpoint(b.Mnt())
	return ok
}

// Remove unmounts the overlay (lazily: a descriptor the exiting branch
// daemon still holds does not make it fail) and removes the branch's
// directory. The branch daemon must be unmounted first: Remove fails,
// removing nothing, while something is still mounted at Mnt.
func (b *Branch) Remove() error {
	if b.DaemonMounted() {
		return fmt.Errorf("%s is still mounted: unmount the branch daemon first", b.Mnt())
	}
	if b.OverlayMounted() {
		if err := unix.Unmount(b.Merged(), unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting the overlay at %s: %w", b.Merged(), err)
		}
	}
	return os.RemoveAll(b.Dir)
}

// LowerFD opens the workspace's backing directory ws for a workspace
// mounted in place, where the path ws names the FUSE mount over it: it
// opens the descriptor of daemon pid whose link names ws and whose
// directory is not on the mount's device mountDev (the daemon holds the
// hidden directory open to serve it). The caller passes
// /proc/self/fd/N of the returned file as the overlay's lower layer and
// closes the file after the mount. Errors: no such descriptor, or
// /proc/PID/fd unreadable (another uid's daemon: EACCES).
func LowerFD(pid int, ws string, mountDev uint64) (*os.File, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		link := filepath.Join(dir, e.Name())
		if t, err := os.Readlink(link); err != nil || t != ws {
			continue
		}
		f, err := os.OpenFile(link, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil && st.Dev != mountDev {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("daemon %d holds no descriptor of the hidden directory %s", pid, ws)
}

// pidPath holds the branch daemon's pid, for a discard that finds its
// mount gone but the daemon alive (serving a private namespace's bind).
func (b *Branch) pidPath() string { return filepath.Join(b.Dir, "daemon.pid") }

// SetDaemonPid records pid as the branch daemon's (decimal, one line).
func (b *Branch) SetDaemonPid(pid int) error {
	return os.WriteFile(b.pidPath(), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// DaemonPid returns the recorded branch daemon pid, 0 when none is.
func (b *Branch) DaemonPid() int {
	s, err := os.ReadFile(b.pidPath())
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(s)))
	return pid
}
