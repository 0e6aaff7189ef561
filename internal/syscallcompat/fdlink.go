package syscallcompat

// The name the kernel has now for an open descriptor's file, read from
// its /proc/self/fd magic link.

import (
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// procSelfFd is a descriptor of this process's /proc/self/fd directory,
// opened at the first FdLink and kept: a readlink through it resolves one
// name, where "/proc/self/fd/N" resolves four and follows the self link
// (about two thirds of the call's time in a profile of a clone through
// the mount). The descriptor table is the process's, shared by every
// thread, so any thread may use it. Its error is kept too: FdLink then
// reads by the full path.
var procSelfFd = sync.OnceValues(func() (int, error) {
	return unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
})

// FdLink returns the target of fd's /proc/self/fd magic link: the path the
// kernel has now for the file, " (deleted)" appended once it has no name.
// Errors are readlink's, as *os.PathError (EBADF reaches the caller as
// ENOENT: no such entry in the directory). Safe for concurrent use.
func FdLink(fd int) (string, error) {
	dir, err := procSelfFd()
	if err != nil {
		return os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	}
	name := strconv.Itoa(fd)
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlinkat", Path: "/proc/self/fd/" + name, Err: err}
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
