package journal

// The plain-directory Inspector and Applier, and the per-name functions
// they are built of (each on a parent directory descriptor, so the mount
// can call them from its own mutation path).

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// OpenParent opens the directory holding rel (workspace-relative,
// slash-separated) under root, component by component with O_NOFOLLOW, so
// no symlink in the middle of the path is followed, and returns its
// descriptor (the caller closes it) and the last component. Errors are the
// openat errno (ENOENT, ENOTDIR, ELOOP for a symlink in the middle), or
// EINVAL for an empty, absolute or ".."-bearing rel.
func OpenParent(root, rel string) (int, string, error) {
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return -1, "", fmt.Errorf("journal: bad path %q: %w", rel, unix.EINVAL)
		}
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	for _, p := range parts[:len(parts)-1] {
		nfd, err := unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, "", err
		}
		fd = nfd
	}
	return fd, parts[len(parts)-1], nil
}

// LstatAt returns the After of leaf in dirfd (never following a final
// symlink), with Path set to path: KindAbsent for ENOENT or ENOTDIR;
// devices, fifos and sockets count as KindFile. Hash is left empty. Other
// errors are fstatat's errno.
func LstatAt(dirfd int, leaf, path string) (After, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return After{Path: path, Kind: KindAbsent}, nil
		}
		return After{}, err
	}
	return After{Path: path, Kind: kindOf(st.Mode), Mode: st.Mode, Size: st.Size, Ino: st.Ino,
		MtimeNs: st.Mtim.Sec*1e9 + st.Mtim.Nsec}, nil
}

func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return KindDir
	case unix.S_IFLNK:
		return KindSymlink
	}
	return KindFile
}

// HashFile returns the 32-hex xxh3-128 of the bytes of the regular file
// leaf in dirfd (the same digest as a blob address). A symlink is not
// followed (ELOOP); anything else that is no regular file when opened (a
// fifo swapped in since the caller looked) is EINVAL, never waited on.
func HashFile(dirfd int, leaf string) (string, error) {
	fd, err := unix.Openat(dirfd, leaf, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	// Swapped for a fifo since the caller's fstatat (another session, an
	// agent): its reads would wait on the poller as long as a writer
	// holds it open. Only a regular file is hashed, read blocking.
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("%s: not a regular file now: %w", leaf, unix.EINVAL)
	}
	if err == nil {
		err = unix.SetNonblock(fd, false)
	}
	if err != nil {
		unix.Close(fd)
		return "", err
	}
	f := os.NewFile(uintptr(fd), leaf)
	defer f.Close()
	h := xxh3.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := h.Sum128().Bytes()
	return hex.EncodeToString(sum[:]), nil
}

// UpToDateAt reports whether leaf in dirfd already is what pre says (so a
// restore would change nothing): absent; a directory with pre's permission
// bits; a symlink to pre.Target; a regular file with pre's mode, size and
// bytes (hashed only when mode and size match).
func UpToDateAt(dirfd int, leaf string, pre PreImage) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return pre.Kind == KindAbsent, nil
		}
		return false, err
	}
	switch pre.Kind {
	case KindDir:
		return st.Mode == pre.Mode, nil
	case KindSymlink:
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return false, nil
		}
		t, err := readlinkAt(dirfd, leaf)
		return err == nil && t == pre.Target, err
	case KindFile:
		if st.Mode != pre.Mode || pre.Blob == "" || st.Size != pre.Size || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return false, nil
		}
		h, err := HashFile(dirfd, leaf)
		return err == nil && h == pre.Blob, err
	}
	return false, nil
}

func readlinkAt(dirfd int, leaf string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, leaf, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// RestoreAt makes leaf in dirfd what pre says: KindAbsent removes a file
// or symlink, or an empty directory (ENOTEMPTY otherwise; nothing when it
// is already missing); KindDir creates the directory (replacing a
// non-directory) or only fixes its mode; KindSymlink and KindFile are made
// under a temporary name in the same directory (".rubino-restore-*") and
// renamed over leaf (an empty directory in the way is removed first), a
// file with pre's bytes from blobs and pre's permission bits, a device or
// fifo by mknod. A pre-image without bytes (Unrecoverable) is an error.
// Errors are the syscall's errno or the blob store's.
func RestoreAt(dirfd int, leaf string, pre PreImage, blobs *Blobs) error {
	var st unix.Stat_t
	exists := true
	if err := unix.Fstatat(dirfd, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err != unix.ENOENT {
			return err
		}
		exists = false
	}
	isDir := exists && st.Mode&unix.S_IFMT == unix.S_IFDIR
	perm := pre.Mode & 0o7777
	switch pre.Kind {
	case KindAbsent:
		if !exists {
			return nil
		}
		if isDir {
			return unix.Unlinkat(dirfd, leaf, unix.AT_REMOVEDIR)
		}
		return unix.Unlinkat(dirfd, leaf, 0)
	case KindDir:
		if exists && !isDir {
			if err := unix.Unlinkat(dirfd, leaf, 0); err != nil {
				return err
			}
			exists = false
		}
		if !exists {
			if err := unix.Mkdirat(dirfd, leaf, 0o700); err != nil {
				return err
			}
		} else if st.Mode&0o7777 == perm {
			return nil
		}
		return unix.Fchmodat(dirfd, leaf, perm, 0)
	case KindSymlink, KindFile:
	default:
		return fmt.Errorf("journal: unknown pre-image kind %q", pre.Kind)
	}
	if pre.Unrecoverable != "" {
		return errors.New(pre.Unrecoverable)
	}
	tmp, err := makeTemp(dirfd, pre, blobs)
	if err != nil {
		return err
	}
	if isDir {
		if err := unix.Unlinkat(dirfd, leaf, unix.AT_REMOVEDIR); err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
			return err
		}
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, leaf); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return nil
}

