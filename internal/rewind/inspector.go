package rewind

// The journal.Inspector of the backing workspace.

import (
	"fmt"
	"syscall"

	"github.com/rubinofs/rubinofs/internal/journalhook"
	"github.com/rubinofs/rubinofs/journal"
)

// inspector is the journal.Inspector of the backing workspace.
type inspector struct{ r *Room }

// Lstat is path's state, without following a final symlink (KindAbsent
// for a missing path or one under a missing directory). It is
// journalhook.AfterOf, not journal.LstatAt: the state must compare equal
// to the After the mount journaled, which for a directory has no size or
// mtime (LstatAt keeps both), and a path through a symlink is the walk's
// error (ELOOP), not absent as for journal.DirInspector.
func (i inspector) Lstat(p string) (journal.After, error) {
	return lstat(i.r.m, p)
}

// lstat is inspector.Lstat over m.
func lstat(m Mount, p string) (journal.After, error) {
	var st syscall.Stat_t
	switch errno := m.Lstat(p, &st); errno {
	case 0:
		return journalhook.AfterOf(p, &st), nil
	case syscall.ENOENT, syscall.ENOTDIR:
		return journal.After{Path: p, Kind: journal.KindAbsent}, nil
	default:
		return journal.After{}, errno
	}
}

// HashOf is the xxh3-128 of path's bytes (32 hex digits), through the
// guard's hash cache.
func (i inspector) HashOf(p string) (string, error) {
	t, err := i.r.m.LookupTarget(p)
	if err != nil {
		return "", err
	}
	if t.Stat.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	h, err := i.r.g.Hashes().Sum(t.Stat, t.Open)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
