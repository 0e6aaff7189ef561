package crossmount

// Cross-mount atomicity of a guarded mutation (docs/DESIGN.md#cross-mount-lock),
// on a shared mount (Mode.Shared): an unshared mount pays nothing.
//
// Inside one daemon the guard's check and the mutation it allows are one
// step under the file identity's lock (guard.Lock). Other rubinofs mounts
// of the same backing directory (other hosts over NFS, CephFS, JuiceFS)
// have locks of their own, so each mutation also holds an OFD write lock
// on one byte of the backing file far past any real data (LockStart),
// from before the check until the mutation has been applied. The lock is
// taken without blocking and retried until LockWait has passed; then
// the mutation is refused with EAGAIN and a logged reason, so no request
// ever waits on another host for longer.

import (
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

const (
	// LockStart is the offset (bytes) of the one byte every rubinofs
	// mount locks in a backing file around a guarded mutation: 2^62, far
	// past any real file's data, so byte-range locks that applications
	// take directly on the backing file over real data never meet it
	// (through the mount, applications' locks stay in the kernel's FUSE
	// inode and never reach the backing file at all).
	LockStart = 1 << 62
	// LockWait is the longest a mutation waits for another mount's lock
	// before it is refused with EAGAIN.
	LockWait = 2 * time.Second
)

// ofdLock takes the cross-mount write lock on fd's open file description
// (F_OFD_SETLK on [LockStart, +1)), retrying every 1 to 16 ms for at
// most wait. fd must be open for writing. Errors: EAGAIN when another
// description holds it for longer than wait; EBADF for a descriptor not
// open for writing; ENOLCK, EINVAL where the filesystem has no OFD locks.
func ofdLock(fd int, wait time.Duration) syscall.Errno {
	return ofdTake(fd, unix.F_WRLCK, wait)
}

// ofdTake takes a lock of type typ (F_WRLCK, F_RDLCK) on fd's cross-mount
// byte, retrying for at most wait (ofdLock).
func ofdTake(fd int, typ int16, wait time.Duration) syscall.Errno {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: LockStart, Len: 1}
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

// ofdUnlock releases a lock of either type on fd's cross-mount byte.
func ofdUnlock(fd int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: LockStart, Len: 1}
	unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
}

// wait is the bounded wait for the cross-mount lock.
func (x *Mode) wait() time.Duration {
	if d := x.cfg.LockWait; d > 0 {
		return d
	}
	return LockWait
}

// LockFd takes the cross-mount lock through fd, a descriptor of the
// backing file rel open for writing, and returns the unlock, which on an
// uncached backing first writes fd's buffered writes through
// (SyncBeforeUnlock). Nothing is locked on an unshared mount (Shared
// false). A backing filesystem without OFD locks (EINVAL, ENOLCK,
// EOPNOTSUPP) is logged once and mutates without the lock: the guard's
// own lock still orders this mount's mutations. Errors: EAGAIN on
// timeout (logged with the reason); the unlock is then nil.
func (x *Mode) LockFd(fd int, rel string) (func(), syscall.Errno) {
	if x.off.Load() || !x.Shared() {
		return func() {}, 0
	}
	switch errno := ofdLock(fd, x.wait()); errno {
	case 0:
		x.locks.Add(1)
		return func() { x.SyncBeforeUnlock(fd); ofdUnlock(fd) }, 0
	case syscall.EAGAIN:
		x.timeouts.Add(1)
		x.cfg.Logger.Warn("refusing a mutation for now: another mount of the backing directory holds the file's cross-mount lock; try again",
			"path", rel, "waited", x.wait(), "errno", "EAGAIN")
		return nil, syscall.EAGAIN
	case syscall.EBADF:
		return func() {}, 0 // not open for writing: the mutation will fail itself
	default:
		if x.off.CompareAndSwap(false, true) {
			x.cfg.Logger.Warn("the backing filesystem has no OFD locks: mutations are not atomic against other mounts of it",
				"path", rel, "err", errno)
		}
		return func() {}, 0
	}
}

// ReadLock takes a read lock on the cross-mount byte of fd's open file
// description (LockFd's range), retrying for at most LockWait: it
// excludes every other mount's guarded mutation, not other readers. fd
// must be open for reading. ok is false when the lock is off (no OFD
// locks) or was not had in time; unlock is then a no-op.
func (x *Mode) ReadLock(fd int) (unlock func(), ok bool) {
	if x.off.Load() || ofdTake(fd, unix.F_RDLCK, x.wait()) != 0 {
		return func() {}, false
	}
	return func() { ofdUnlock(fd) }, true
}

// Target is one guarded name of a mutation to lock across mounts
// (LockAll): the identity its guard lock holds, its path for the log,
// and how to open it for writing without following a symlink or
// blocking.
type Target struct {
	ID   guard.FileID
	Rel  string
	Open func() (int, error)
}

// LockAll takes the cross-mount lock of every target (by identity), in
// inode-number order (the same on every host of a network filesystem),
// and returns one unlock. A file that cannot be opened for writing
// (permissions), or that is no longer the identity locked, is mutated
// without the lock. Nothing is locked when the lock is off. Errors:
// EAGAIN (LockFd), with everything taken so far released.
func (x *Mode) LockAll(ts []Target) (func(), syscall.Errno) {
	if len(ts) == 0 || x.off.Load() {
		return func() {}, 0
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID.Ino < ts[j].ID.Ino })
	var undo []func()
	unlockAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	for i, t := range ts {
		if i > 0 && t.ID.Ino == ts[i-1].ID.Ino {
			continue
		}
		lfd, err := t.Open()
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Fstat(lfd, &st) != nil || st.Ino != t.ID.Ino || uint64(st.Dev) != t.ID.Dev {
			syscall.Close(lfd)
			continue
		}
		unlock, errno := x.LockFd(lfd, t.Rel)
		if errno != 0 {
			syscall.Close(lfd)
			unlockAll()
			return nil, errno
		}
		undo = append(undo, func() { unlock(); syscall.Close(lfd) })
	}
	return unlockAll, 0
}
