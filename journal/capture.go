package journal

// Capturing a pre-image from the backing filesystem.

import (
	"golang.org/x/sys/unix"
)

// CaptureAt returns the pre-image of name in the directory dirfd, as it is
// now, without following a final symlink: KindAbsent for ENOENT, a
// directory's mode, a symlink's target, or a regular file's mode, size and
// bytes (stored in b; UnrecoverableTooLarge past its limit). Other file
// types (devices, fifos, sockets) are recorded as a file with their mode
// and no blob. Errors are the errno of fstatat, openat or readlinkat, or
// of the blob store. Path is left for the caller to fill.
func CaptureAt(b *Blobs, dirfd int, name string) (PreImage, error) {
	return captureAt(b, dirfd, name, nil)
}

// CaptureDoomedAt is CaptureAt for a name the caller is about to remove
// (unlink) or replace (the target of a rename): a regular file that is
// its inode's only link, and for which mayLink (given its fstat) says
// yes, is kept by linking that inode into the store (Blobs.PutDoomed)
// instead of copying it. mayLink is where the caller says no when the
// file is open (a linked inode keeps st_nlink 1 after the removal, which
// an open handle would see). After a failed removal the caller calls
// Journal.Unshare on the record (docs/DESIGN.md#journal-sync).
func CaptureDoomedAt(b *Blobs, dirfd int, name string, mayLink func(*unix.Stat_t) bool) (PreImage, error) {
	return captureAt(b, dirfd, name, mayLink)
}

func captureAt(b *Blobs, dirfd int, name string, mayLink func(*unix.Stat_t) bool) (PreImage, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return PreImage{Kind: KindAbsent}, nil
		}
		return PreImage{}, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return PreImage{Kind: KindDir, Mode: st.Mode}, nil
	case unix.S_IFLNK:
		buf := make([]byte, 4096)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return PreImage{}, err
		}
		return PreImage{Kind: KindSymlink, Mode: st.Mode, Target: string(buf[:n])}, nil
	case unix.S_IFREG:
	default:
		return PreImage{Kind: KindFile, Mode: st.Mode, Size: st.Size}, nil
	}
	pre := PreImage{Kind: KindFile, Mode: st.Mode, Size: st.Size}
	if st.Size > b.limit {
		pre.Unrecoverable = UnrecoverableTooLarge
		return pre, nil
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return PreImage{}, err
	}
	defer unix.Close(fd)
	var blob Blob
	if mayLink != nil && unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && mayLink(&st) {
		pre.Size = st.Size
		blob, err = b.PutDoomed(fd, &st)
	} else {
		blob, err = b.PutFromFd(fd, st.Size)
	}
	if err != nil {
		return PreImage{}, err
	}
	pre.Size, pre.Blob, pre.Unrecoverable = blob.Size, blob.Addr, blob.Unrecoverable
	return pre, nil
}
