package syscallcompat

// By-name extended-attribute calls relative to a directory descriptor:
// getxattrat(2), listxattrat(2), setxattrat(2) and removexattrat(2) (Linux
// 6.13) with AT_SYMLINK_NOFOLLOW are one syscall on the directory
// descriptor and the leaf name. Before 6.13 (ENOSYS, remembered) they fall
// back to l*xattr of the leaf's
// /proc/self/fd name (ProcPath), which resolves the same file (the
// descriptor's directory, then leaf, not followed) at several times the
// cost: the magic link is looked up through procfs on every call.

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noXattrat is set once one of the *xattrat calls answered ENOSYS.
var noXattrat atomic.Bool

// xattrArgs is the kernel's struct xattr_args (include/uapi/linux/xattr.h):
// the value buffer's address and size, and setxattr flags (0 here).
type xattrArgs struct {
	value uint64
	size  uint32
	flags uint32
}

// GetxattrAt reads attribute attr of leaf in d into dest (size only when
// dest is empty), without following leaf. Errors: those of getxattr(2)
// (ENODATA, ERANGE, ...), as returned by the kernel.
func GetxattrAt(d Dir, leaf, attr string, dest []byte) (int, error) {
	if !noXattrat.Load() {
		sz, err := getxattrat(d.FD, leaf, attr, dest)
		if err != unix.ENOSYS {
			return sz, err
		}
		noXattrat.Store(true)
	}
	return unix.Lgetxattr(ProcPath(d, leaf), attr, dest)
}

// ListxattrAt lists the attribute names of leaf in d into dest, without
// following leaf. Errors: those of listxattr(2).
func ListxattrAt(d Dir, leaf string, dest []byte) (int, error) {
	if !noXattrat.Load() {
		sz, err := listxattrat(d.FD, leaf, dest)
		if err != unix.ENOSYS {
			return sz, err
		}
		noXattrat.Store(true)
	}
	return unix.Llistxattr(ProcPath(d, leaf), dest)
}

// getxattrat is the raw getxattrat(2) with AT_SYMLINK_NOFOLLOW.
func getxattrat(dirfd int, path, attr string, dest []byte) (int, error) {
	return xattrat(unix.SYS_GETXATTRAT, dirfd, path, attr, dest, 0)
}

// xattrat is getxattrat(2) or setxattrat(2) (sysno), which share their
// arguments: the directory and path (not followed), the attribute name,
// and a struct xattr_args with the value buffer buf and setxattr flags.
func xattrat(sysno uintptr, dirfd int, path, attr string, buf []byte, flags int) (int, error) {
	p, a, err := cStrings(path, attr)
	if err != nil {
		return 0, err
	}
	args := xattrArgs{size: uint32(len(buf)), flags: uint32(flags)}
	if len(buf) > 0 {
		args.value = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	r, _, e := unix.Syscall6(sysno, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		uintptr(unix.AT_SYMLINK_NOFOLLOW), uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
	runtime.KeepAlive(buf)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// cStrings returns path and attr as NUL-terminated strings. Errors: EINVAL
// for a string holding a NUL byte.
func cStrings(path, attr string) (p, a *byte, err error) {
	if p, err = unix.BytePtrFromString(path); err != nil {
		return nil, nil, err
	}
	a, err = unix.BytePtrFromString(attr)
	return p, a, err
}

// listxattrat is the raw listxattrat(2) with AT_SYMLINK_NOFOLLOW.
func listxattrat(dirfd int, path string, dest []byte) (int, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return 0, err
	}
	var buf unsafe.Pointer
	if len(dest) > 0 {
		buf = unsafe.Pointer(&dest[0])
	}
	r, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		uintptr(unix.AT_SYMLINK_NOFOLLOW), uintptr(buf), uintptr(len(dest)), 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// SetxattrLeaf sets attribute attr of leaf in d to data with setxattr(2)'s
// flags (XATTR_CREATE, XATTR_REPLACE), without following leaf. Errors:
// those of setxattr(2).
func SetxattrLeaf(d Dir, leaf, attr string, data []byte, flags int) error {
	if !noXattrat.Load() {
		err := setxattrat(d.FD, leaf, attr, data, flags)
		if err != unix.ENOSYS {
			return err
		}
		noXattrat.Store(true)
	}
	return unix.Lsetxattr(ProcPath(d, leaf), attr, data, flags)
}

// RemovexattrLeaf removes attribute attr of leaf in d, without following
// leaf. Errors: those of removexattr(2).
func RemovexattrLeaf(d Dir, leaf, attr string) error {
	if !noXattrat.Load() {
		err := removexattrat(d.FD, leaf, attr)
		if err != unix.ENOSYS {
			return err
		}
		noXattrat.Store(true)
	}
	return unix.Lremovexattr(ProcPath(d, leaf), attr)
}

// setxattrat is the raw setxattrat(2) with AT_SYMLINK_NOFOLLOW.
func setxattrat(dirfd int, path, attr string, data []byte, flags int) error {
	_, err := xattrat(unix.SYS_SETXATTRAT, dirfd, path, attr, data, flags)
	return err
}

// removexattrat is the raw removexattrat(2) with AT_SYMLINK_NOFOLLOW.
func removexattrat(dirfd int, path, attr string) error {
	p, a, err := cStrings(path, attr)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_REMOVEXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		uintptr(unix.AT_SYMLINK_NOFOLLOW), uintptr(unsafe.Pointer(a)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
