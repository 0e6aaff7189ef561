package syscallcompat

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// OpenForHash opens p read-only for hashing without touching its atime (the
// guard's own reads must be invisible: stat through the mount shows what the
// caller's reads did). O_NOATIME needs ownership or CAP_FOWNER; without them
// the open is retried plainly. flags adds open flags; an O_DIRECT one the
// filesystem refuses (EINVAL) is dropped, and with O_DIRECT the file is
// fstat'ed through to the server first (docs/DESIGN.md#uncached-view).
// Errors: those of open(2), as *os.PathError.
func OpenForHash(p string, flags int) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|flags|syscall.O_NOATIME, 0)
	if errors.Is(err, syscall.EPERM) {
		f, err = os.OpenFile(p, os.O_RDONLY|flags, 0)
	}
	if errors.Is(err, syscall.EINVAL) && flags&syscall.O_DIRECT != 0 {
		return OpenForHash(p, flags&^syscall.O_DIRECT)
	}
	if err == nil && flags&syscall.O_DIRECT != 0 {
		var st syscall.Stat_t
		FstatSync(int(f.Fd()), &st) // reads run to the real end (docs/DESIGN.md#uncached-view)
	}
	return f, err
}

// CloexecFuseFds sets close-on-exec on every descriptor of this process
// that is open on /dev/fuse, so that no child the daemon starts inherits
// the mount's channel (fusefs.Mount calls it after mounting). Errors are
// ignored: a /proc that cannot be read leaves the descriptors as they are.
func CloexecFuseFds() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			syscall.CloseOnExec(fd)
		}
	}
}
