package daemon

import (
	"fmt"
	"sync"
	"syscall"
)

// The daemon creates backing entries on behalf of callers and applies the
// caller's umask itself: the mount negotiates FUSE_DONT_MASK, so the kernel
// sends the unmasked mode with the caller's umask, and fusefs masks the mode
// unless the backing directory has a default POSIX ACL, which then replaces
// the umask as natively (docs/DESIGN.md#posix-acl). The daemon's own umask
// must therefore be 0, or it masks the mode a second time (a caller with
// umask 0 would get 0644 instead of 0666, and a default ACL would apply to
// a masked mode). This is what libfuse's passthrough examples do (umask(0)
// in main).
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
