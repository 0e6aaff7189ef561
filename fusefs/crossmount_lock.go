package fusefs

// Cross-mount atomicity of a guarded mutation (docs/DESIGN.md#cross-mount-lock),
// on a shared mount (FS.shared): an unshared mount pays nothing.
//
// Inside one daemon the guard's check and the mutation it allows are one
// step under the file identity's lock (guard.Lock). Other rubinofs mounts
// of the same backing directory (other hosts over NFS, CephFS, JuiceFS)
// have locks of their own, so each mutation also holds an OFD write lock
// on one byte of the backing file far past any real data (crossLockStart),
// from before the check until the mutation has been applied. The lock is
// taken without blocking and retried until crossLockWait has passed; then
// the mutation is refused with EAGAIN and a logged reason, so no request
// ever waits on another host for longer.

import (
	"fmt"
	"sort"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

const (
	// crossLockStart is the offset (bytes) of the one byte every rubinofs
	// mount locks in a backing file around a guarded mutation: 2^62, far
	// past any real file's data, so byte-range locks that applications
	// take directly on the backing file over real data never meet it
	// (through the mount, applications' locks stay in the kernel's FUSE
	// inode and never reach the backing file at all).
	crossLockStart = 1 << 62
	// crossLockWait is the longest a mutation waits for another mount's
	// lock before it is refused with EAGAIN.
	crossLockWait = 2 * time.Second
)

// crossLockErr is a failure to take the cross-mount lock: EAGAIN on
// timeout, else the errno of fcntl(2).
type crossLockErr struct {
	errno  syscall.Errno
	reason string
}

// ofdLock takes the cross-mount write lock on fd's open file description
// (F_OFD_SETLK on [crossLockStart, +1)), retrying every 1 to 16 ms for at
// most wait. fd must be open for writing. Errors: EAGAIN when another
// description holds it for longer than wait; EBADF for a descriptor not
// open for writing; ENOLCK, EINVAL where the filesystem has no OFD locks.
func ofdLock(fd int, wait time.Duration) syscall.Errno {
	return ofdTake(fd, unix.F_WRLCK, wait)
}

// ofdTake takes a lock of type typ (F_WRLCK, F_RDLCK) on fd's cross-mount
// byte, retrying for at most wait (ofdLock).
func ofdTake(fd int, typ int16, wait time.Duration) syscall.Errno {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: crossLockStart, Len: 1}
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		if err == nil {
			return 0
		}
		if err != unix.EAGAIN && err != unix.EACCES && err != unix.EINTR {
			return err.(syscall.Errno)
		}
		if time.Now().After(deadline) {
			return syscall.EAGAIN
		}
		time.Sleep(pause)
		pause = min(2*pause, 16*time.Millisecond)
	}
}

// ofdUnlock releases ofdLock's lock on fd's open file description.
func ofdUnlock(fd int) { ofdUnlockAny(fd) }

// ofdUnlockAny releases a lock of either type on fd's cross-mount byte.
func ofdUnlockAny(fd int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: crossLockStart, Len: 1}
	unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
}

// crossLockFd takes the cross-mount lock through fd, a descriptor of the
// backing file rel open for writing, and returns the unlock. A backing
// filesystem without OFD locks (EINVAL, ENOLCK, EOPNOTSUPP) is logged once
// and mutates without the lock: the guard's own lock still orders this
// mount's mutations. Errors: EAGAIN on timeout (logged with the reason).
func (f *FS) crossLockFd(fd int, rel string) (func(), syscall.Errno) {
	if f.crossOff.Load() || !f.shared() {
		return func() {}, 0
	}
	switch errno := ofdLock(fd, f.crossWait()); errno {
	case 0:
		f.crossLocks.Add(1)
		return func() { f.syncBeforeUnlock(fd); ofdUnlock(fd) }, 0
	case syscall.EAGAIN:
		f.crossTimeouts.Add(1)
		f.log.Warn("refusing a mutation for now: another mount of the backing directory holds the file's cross-mount lock; try again",
			"path", rel, "waited", f.crossWait(), "errno", "EAGAIN")
		return nil, syscall.EAGAIN
	case syscall.EBADF:
		return func() {}, 0 // not open for writing: the mutation will fail itself
	default:
		if f.crossOff.CompareAndSwap(false, true) {
			f.log.Warn("the backing filesystem has no OFD locks: mutations are not atomic against other mounts of it",
				"path", rel, "err", errno)
		}
		return func() {}, 0
	}
}

// crossWait is the bounded wait for the cross-mount lock.
func (f *FS) crossWait() time.Duration {
	if d := f.crossLockWait; d > 0 {
		return d
	}
	return crossLockWait
}

