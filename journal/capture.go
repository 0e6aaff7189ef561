package journal

// Capturing a pre-image from the backing filesystem.

import (
	"golang.org/x/sys/unix"
)

// CaptureAt returns the pre-image of name in the directory dirfd, as it is
// now, without following a final symlink: KindAbsent for ENOENT, a
// directory's mode, a symlink's target, or a regular file's mode, size and
// bytes (stored in b; UnrecoverableTooLarge past its limit). Other file
// types (devices, fifos, sockets) are recorded as a file with their mode,
// a device's number (Rdev) and no blob. All but KindAbsent keep the owner and group (Uid, Gid).
// Errors are the errno of fstatat, openat or readlinkat, or of the blob
// store. Path is left for the caller to fill.
func CaptureAt(b *Blobs, dirfd int, name string) (PreImage, error) {
	return captureAt(b, dirfd, name, nil)
}

// CaptureOptions tune CaptureWith. Doomed: the caller is about to remove
// (unlink) or replace (a rename's target) the name, so its inode may be
// linked into the store rather than copied, when MayLink (given the
// file's fstat; nil: no) says yes: the caller says no when the file is
// open, since a linked inode keeps st_nlink 1 after the removal, which an
// open handle would see. KnownHash (nil: none) returns the file's xxh3-128
// (32 hex digits) when the caller already knows it for exactly that fstat
// (a hash cache), else "": then a file already stored is neither read nor
// copied, and a doomed file that may be linked is linked by its name,
// never opened (docs/DESIGN.md#journal-link-named). After a failed removal of a doomed name the caller calls
// Journal.Unshare on the record (docs/DESIGN.md#journal-sync). Share
// (nil: none) is the share of the budget the new blob's bytes are
// charged to (Journal.ShareOf of the recording session): past its limit
// the pre-image is UnrecoverableOverBudget (docs/DESIGN.md#journal-share).
type CaptureOptions struct {
	Doomed    bool
	MayLink   func(*unix.Stat_t) bool
	KnownHash func(*unix.Stat_t) string
	Share     *Share
}

// CaptureWith is CaptureAt with opt; a regular file's bytes are stored by
// Blobs.PutFile.
func CaptureWith(b *Blobs, dirfd int, name string, opt CaptureOptions) (PreImage, error) {
	return captureAt(b, dirfd, name, &opt)
}

func captureAt(b *Blobs, dirfd int, name string, opt *CaptureOptions) (PreImage, error) {
	var uid, gid uint32
	pre, err := captureKind(b, dirfd, name, opt, &uid, &gid)
	if err == nil && pre.Kind != KindAbsent {
		pre.Uid, pre.Gid = &uid, &gid // docs/DESIGN.md#as-caller
	}
	return pre, err
}

// captureKind is captureAt's work; it sets *uid and *gid to the name's
// owner and group.
func captureKind(b *Blobs, dirfd int, name string, opt *CaptureOptions, uid, gid *uint32) (PreImage, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return PreImage{Kind: KindAbsent}, nil
		}
		return PreImage{}, err
	}
	*uid, *gid = st.Uid, st.Gid
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
		return PreImage{Kind: KindFile, Mode: st.Mode, Size: st.Size, Rdev: st.Rdev}, nil
	}
	pre := PreImage{Kind: KindFile, Mode: st.Mode, Size: st.Size}
	if st.Size > b.limit {
		pre.Unrecoverable = UnrecoverableTooLarge
		return pre, nil
	}
	if opt != nil && opt.Doomed && opt.KnownHash != nil && opt.MayLink != nil {
		if blob, ok := b.linkNamed(dirfd, name, &st, opt); ok {
			pre.Size, pre.Blob, pre.Unrecoverable = blob.Size, blob.Addr, blob.Unrecoverable
			return pre, nil
		}
	}
	b.opens.Add(1)
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return PreImage{}, err
	}
	defer unix.Close(fd)
	var blob Blob
	if opt != nil && unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		pre.Size = st.Size
		known := ""
		if opt.KnownHash != nil {
			known = opt.KnownHash(&st)
		}
		blob, err = b.PutFile(fd, &st, known, opt.Doomed && opt.MayLink != nil && opt.MayLink(&st), opt.Share)
	} else {
		var sh *Share
		if opt != nil {
			sh = opt.Share
		}
		blob, err = b.putFromFd(fd, st.Size, sh)
	}
	if err != nil {
		return PreImage{}, err
	}
	pre.Size, pre.Blob, pre.Unrecoverable = blob.Size, blob.Addr, blob.Unrecoverable
	return pre, nil
}
