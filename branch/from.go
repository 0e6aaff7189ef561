package branch

// A branch made from a checkpoint: its base layer, the paths a session
// changed since the checkpoint as they were at it, built by replaying the
// session's rewind plan into an overlay over the workspace
// (docs/DESIGN.md#branch-from).

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/journal"
)

// From is the branch point of a branch made from checkpoint Meta.From of
// session Meta.Session: Plan is the session's rewind plan to it against
// the workspace now (the daemon's `rewind --to CP --dry-run --force`:
// every step, conflicts included), Blobs the journal's blob store its
// pre-images name (journal.BlobsAt).
type From struct {
	Plan  journal.Plan
	Blobs *journal.Blobs
}

// ErrUnrecoverable is wrapped by CreateFrom's error when a pre-image the
// branch point needs has no bytes (too large for the journal, over its
// budget, or its blob lost); the error names the paths.
var ErrUnrecoverable = errors.New("unrecoverable pre-image")

// baseOpts are the options of the overlay the base layer is built
// through: no redirect (a renamed directory is copied instead), no
// metadata-only copy-up and no index, so the base holds only what Changes
// and the kernel read in a lower layer. volatile (Linux 5.10) skips the
// sync of the state directory's whole filesystem at the unmount (12-160
// ms measured on a busy machine, 1.5 ms without): a branch does not
// outlive a reboot, so its base need not either. A kernel without it
// mounts without.
const (
	baseOpts     = "redirect_dir=off,metacopy=off,index=off"
	baseVolatile = ",volatile"
)

// CreateFrom is Create for a branch that starts at a checkpoint
// (m.From, m.Session set): before the branch's overlay is mounted it
// builds BaseLayer, the paths from.Plan changes as they were at the
// checkpoint, by applying the plan's steps (restore a pre-image, remove,
// rename or exchange back) through a temporary overlay of lower with BaseLayer
// as its upper directory; the branch's overlay then has BaseLayer over lower
// as its lower layers (lowerdir=BASE:LOWER). A renamed directory is
// copied (the temporary overlay has no redirects), so its cost is its
// subtree's; every other step costs its path's pre-image. Owners and
// groups are restored when the pre-image has them (a pre-image is read
// with the caller's credentials). A plan with Unrecoverable pre-images
// fails with ErrUnrecoverable naming them, and a failing step fails with
// the step and its path: nothing is left behind either way. Needs
// CAP_SYS_ADMIN. Errors as Create's.
func CreateFrom(stateDir string, m Meta, lower string, from From) (*Branch, error) {
	if m.From == "" {
		return nil, errors.New("branch: CreateFrom without a checkpoint")
	}
	if n := len(from.Plan.Unrecoverable); n > 0 {
		var ps []string
		for _, u := range from.Plan.Unrecoverable {
			ps = append(ps, fmt.Sprintf("%s (%s)", u.Path, u.Unrecoverable))
		}
		return nil, fmt.Errorf("%w: the journal kept no bytes of %d path(s) as they were at %s: %s",
			ErrUnrecoverable, n, m.From, strings.Join(ps, ", "))
	}
	return create(stateDir, m, lower, func(b *Branch) error { return b.buildBase(lower, from) })
}

