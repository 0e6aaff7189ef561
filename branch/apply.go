package branch

// Applying one merge step, and reading the workspace's side of a path,
// relative to the path's parent directory opened without following a
// symlink (docs/DESIGN.md#branch-merge): a symlink the workspace holds on
// the way never sends a merge's read or write outside the workspace.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/journal"
)

// ErrSymlinkOnPath is wrapped by the errors of ApplyStep and the plan's
// reads of a workspace path one of whose directories is a symlink.
var ErrSymlinkOnPath = errors.New("a directory on its path is a symlink in the workspace")

// ErrBranchChanged is wrapped by the errors of ApplyStep and of the plan's
// reads of the branch's side when that side is no longer the regular file
// the plan found (a symlink, fifo, device or directory now, or a symlink on
// its way, or another owner or mode): the branch changed since the plan,
// and nothing of it is read (docs/DESIGN.md#branch-merge).
var ErrBranchChanged = errors.New("changed in the branch since the plan read it (not followed)")

// openParent opens the directory holding rel under root without following
// a symlink on the way (journal.OpenParent); ELOOP becomes
// ErrSymlinkOnPath. absent reports a directory on the way missing or not
// a directory (the path is then absent); fd is -1 then.
func openParent(root, rel string) (fd int, leaf string, absent bool, err error) {
	fd, leaf, err = journal.OpenParent(root, rel)
	switch {
	case err == nil:
		return fd, leaf, false, nil
	case errors.Is(err, unix.ELOOP) || (errors.Is(err, unix.ENOTDIR) && symlinkOnPath(root, rel)):
		// O_NOFOLLOW|O_DIRECTORY on a symlink fails ENOTDIR, not ELOOP.
		return -1, "", false, fmt.Errorf("%s: %w", rel, ErrSymlinkOnPath)
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return -1, "", true, nil
	}
	return -1, "", false, err
}

// symlinkOnPath reports whether a directory on the way to rel under root
// is a symlink: the first of its prefixes that is no directory is one.
func symlinkOnPath(root, rel string) bool {
	p := root
	for _, c := range strings.Split(path.Dir(rel), "/") {
		p = filepath.Join(p, c)
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return false
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return true
		case unix.S_IFDIR:
			continue
		}
		return false
	}
	return false
}

// wsStateOf reads the workspace's side of rel under root as stateOf does,
// never following a symlink (on the way: ErrSymlinkOnPath).
func wsStateOf(root, rel string) (side, error) {
	fd, leaf, absent, err := openParent(root, rel)
	if absent {
		return side{kind: journal.KindAbsent}, nil
	}
	if err != nil {
		return side{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return side{kind: journal.KindAbsent}, nil
		}
		return side{}, err
	}
	s := side{perm: permOf(st.Mode), uid: int(st.Uid), gid: int(st.Gid)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		s.kind = journal.KindFile
		s.hash, err = journal.HashFile(fd, leaf)
	case unix.S_IFDIR:
		s.kind = journal.KindDir
	case unix.S_IFLNK:
		s.kind = journal.KindSymlink
		buf := make([]byte, 4096)
		var n int
		if n, err = unix.Readlinkat(fd, leaf, buf); err == nil {
			s.target = string(buf[:n])
		}
	default:
		s.kind = "other"
	}
	return s, err
}

// readWorkspaceFile reads the regular file rel under root (no symlink
// followed), for a 3-way merge; it returns its bytes and their hash.
func readWorkspaceFile(root, rel string) ([]byte, string, error) {
	fd, leaf, absent, err := openParent(root, rel)
	if absent {
		return nil, "", fs.ErrNotExist
	}
	if err != nil {
		return nil, "", err
	}
	defer unix.Close(fd)
	f, err := openRegularAt(fd, leaf, rel, nil)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxMerge3Way+1))
	if err != nil {
		return nil, "", err
	}
	sum := xxh3.Hash128(b).Bytes()
	return b, hex.EncodeToString(sum[:]), nil
}

// openRegularAt opens leaf in dirfd for reading, never following a
// symlink and never blocking on a fifo, and returns it only if it is a
// regular file (and, with want, of want's owner and permission bits);
// otherwise an error wrapping ErrBranchChanged.
func openRegularAt(dirfd int, leaf, rel string, want *MergeStep) (*os.File, error) {
	fd, err := unix.Openat(dirfd, leaf, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == unix.ELOOP {
		return nil, fmt.Errorf("%s: a symlink now: %w", rel, ErrBranchChanged)
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || (want != nil && (int(st.Uid) != want.Uid || int(st.Gid) != want.Gid || permOf(st.Mode) != want.Perm)) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", rel, ErrBranchChanged)
	}
	// A regular file: reads never block, so no poller (os.NewFile would
	// register a non-blocking descriptor with it).
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), leaf), nil
}

// upperRoot is the branch's upper directory of step st: st.Src less
// st.Path.
func upperRoot(st MergeStep) string {
	return strings.TrimSuffix(st.Src, string(filepath.Separator)+filepath.FromSlash(st.Path))
}

// openBranchFile opens the branch's file of step st (upper/st.Path)
// through its parent opened without following a symlink, and only if it
// still is the regular file the plan found, of its owner and mode
// (openRegularAt): an agent in the branch swapping it for a symlink or a
// fifo after the plan gets ErrBranchChanged, never its target read by the
// merge (root) nor a merge that hangs.
func openBranchFile(st MergeStep) (*os.File, error) {
	fd, leaf, err := journal.OpenParent(upperRoot(st), st.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%v)", st.Path, ErrBranchChanged, err)
	}
	defer unix.Close(fd)
	return openRegularAt(fd, leaf, st.Path, &st)
}

