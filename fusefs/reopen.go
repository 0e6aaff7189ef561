package fusefs

import (
	"context"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// reopenGone opens n, a file whose every name is gone while a handle of
// it is open, through that handle's /proc/self/fd link, as
// open(/proc/PID/fd/N) of a file unlinked while open does natively (a
// path-based open would fail with ENOENT). The kernel has checked the
// caller's permission on the inode before the OPEN. ok is false, and the
// caller answers as before, when n still has a name in go-fuse's tree, has
// no open handle, or when the backing file still has a link: some name
// the kernel does not know leads to it, and such a file is opened by that
// name, guarded, never here.
//
// The handle is unguarded, like an exempt file's (plainFile, or a
// passthrough one when the inode's io mode requires it): with no link the
// file can never be given a name again (only an O_TMPFILE file can, and
// that one is linked through its handle, linkfd.go), so its bytes are
// nobody's workspace content; the guard drops its records with the last
// handle (docs/POSIX.md).
func (n *Node) reopenGone(ctx context.Context, flags uint32) (fh fs.FileHandle, fl uint32, errno syscall.Errno, ok bool) {
	if _, parent := n.Parent(); parent != nil || n.isRoot() {
		return nil, 0, 0, false
	}
	fd, _, has := n.handleFd(false)
	if !has {
		return nil, 0, 0, false
	}
	defer unix.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Nlink != 0 {
		return nil, 0, 0, false
	}
	flags &^= syscall.O_APPEND | syscall.O_CREAT | syscall.O_EXCL | fuse.FMODE_EXEC
	nfd, err := unix.Open(procPath(dirFd{FD: fd}, ""), int(flags)|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fs.ToErrno(err), true
	}
	killPrivOnTrunc(ctx, flags, nfd)
	lf := fs.NewLoopbackFileFromOS(os.NewFile(uintptr(nfd), ""))
	pt, drop := n.openHandle(lf, flags, false)
	switch {
	case !pt:
		return &plainFile{loopbackOps: lf, node: n, drop: drop}, 0, 0, true
	case flags&syscall.O_ACCMODE != syscall.O_RDONLY:
		return n.fs.passthroughWriter(lf, n.rel(), drop, nil), 0, 0, true
	}
	return &keptFile{LoopbackFile: lf, node: n, drop: drop}, 0, 0, true
}