// crossLock takes the cross-mount lock of every guarded name of gs (by
// their locked identities) for FS.mutate (crossHold), in inode-number order (the
// same on every host of a network filesystem), and returns one unlock.
// Each file is opened for writing through the parent directory it was
// stat'ed in; one that cannot be opened for writing (permissions), or
// that is no longer the identity locked, is mutated without the lock.
// Errors: EAGAIN (crossLockFd).
func (f *FS) crossLock(gs []guardedChild, viaFd bool, fd int) (func(), syscall.Errno) {
	type target struct {
		ino uint64
		g   *guardedChild
	}
	var ts []target
	for i := range gs {
		if gs[i].ok {
			ts = append(ts, target{gs[i].st.Ino, &gs[i]})
		}
	}
	if len(ts) == 0 || f.crossOff.Load() {
		return func() {}, 0
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ino < ts[j].ino })
	var undo []func()
	unlockAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	for i, t := range ts {
		if i > 0 && t.ino == ts[i-1].ino {
			continue
		}
		lfd, err := f.openForCrossLock(t.g, viaFd, fd)
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Fstat(lfd, &st) != nil || st.Ino != t.g.st.Ino || uint64(st.Dev) != t.g.id.Dev {
			syscall.Close(lfd)
			continue
		}
		unlock, errno := f.crossLockFd(lfd, t.g.rel)
		if errno != 0 {
			syscall.Close(lfd)
			unlockAll()
			return nil, errno
		}
		undo = append(undo, func() { unlock(); syscall.Close(lfd) })
	}
	return unlockAll, 0
}

// openForCrossLock opens g's backing file for writing, without following
// a symlink or blocking: through its parent directory descriptor, through
// fd for a mutation via a descriptor, or by its backing path.
func (f *FS) openForCrossLock(g *guardedChild, viaFd bool, fd int) (int, error) {
	const flags = unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	switch {
	case viaFd:
		return unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	case g.inDir:
		return unix.Openat(g.at.fd, g.leaf, flags, 0)
	}
	return unix.Open(f.backing(g.rel), flags, 0)
}

// crossState is the FS's cross-mount lock state. Concurrency: atomics;
// crossLockWait is set before mounting.
type crossState struct {
	// crossOff: the backing filesystem refused an OFD lock other than by
	// a conflict; mutations go on without one (logged once).
	crossOff atomic.Bool
	// crossLocks, crossTimeouts count the locks taken and the mutations
	// refused with EAGAIN after crossLockWait.
	crossLocks, crossTimeouts atomic.Uint64
	// crossUnseen counts changes found by stat under the cross-mount lock
	// that came from outside this mount (FS.noteUnseen).
	crossUnseen atomic.Uint64
	// own is the stat each file's last change through this mount left.
	own ownStats
	// crossLockWait overrides crossLockWait when > 0 (tests).
	crossLockWait time.Duration
}

// CrossLockStats reports the cross-mount lock counters for
// .rubino/status: locks taken and mutations refused on timeout.
func (f *FS) CrossLockStats() map[string]any {
	return map[string]any{
		"locks":    f.crossLocks.Load(),
		"timeouts": f.crossTimeouts.Load(),
		"unseen":   f.crossUnseen.Load(),
		"disabled": f.crossOff.Load(),
	}
}

// noteOwnAfter records, after m's backing operation succeeded, the stat
// each guarded name whose content it rewrote now has, as this mount's own
// last change (FS.noteOwn), for the next mutation's FS.noteUnseen, and
// forgets a file whose last name it removed.
// Called under the locks of the lock step (locked.begin).
func (f *FS) noteOwnAfter(m *mutation, gs []guardedChild) {
	if !f.ownTracked() {
		return
	}
	for i, nm := range m.names {
		g := &gs[i]
		if !g.ok {
			continue
		}
		if nm.change.guard() != guard.Rewritten {
			if (nm.change == unlinked || nm.change == replaced) && g.st.Nlink <= 1 {
				f.own.m.Delete(g.id) // gone: its inode number may be reused
			}
			continue
		}
		var st syscall.Stat_t
		if f.restat(m, g, &st) == nil && st.Ino == g.st.Ino && uint64(st.Dev) == g.id.Dev {
			f.noteOwn(g.id, guard.StatOf(&st))
		} else {
			f.own.m.Delete(g.id)
		}
	}
}

// restat stats g, a guarded name of m, again into st: through m.fd for a
// mutation via a descriptor, else through the parent directory it was
// stat'ed in (not following a symlink), else by its backing path.
// On an uncached backing the stat is the filesystem's own (statSync).
func (f *FS) restat(m *mutation, g *guardedChild, st *syscall.Stat_t) error {
	if f.cfg.Uncached {
		switch {
		case m.via == byFd:
			return fstatSync(m.fd, st)
		case g.inDir:
			return statSync(g.at.fd, g.leaf, unix.AT_SYMLINK_NOFOLLOW, st)
		}
		return statSync(unix.AT_FDCWD, f.backing(g.rel), unix.AT_SYMLINK_NOFOLLOW, st)
	}
	switch {
	case m.via == byFd:
		return syscall.Fstat(m.fd, st)
	case g.inDir:
		return unix.Fstatat(g.at.fd, g.leaf, (*unix.Stat_t)(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW)
	}
	return syscall.Lstat(f.backing(g.rel), st)
}
