package fusefs

// The mutation pipeline's cross-mount step (docs/DESIGN.md#cross-mount-lock):
// the lock itself, shared mode and the own-change stats are
// internal/crossmount's (FS.cross); here the backing access it needs.

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/crossmount"
)

// crossTargets lists the guarded names of gs for the cross-mount lock:
// each is opened for writing, without following a symlink or blocking,
// through the parent directory it was stat'ed in, through m.fd for a
// mutation via a descriptor, or by its backing path.
func (m *mutation) crossTargets(f *FS, gs []guardedChild) []crossmount.Target {
	const flags = unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	var ts []crossmount.Target
	for i := range gs {
		g := &gs[i]
		if !g.ok {
			continue
		}
		t := crossmount.Target{ID: guard.FileID{Dev: g.id.Dev, Ino: g.st.Ino}, Rel: g.rel}
		switch {
		case m.via == byFd:
			fd := m.fd
			t.Open = func() (int, error) {
				return unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
			}
		case g.inDir:
			at, leaf := g.at.FD, g.leaf
			t.Open = func() (int, error) { return unix.Openat(at, leaf, flags, 0) }
		default:
			p := f.backing(g.rel)
			t.Open = func() (int, error) { return unix.Open(p, flags, 0) }
		}
		ts = append(ts, t)
	}
	return ts
}

// noteOwnAfter records, after m's backing operation succeeded, the stat
// each guarded name whose content it rewrote now has, as this mount's own
// last change (crossmount.Mode.NoteOwn), for the next mutation's
// NoteUnseen, and forgets a file whose last name it removed.
// Called under the locks of the lock step (locked.begin).
func (m *mutation) noteOwnAfter(f *FS, gs []guardedChild) {
	if !f.oc.crossOwn { // crossmount.Mode.OwnTracked, read once
		return
	}
	for i, nm := range m.names {
		g := &gs[i]
		if !g.ok {
			continue
		}
		if nm.change.guard() != guard.Rewritten {
			if (nm.change == unlinked || nm.change == replaced) && g.st.Nlink <= 1 {
				f.cross.Forget(g.id) // gone: its inode number may be reused
			}
			continue
		}
		var st syscall.Stat_t
		if m.restat(f, g, &st) == nil && st.Ino == g.st.Ino && uint64(st.Dev) == g.id.Dev {
			f.cross.NoteOwn(g.id, guard.StatOf(&st))
		} else {
			f.cross.Forget(g.id)
		}
	}
}

// restat stats g, a guarded name of m, again into st: through m.fd for a
// mutation via a descriptor, else through the parent directory it was
// stat'ed in (not following a symlink), else by its backing path.
// On an uncached backing the stat is the filesystem's own
// (syscallcompat.StatSync).
func (m *mutation) restat(f *FS, g *guardedChild, st *syscall.Stat_t) error {
	switch {
	case m.via == byFd:
		return f.cross.FstatView(m.fd, st)
	case g.inDir:
		return f.cross.StatView(g.at.FD, g.leaf, unix.AT_SYMLINK_NOFOLLOW, st)
	}
	return f.cross.StatView(unix.AT_FDCWD, f.backing(g.rel), unix.AT_SYMLINK_NOFOLLOW, st)
}

// CrossMount returns the mount's state towards other mounts of its
// backing directory (docs/DESIGN.md#peer-mounts): its shared mode for the
// log (SharedMode) and the stat its own changes left, for the poller
// (OwnStat). Safe for concurrent use.
func (f *FS) CrossMount() *crossmount.Mode { return f.cross }
