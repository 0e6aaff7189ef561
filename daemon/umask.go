package daemon

import (
	"fmt"
	"sync"
	"syscall"
)

// The daemon creates backing entries on behalf of callers, and the kernel
// has already applied the caller's umask to the mode a CREATE, MKDIR or
// MKNOD request carries: rubinofs does not negotiate FUSE_DONT_MASK, so
// fs/fuse/dir.c masks the mode with current_umask() before sending it. The
// daemon's own umask must therefore be 0, or it masks the mode a second
// time (a caller with umask 0 would get 0644 instead of 0666). This is
// what libfuse's passthrough examples do (umask(0) in main).
//
// A backing directory with a default POSIX ACL is the one place where the
// result can differ from native: natively the default ACL replaces the
// umask, through the mount the kernel has masked the mode already and the
// backing filesystem then applies the ACL to that. The daemon's umask never
// entered that case (a default ACL makes the backing filesystem ignore
// it), so umask 0 leaves it as it was.
//
// Every file the daemon creates for itself (state directory, lock, logs,
// task logs) is created with an explicit mode, so umask 0 makes none of
// them more permissive. Processes the daemon starts for tasks get the
// umask the daemon was started with back (tasks.Config.Umask).

var (
	umaskOnce sync.Once
	umaskPrev int
)

// zeroUmask sets the process umask to 0 (once per process: several mounts
// in one process share it, and none restores it, since another mount may
// still be creating files) and returns the umask the process had before.
func zeroUmask() int {
	umaskOnce.Do(func() { umaskPrev = syscall.Umask(0) })
	return umaskPrev
}

// taskUmask formats the umask tasks start with, for tasks.Config.Umask.
func taskUmask(u int) string { return fmt.Sprintf("%04o", u&0o777) }
