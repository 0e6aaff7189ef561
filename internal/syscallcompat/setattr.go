package syscallcompat

// SETATTR's fields turned into the backing syscalls' arguments, and the
// attribute rules the daemon's own syscalls do not give by themselves
// (docs/DESIGN.md#posix-owner-ctime, docs/DESIGN.md#killpriv).

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// setattrChanges is the part of a SETATTR's valid mask that changes an
// attribute (mode, owner, size, times).
const setattrChanges = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE |
	fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_CTIME

// OnlyCtime reports whether in changes no attribute: the SETATTR the
// kernel sends for chown(path, -1, -1), which natively still sets ctime
// to now (notify_change with ATTR_CTIME alone). Without a writeback cache
// the kernel does not pass the ctime on (FATTR_CTIME), so the mask is
// empty.
func OnlyCtime(in *fuse.SetAttrIn) bool {
	return in.Valid&setattrChanges == 0 || in.Valid&setattrChanges == fuse.FATTR_CTIME
}

// SetattrTimes turns SETATTR's atime and mtime into utimensat(2)'s pair
// (UTIME_OMIT for the one not set; the kernel has already resolved
// UTIME_NOW to a time). ok is false when neither is set. Errors: ERANGE from
// a time that does not fit a timespec, as errno.
func SetattrTimes(in *fuse.SetAttrIn) (ts []unix.Timespec, ok bool, errno syscall.Errno) {
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if !mok && !aok {
		return nil, false, 0
	}
	ts = []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	var err error
	if aok {
		if ts[0], err = unix.TimeToTimespec(atime); err != nil {
			return nil, false, toErrno(err)
		}
	}
	if mok {
		if ts[1], err = unix.TimeToTimespec(mtime); err != nil {
			return nil, false, toErrno(err)
		}
	}
	return ts, true, 0
}

// SetattrOwner turns SETATTR's owner and group into chown(2)'s pair (-1 for
// the one not set). ok is false when neither is set.
func SetattrOwner(in *fuse.SetAttrIn) (uid, gid int, ok bool) {
	uid, gid = -1, -1
	if u, uok := in.GetUID(); uok {
		uid, ok = int(u), true
	}
	if g, gok := in.GetGID(); gok {
		gid, ok = int(g), true
	}
	return uid, gid, ok
}

// KillPrivMode returns mode (permission and set-id bits) with the bits a
// write or truncation by a caller without CAP_FSETID removes through FUSE.
func KillPrivMode(mode uint32) uint32 {
	kill := mode &^ syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		kill &^= syscall.S_ISGID
	}
	return kill
}

// KillPrivFd removes from the file open at fd the set-id bits a write or
// truncation by a caller without CAP_FSETID removes. Errors are ignored:
// the write or truncation itself has succeeded, and natively it does not
// fail for this either.
func KillPrivFd(fd int) {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	mode := st.Mode & 0o7777
	if kill := KillPrivMode(mode); kill != mode {
		syscall.Fchmod(fd, kill)
	}
}

// SetattrFd applies a SETATTR to the open descriptor fd: mode, owner, size
// and times (in that order, as by name), then fstats into out. A size
// change uses ftruncate when fd is writable, else truncate(2) of the
// descriptor's /proc/self/fd link (write permission, as by name). Times go
// through the /proc/self/fd link too (futimens has no x/sys/unix wrapper);
// fd is a regular file's descriptor, never a symlink's, so following the
// link reaches fd's own inode. Errors: those of the syscalls, as errno.
func SetattrFd(fd int, writable bool, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	self := ProcPath(Dir{FD: fd}, "")
	if m, ok := in.GetMode(); ok {
		if err := unix.Fchmod(fd, m); err != nil {
			return toErrno(err)
		}
	}
	if suid, sgid, ok := SetattrOwner(in); ok {
		if err := unix.Fchown(fd, suid, sgid); err != nil {
			return toErrno(err)
		}
	}
	if sz, ok := in.GetSize(); ok {
		var err error
		if writable {
			err = unix.Ftruncate(fd, int64(sz))
		} else {
			err = unix.Truncate(self, int64(sz))
		}
		if err != nil {
			return toErrno(err)
		}
	}
	if ts, ok, errno := SetattrTimes(in); errno != 0 {
		return errno
	} else if ok {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, self, ts, 0); err != nil {
			return toErrno(err)
		}
	}
	if OnlyCtime(in) {
		if errno := TouchCtimeAt(Dir{FD: fd}, ""); errno != 0 {
			return errno
		}
	}
	var st syscall.Stat_t
	if _, errno := StatAt(Dir{FD: fd}, "", &st); errno != 0 {
		return errno
	}
	out.FromStat(&st)
	return 0
}
