package syscallcompat

// Calls on a leaf name that have no working "do not follow" *at form:
// through the leaf's own O_PATH descriptor and its /proc/self/fd magic
// link (docs/DESIGN.md#dirfd-walk).

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ProcPath names leaf in d through /proc/self/fd, for the calls that have
// no *at form (l*xattr) or none that works on an O_PATH descriptor (chmod,
// truncate). The magic link /proc/self/fd/N is the descriptor's directory
// itself, so nothing in the workspace is resolved by name but leaf, and
// leaf is not followed by the l* calls. "" names d itself.
func ProcPath(d Dir, leaf string) string {
	if leaf == "" {
		return fmt.Sprintf("/proc/self/fd/%d", d.FD)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.FD, leaf)
}

// ChmodAt changes the mode of leaf in d, never of a symlink's target:
// fchmodat2(AT_SYMLINK_NOFOLLOW) (Linux 6.6, Fchmodat2). Before 6.6
// chmod(2) has no working "do not follow" form, and fchmod refuses O_PATH
// descriptors, so this is then glibc's fchmodat(AT_SYMLINK_NOFOLLOW): open
// the leaf itself with O_PATH, refuse a symlink with EOPNOTSUPP (what Linux
// answers: a symlink's mode cannot be changed), and chmod the descriptor's
// /proc/self/fd magic link.
func ChmodAt(d Dir, leaf string, mode uint32) syscall.Errno {
	if errno, ok := Fchmodat2(d, leaf, mode); ok {
		return errno
	}
	return LeafAt(d, leaf, syscall.EOPNOTSUPP, func(p string) error { return unix.Chmod(p, mode) })
}

// TruncateAt sets the size of leaf in d, with truncate(2)'s permission
// check (write permission, not an open for writing, so a fifo or device
// is never opened) through the leaf's O_PATH descriptor. A symlink is not
// followed: ELOOP, as an O_NOFOLLOW open for writing answers. (The kernel
// never sends a size change for a symlink node: it truncates the target.)
func TruncateAt(d Dir, leaf string, size uint64) syscall.Errno {
	return LeafAt(d, leaf, syscall.ELOOP, func(p string) error { return unix.Truncate(p, int64(size)) })
}

// LeafAt runs fn on the /proc/self/fd magic link of leaf in d, opened
// itself as an O_PATH descriptor (PathFdAt), for path calls that would
// follow a final symlink: a symlink leaf is refused with onLink instead.
// Errors: those of PathFdAt, onLink, and fn's as errno.
func LeafAt(d Dir, leaf string, onLink syscall.Errno, fn func(p string) error) syscall.Errno {
	var st syscall.Stat_t
	fd, errno := PathFdAt(d, leaf, &st)
	if errno != 0 {
		return errno
	}
	defer unix.Close(fd)
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return onLink
	}
	return toErrno(fn(ProcPath(Dir{FD: fd}, "")))
}

// TouchCtimeAt sets leaf's ctime to now as chown(leaf, -1, -1) does,
// without following a symlink. Errors: those of fchownat(2), as errno.
func TouchCtimeAt(d Dir, leaf string) syscall.Errno {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if leaf == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Fchownat(d.FD, leaf, -1, -1, flags); err != nil {
		return err.(syscall.Errno)
	}
	return 0
}

// EntryGid returns the group a new entry of a caller whose fsgid is
// callerGid gets in the directory parent: the directory's group when it
// has the set-group-ID bit (the backing filesystem gave the entry that
// group already, so -1: keep it), else callerGid. On a failed stat of
// parent it answers callerGid, as before the rule.
func EntryGid(parent Dir, callerGid uint32) int {
	var st syscall.Stat_t
	if syscall.Fstat(parent.FD, &st) == nil && st.Mode&syscall.S_ISGID != 0 {
		return -1
	}
	return int(callerGid)
}