// readBranchLink reads the target of the branch's symlink of step st,
// never following a symlink on its way.
func readBranchLink(st MergeStep) (string, error) {
	fd, leaf, err := journal.OpenParent(upperRoot(st), st.Path)
	if err != nil {
		return "", fmt.Errorf("%s: %w (%v)", st.Path, ErrBranchChanged, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(fd, leaf, buf)
	if err == unix.EINVAL {
		return "", fmt.Errorf("%s: not a symlink now: %w", st.Path, ErrBranchChanged)
	}
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// ApplyStep makes step st's change at st.Path under root (the workspace's
// mountpoint), on the descriptor of its parent directory opened without
// following a symlink (ErrSymlinkOnPath otherwise), so a write never lands
// outside the workspace. When st.Declare is set it first calls
// declare(abs, st.Declare), abs being the path under root: the merging
// session's declaration of the base, which makes the guard refuse the
// change if the path no longer holds it. Files are written in place
// (O_TRUNC, then the bytes: inode, owner and links stay); a created path
// gets st.Perm and, with chown, st.Uid and st.Gid. The error is the first
// failing call's (EACCES or EPERM: the guard refused), the file left as
// the refusal found it.
func ApplyStep(root string, st MergeStep, chown bool, declare func(abs, hash string) error) error {
	if st.Declare != "" {
		if err := declare(filepath.Join(root, filepath.FromSlash(st.Path)), st.Declare); err != nil {
			return fmt.Errorf("declaring its base: %w", err)
		}
	}
	fd, leaf, absent, err := openParent(root, st.Path)
	if absent {
		return fmt.Errorf("%s: its directory is gone from the workspace: %w", st.Path, fs.ErrNotExist)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	switch st.Action {
	case MergeCreate:
		return createAt(fd, leaf, st, chown)
	case MergeReplace:
		if st.Retype || st.Kind == journal.KindSymlink {
			if err := linkStillAt(fd, leaf, st); err != nil {
				return err
			}
			if err := unix.Unlinkat(fd, leaf, 0); err != nil {
				return err
			}
			return createAt(fd, leaf, st, chown)
		}
		src, err := openBranchFile(st)
		if err != nil {
			return err
		}
		defer src.Close()
		return writeAt(fd, leaf, unix.O_TRUNC, src, st.Perm)
	case Merge3Way:
		return writeAt(fd, leaf, unix.O_TRUNC, bytes.NewReader(st.Merged), st.Perm)
	case MergeChmod:
		pfd, err := unix.Openat(fd, leaf, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(pfd)
		// fchmod(2) refuses an O_PATH descriptor; its /proc link does not.
		return unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", pfd), unixPerm(st.Perm))
	case MergeRemove:
		if err := linkStillAt(fd, leaf, st); err != nil {
			return err
		}
		return unix.Unlinkat(fd, leaf, 0)
	case MergeRmdir:
		return unix.Unlinkat(fd, leaf, unix.AT_REMOVEDIR)
	}
	return fmt.Errorf("%s: nothing to apply for %q", st.Path, st.Action)
}

// ErrWorkspaceChanged is wrapped by ApplyStep's error when the
// workspace's symlink it would unlink no longer points where the plan
// found it (the guard hashes files, not symlinks).
var ErrWorkspaceChanged = errors.New("changed in the workspace since the plan read it")

// linkStillAt checks, for a step unlinking a symlink (st.WasLink set),
// that leaf in dirfd still is that symlink to that target; a regular file
// there is left to the guard (st.Declare). What changes between this
// check and the unlink (microseconds) is not seen.
func linkStillAt(dirfd int, leaf string, st MergeStep) error {
	if st.WasLink == "" {
		return nil
	}
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, leaf, buf)
	if err == nil && string(buf[:n]) == st.WasLink {
		return nil
	}
	return fmt.Errorf("%s: the symlink: %w", st.Path, ErrWorkspaceChanged)
}

// createAt makes at leaf in dirfd, which must not exist, the branch's
// directory, symlink (its target) or file (its bytes), with st.Perm and,
// when chown, st's owner.
func createAt(dirfd int, leaf string, st MergeStep, chown bool) error {
	var err error
	switch st.Kind {
	case journal.KindDir:
		if err = unix.Mkdirat(dirfd, leaf, 0o700); err == nil {
			err = unix.Fchmodat(dirfd, leaf, unixPerm(st.Perm), 0)
		}
	case journal.KindSymlink:
		var target string
		if target, err = readBranchLink(st); err == nil {
			err = unix.Symlinkat(target, dirfd, leaf)
		}
	default:
		var src *os.File
		if src, err = openBranchFile(st); err != nil {
			return err
		}
		defer src.Close()
		err = writeAt(dirfd, leaf, unix.O_CREAT|unix.O_EXCL, src, st.Perm)
	}
	if err == nil && chown {
		err = unix.Fchownat(dirfd, leaf, st.Uid, st.Gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	return err
}

// writeAt opens leaf in dirfd for writing with flags (O_TRUNC, or O_CREAT|
// O_EXCL), never following a symlink, copies r into it and gives it perm;
// the close's error (the flush) counts.
func writeAt(dirfd int, leaf string, flags int, r io.Reader, perm fs.FileMode) error {
	fd, err := unix.Openat(dirfd, leaf, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), leaf)
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// permOf is the fs.FileMode permission bits (with setuid, setgid, sticky)
// of a st_mode.
func permOf(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	if mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// unixPerm is permOf's inverse.
func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m & fs.ModePerm)
	if m&fs.ModeSetuid != 0 {
		p |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		p |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		p |= unix.S_ISVTX
	}
	return p
}
