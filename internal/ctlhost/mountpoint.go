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
// to control files (Host.CallerRel). The zero value knows no mount: every
// path is outside it. Safe for concurrent use.
type Mountpoint struct{ p atomic.Pointer[string] }

// Set records mountpoint as the absolute path with symlinks resolved, as
// /proc/PID/cwd shows paths. The mount calls it before mounting.
func (m *Mountpoint) Set(mountpoint string) {
	p, err := filepath.Abs(mountpoint)
	if err != nil {
		return
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	m.p.Store(&p)
}

// CallerRel resolves p, as the caller c names it, to a workspace-relative
// path: an absolute p must lie inside the mount (as seen from the daemon's
// mount namespace), a relative one is joined to the caller's cwd
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
	mnt := m.p.Load()
	if mnt == nil {
		return "", ctltree.Errorf(syscall.EPERM, "%s is outside the mount", ctltree.Clip(p))
	}
	rel, err := filepath.Rel(*mnt, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", ctltree.Errorf(syscall.EPERM, "%s is outside the mount %s", ctltree.Clip(p), *mnt)
	}
	if rel == ctltree.DirName || strings.HasPrefix(rel, ctltree.DirName+"/") {
		return "", ctltree.Errorf(syscall.EPERM, "%s is a control file, not a workspace file", ctltree.Clip(p))
	}
	return rel, nil
}
