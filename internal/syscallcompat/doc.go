// Package syscallcompat holds the daemon's backing-filesystem syscalls
// that need no FUSE node state: the walk beneath the workspace root
// descriptor, the *at calls on a directory descriptor and a leaf name that
// never follow a final symlink, their fallbacks for older kernels
// (openat2, fchmodat2, *xattrat), and the plain argument conversions of
// SETATTR. It decides nothing and keeps no state but the "syscall missing"
// flags; fusefs calls it (docs/DESIGN.md#syscall-room). The model is
// gocryptfs' internal/syscallcompat.
package syscallcompat

import (
	"errors"
	"syscall"
)

// toErrno is err as an errno: 0 for nil, the errno an x/sys/unix call
// returned, EIO for anything else (which these calls never return).
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}
