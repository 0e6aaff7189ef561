package ctlhost

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/procfs"
)

// Mountpoint is where the mount is, for resolving the paths callers write
// to control files (Host.CallerRel), with the other names its callers may
// see it at (a branch's: docs/DESIGN.md#branch-ctl-paths). The zero value
// knows no mount: every path is outside it. Safe for concurrent use.
type Mountpoint struct{ p atomic.Pointer[names] }

// names are the mountpoint, then its other names, each absolute with
// symlinks resolved.
type names []string

// Set records mountpoint and its other names alsoAt (callers in a mount
// namespace that shows the mount there: a branch's workspace mountpoint
// and backing path), each as the absolute path with symlinks resolved
// (in the daemon's namespace), as /proc/PID/cwd shows paths. A path
// under any of them names the same path of this mount's own tree: an
// other name never reaches what lies at that path in the daemon's
// namespace. A name that cannot be made absolute is left out. The mount
// calls it before mounting.
func (m *Mountpoint) Set(mountpoint string, alsoAt ...string) {
	var ns names
	for _, n := range append([]string{mountpoint}, alsoAt...) {
		p, err := filepath.Abs(n)
		if err != nil {
			if len(ns) == 0 {
				return
			}
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		ns = append(ns, p)
	}
	m.p.Store(&ns)
}

// CallerRel resolves p, as the caller c names it, to a workspace-relative
// path: an absolute p must lie inside the mount (as seen from the daemon's
// mount namespace) or under one of its other names (Set), a relative one
// is joined to the caller's cwd
// (/proc/PID/cwd, read within procfs.Bound:
// docs/DESIGN.md#no-wait-on-caller). Errors are *ctltree.Error: EPERM for
// a path outside the mount or inside .rubino, EAGAIN when the cwd did not
// answer in time, ESRCH when the caller is gone.
func (m *Mountpoint) CallerRel(c ctltree.Caller, p string) (string, error) {
	if !filepath.IsAbs(p) {
		cwd, err := procfs.Readlink("/proc/" + strconv.FormatUint(uint64(c.Pid), 10) + "/cwd")
		switch {
		case errors.Is(err, procfs.ErrSlow):
			return "", ctltree.Errorf(syscall.EAGAIN, "the caller's cwd did not answer in time: %v", err)
		case err != nil:
			return "", ctltree.Errorf(syscall.ESRCH, "the caller's cwd: %v", err)
		}
		p = filepath.Join(cwd, p)
	}
	p = filepath.Clean(p)
	ns := m.p.Load()
	if ns == nil {
		return "", ctltree.Errorf(syscall.EPERM, "%s is outside the mount", ctltree.Clip(p))
	}
	rel, ok := "", false
	for _, mnt := range *ns {
		if r, err := filepath.Rel(mnt, p); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			rel, ok = r, true
			break
		}
	}
	if !ok {
		return "", ctltree.Errorf(syscall.EPERM, "%s is outside the mount %s", ctltree.Clip(p), (*ns)[0])
	}
	if rel == ctltree.DirName || strings.HasPrefix(rel, ctltree.DirName+"/") {
		return "", ctltree.Errorf(syscall.EPERM, "%s is a control file, not a workspace file", ctltree.Clip(p))
	}
	return rel, nil
}