// makeTemp creates pre's symlink, special file or file (bytes and mode)
// under a fresh temporary name in dirfd (CreateAt) and returns the name.
func makeTemp(dirfd int, pre PreImage, blobs *Blobs) (string, error) {
	for try := 0; ; try++ {
		name := fmt.Sprintf(".rubino-restore-%016x", rand.Uint64())
		err := CreateAt(dirfd, name, pre, blobs)
		if err == unix.EEXIST && try < 8 {
			continue
		}
		if err != nil {
			return "", err
		}
		return name, nil
	}
}

// CreateAt creates leaf in dirfd as pre's symlink (to pre.Target), special
// file (a pre-image of a non-empty kind without bytes: mknod with pre.Mode
// and pre.Rdev)
// or regular file (O_EXCL, then pre's bytes and permission bits, FillFd),
// owned by the calling process. leaf must be missing (EEXIST otherwise);
// on any other error what was created is removed again. Errors are the
// syscall's errno or the blob store's.
func CreateAt(dirfd int, leaf string, pre PreImage, blobs *Blobs) error {
	var err error
	switch {
	case pre.Kind == KindSymlink:
		return unix.Symlinkat(pre.Target, dirfd, leaf)
	case pre.Blob == "" && pre.Mode&unix.S_IFMT != unix.S_IFREG && pre.Mode&unix.S_IFMT != 0:
		if err = unix.Mknodat(dirfd, leaf, pre.Mode, int(pre.Rdev)); err != nil {
			return err
		}
		err = unix.Fchmodat(dirfd, leaf, pre.Mode&0o7777, 0)
	default:
		var fd int
		fd, err = unix.Openat(dirfd, leaf, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		err = FillFd(fd, pre, blobs)
		unix.Close(fd)
	}
	if err != nil {
		unix.Unlinkat(dirfd, leaf, 0)
	}
	return err
}

// FillFd writes pre's bytes (blob pre.Blob, none when it is empty) at the
// offset of fd, a regular file open for writing that the caller owns and
// closes, then gives it pre's permission bits (setuid, setgid and sticky
// included). Errors are the blob store's, write's (io.ErrShortWrite) or
// fchmod's.
func FillFd(fd int, pre PreImage, blobs *Blobs) error {
	if pre.Blob != "" {
		src, err := blobs.Open(pre.Blob)
		if err != nil {
			return err
		}
		defer src.Close()
		if _, err := io.Copy(fdWriter(fd), src); err != nil {
			return err
		}
	}
	return unix.Fchmod(fd, pre.Mode&0o7777)
}

// fdWriter writes to a borrowed descriptor, which it never closes (an
// *os.File would close it again from its finalizer, by then perhaps
// another file's number).
type fdWriter int

// Write writes p at the descriptor's offset.
func (w fdWriter) Write(p []byte) (int, error) {
	n, err := unix.Write(int(w), p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return max(n, 0), err
}

// RenameReplacingAt renames oldLeaf in oldfd to newLeaf in newfd,
// replacing what is there even when its kind differs (the undo of a
// rename, whose target name may since hold an empty directory where a file
// was, or a file where a directory was): on EISDIR the empty directory is
// removed first, on ENOTDIR the non-directory. A non-empty directory in
// the way stays (ENOTEMPTY or EEXIST).
func RenameReplacingAt(oldfd int, oldLeaf string, newfd int, newLeaf string) error {
	err := unix.Renameat(oldfd, oldLeaf, newfd, newLeaf)
	switch err {
	case unix.EISDIR:
		if err := unix.Unlinkat(newfd, newLeaf, unix.AT_REMOVEDIR); err != nil {
			return err
		}
	case unix.ENOTDIR:
		var st unix.Stat_t
		if unix.Fstatat(newfd, newLeaf, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return err
		}
		if err := unix.Unlinkat(newfd, newLeaf, 0); err != nil {
			return err
		}
	default:
		return err
	}
	return unix.Renameat(oldfd, oldLeaf, newfd, newLeaf)
}