// buildBase makes BaseLayer from lower and from.Plan (CreateFrom).
func (b *Branch) buildBase(lower string, from From) (err error) {
	tmp := filepath.Join(b.Dir, "base.tmp")
	work, mnt := filepath.Join(tmp, "work"), filepath.Join(tmp, "mnt")
	for _, d := range []string{b.BaseLayer(), tmp, work, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", lower, b.BaseLayer(), work, baseOpts)
	err = unix.Mount("overlay", mnt, "overlay", 0, opts+baseVolatile)
	if err == unix.EINVAL {
		err = unix.Mount("overlay", mnt, "overlay", 0, opts)
	}
	if err != nil {
		return fmt.Errorf("mounting the overlay that builds the base layer at %s: %w", mnt, err)
	}
	defer func() {
		if uerr := unix.Unmount(mnt, 0); uerr != nil {
			unix.Unmount(mnt, unix.MNT_DETACH)
			if err == nil {
				err = fmt.Errorf("unmounting %s: %w", mnt, uerr)
			}
		}
		if rerr := os.RemoveAll(tmp); err == nil {
			err = rerr
		}
	}()
	a := baseApplier{root: mnt, dir: journal.DirApplier{Root: mnt}}
	for _, s := range from.Plan.Steps {
		var err error
		switch s.Kind {
		case journal.StepRename:
			err = a.move(s.From, s.Path)
		case journal.StepExchange:
			err = a.exchange(s.Path, s.From)
		default:
			err = a.restore(s.Path, s.Pre, from.Blobs)
		}
		if err != nil {
			return fmt.Errorf("building the branch point: %s %s: %w", s.Kind, s.Path, err)
		}
	}
	return nil
}

// baseApplier applies a rewind plan's steps to the tree at root (the
// temporary overlay), unjournaled: journal.DirApplier's restores with the
// owner given back, and renames that copy a directory the overlay cannot
// rename (EXDEV).
type baseApplier struct {
	root string
	dir  journal.DirApplier
}

// restore makes path what pre says (journal.RestoreAt), then gives it
// pre's owner and group when pre has them, and its permission bits again
// (a chown clears setuid and setgid).
func (a baseApplier) restore(path string, pre journal.PreImage, blobs *journal.Blobs) error {
	if err := a.dir.Restore(path, pre, blobs); err != nil {
		return err
	}
	if pre.Kind == journal.KindAbsent || pre.Uid == nil || pre.Gid == nil {
		return nil
	}
	abs := filepath.Join(a.root, path)
	if err := os.Lchown(abs, int(*pre.Uid), int(*pre.Gid)); err != nil {
		return err
	}
	if pre.Kind == journal.KindSymlink {
		return nil
	}
	return unix.Chmod(abs, pre.Mode&0o7777) // permission bits with setuid, setgid, sticky
}

// move renames from to to, replacing to (journal.RenameReplacingAt); a
// directory the overlay will not rename (EXDEV: it comes from the lower
// layer and redirects are off) is copied to to and removed from from.
func (a baseApplier) move(from, to string) error {
	err := a.dir.Rename(from, to)
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	src, dst := filepath.Join(a.root, from), filepath.Join(a.root, to)
	if _, err := os.Lstat(dst); err == nil {
		if err := os.Remove(dst); err != nil { // an empty directory or a non-directory is replaced; a full one stays
			return err
		}
	}
	if err := copyTree(src, dst); err != nil {
		return err
	}
	return os.RemoveAll(src)
}

// exchange swaps a and b, through a third name when the overlay will not
// exchange them (EXDEV).
func (a baseApplier) exchange(x, y string) error {
	err := a.dir.Exchange(x, y)
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	tmp := filepath.Join(filepath.Dir(x), fmt.Sprintf(".rubino-exchange-%016x", rand.Uint64()))
	if err := a.move(x, tmp); err != nil {
		return err
	}
	if err := a.move(y, x); err != nil {
		return err
	}
	return a.move(tmp, y)
}

// copyTree copies the tree at src to dst (which must not exist): files'
// bytes, symlinks, directories, devices and fifos, with their permission
// bits, owners and groups. Hard links are copied apart. Every directory
// and file below src is opened relative to its parent's descriptor with
// O_NOFOLLOW: the workspace (the lower layer) is live while the base is
// built, and a directory another session swaps for a symlink meanwhile is
// copied as the symlink it has become, or the copy fails, never followed
// to what root could read elsewhere.
func copyTree(src, dst string) error {
	fd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer unix.Close(fd)
	return copyDirAt(fd, src, dst)
}

// copyTreeListed, when set (tests), is called with each directory's path
// once its names are read and before its entries are copied.
var copyTreeListed func(dir string)

// copyDirAt copies the directory open at fd (src names it, for errors) to
// dst, its entries each by fstatat and openat on fd, never following a
// symlink.
func copyDirAt(fd int, src, dst string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	dfd, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dfd), src)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	if copyTreeListed != nil {
		copyTreeListed(src)
	}
	for _, name := range names {
		if err := copyEntryAt(fd, name, filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return setAttrs(dst, &st)
}

// copyEntryAt copies name in the directory open at dirfd to dst.
func copyEntryAt(dirfd int, name, src, dst string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		cfd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err) // swapped since the fstatat: not followed
		}
		defer unix.Close(cfd)
		return copyDirAt(cfd, src, dst)
	case unix.S_IFLNK:
		buf := make([]byte, 4096)
		var n int
		if n, err = unix.Readlinkat(dirfd, name, buf); err == nil {
			err = os.Symlink(string(buf[:n]), dst)
		}
	case unix.S_IFREG:
		err = copyFileAt(dirfd, name, src, dst)
	default:
		err = unix.Mknod(dst, st.Mode, int(st.Rdev))
	}
	if err != nil {
		return err
	}
	return setAttrs(dst, &st)
}

// setAttrs gives dst st's owner and group, and, unless it is a symlink,
// its permission bits (with setuid, setgid, sticky).
func setAttrs(dst string, st *unix.Stat_t) error {
	if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil
	}
	return unix.Chmod(dst, st.Mode&0o7777)
}

// copyFile copies the regular file src's bytes to a new file dst. src is
// opened with O_NOFOLLOW and without waiting on a fifo, and copied only if
// it is a regular file then: the workspace (the lower layer) may change
// while the base is built, and a file swapped for a symlink to a file only
// root may read must not land in the branch's view (EINVAL otherwise).
func copyFile(src, dst string) error { return copyFileAt(unix.AT_FDCWD, src, src, dst) }

// copyFileAt is copyFile of name in the directory open at dirfd (src
// names it, for errors).
func copyFileAt(dirfd int, name, src, dst string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("%s: not a regular file now: %w", src, unix.EINVAL)
	}
	if err == nil {
		err = unix.SetNonblock(fd, false)
	}
	if err != nil {
		unix.Close(fd)
		return err
	}
	in := os.NewFile(uintptr(fd), src)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
