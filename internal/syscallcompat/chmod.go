package syscallcompat

import (
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noFchmodat2 is set once Fchmodat2(2) answered ENOSYS (kernels before
// 6.6, or a seccomp filter that does not know it).
var noFchmodat2 atomic.Bool

// Fchmodat2 changes the mode of leaf in d with fchmodat2(2) and
// AT_SYMLINK_NOFOLLOW: one syscall, and a symlink leaf is refused with
// EOPNOTSUPP by the kernel itself. ok is false when the syscall is not
// available (nothing was done: the caller falls back). Errors: those of
// fchmodat2(2), as errno. Rule: docs/DESIGN.md#dirfd-walk.
func Fchmodat2(d Dir, leaf string, mode uint32) (errno syscall.Errno, ok bool) {
	if noFchmodat2.Load() {
		return 0, false
	}
	p, err := unix.BytePtrFromString(leaf)
	if err != nil {
		return syscall.EINVAL, true
	}
	_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(d.FD), uintptr(unsafe.Pointer(p)), uintptr(mode),
		uintptr(unix.AT_SYMLINK_NOFOLLOW), 0, 0)
	if e == unix.ENOSYS {
		noFchmodat2.Store(true)
		return 0, false
	}
	return e, true
}
