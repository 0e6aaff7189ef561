package journal

// DirInspector and DirApplier: the Inspector and Applier of a plain
// directory tree (tests, and the reference the mount's own follow).

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// DirInspector inspects the tree under Root (paths workspace-relative).
// A path under a missing or non-directory parent, or under a symlink
// (never followed), is KindAbsent.
type DirInspector struct{ Root string }

// Lstat returns path's After (no Hash), never following a symlink.
func (d DirInspector) Lstat(path string) (After, error) {
	fd, leaf, err := OpenParent(d.Root, path)
	if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
		return After{Path: path, Kind: KindAbsent}, nil
	}
	if err != nil {
		return After{}, err
	}
	defer unix.Close(fd)
	return LstatAt(fd, leaf, path)
}

// HashOf returns the 32-hex xxh3-128 of the regular file path's bytes.
func (d DirInspector) HashOf(path string) (string, error) {
	return inParent(d.Root, path, HashFile)
}

// Readlink returns the target of the symlink path (Diff uses it when the
// Inspector has it).
func (d DirInspector) Readlink(path string) (string, error) {
	return inParent(d.Root, path, readlinkAt)
}

// ReadFile returns the bytes of the regular file path (a final symlink is
// not followed: ELOOP); the cur function of Diff.
func (d DirInspector) ReadFile(path string) ([]byte, error) {
	return inParent(d.Root, path, func(fd int, leaf string) ([]byte, error) {
		ffd, err := unix.Openat(fd, leaf, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(ffd), leaf)
		defer f.Close()
		return io.ReadAll(f)
	})
}

// inParent calls fn with the parent descriptor and last name of path.
func inParent[T any](root, path string, fn func(fd int, leaf string) (T, error)) (T, error) {
	fd, leaf, err := OpenParent(root, path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer unix.Close(fd)
	return fn(fd, leaf)
}

// DirApplier applies a rewind to the tree under Root. With J set, each
// change is journaled first as a change of Session (Record with CaptureAt
// on the parent descriptor, then the change, then NoteAfter of the names
// it touched), as the mount journals its own, so the rewind can itself be
// rewound; a restore that would change nothing (UpToDateAt) is skipped.
// Not safe against concurrent changes of the same names.
type DirApplier struct {
	Root    string
	J       *Journal
	Session string
}

// Restore makes path what pre says (RestoreAt); a KindAbsent restore of a
// path whose parent is missing is done already.
func (d DirApplier) Restore(path string, pre PreImage, blobs *Blobs) error {
	fd, leaf, err := OpenParent(d.Root, path)
	if pre.Kind == KindAbsent && (err == unix.ENOENT || err == unix.ENOTDIR) {
		return nil // no parent: already absent
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if ok, err := UpToDateAt(fd, leaf, pre); err != nil || ok {
		return err
	}
	if d.J != nil {
		cur, err := LstatAt(fd, leaf, path)
		if err != nil {
			return err
		}
		rec, err := d.J.Record(d.Session, restoreOp(cur.Kind, pre.Kind), path, "", d.capture(fd, leaf))
		if err != nil {
			return err
		}
		defer d.note(rec.Seq, fd, leaf, path)
	}
	return RestoreAt(fd, leaf, pre, blobs)
}

// restoreOp is the op a restore from state cur to kind want journals as.
func restoreOp(cur, want string) string {
	switch {
	case want == KindAbsent && cur == KindDir:
		return "rmdir"
	case want == KindAbsent:
		return "unlink"
	case want == KindDir && cur == KindDir:
		return "chmod"
	case want == KindDir:
		return "mkdir"
	case want == KindSymlink:
		return "symlink"
	case cur == KindFile:
		return "write"
	}
	return "create"
}

func (d DirApplier) capture(fd int, leaf string) Capture {
	return func(string) (PreImage, error) { return CaptureAt(d.J.Blobs(), fd, leaf) }
}

func (d DirApplier) note(seq uint64, fd int, leaf, path string) {
	if a, err := LstatAt(fd, leaf, path); err == nil {
		d.J.NoteAfter(d.Session, seq, []After{a})
	}
}

// Rename renames from to to, replacing to (RenameReplacingAt).
func (d DirApplier) Rename(from, to string) error {
	return d.two("rename", from, to, 0)
}

// Exchange swaps a and b (renameat2 RENAME_EXCHANGE).
func (d DirApplier) Exchange(a, b string) error {
	return d.two("exchange", a, b, unix.RENAME_EXCHANGE)
}

func (d DirApplier) two(op, a, b string, flags uint) error {
	fa, la, err := OpenParent(d.Root, a)
	if err != nil {
		return err
	}
	defer unix.Close(fa)
	fb, lb, err := OpenParent(d.Root, b)
	if err != nil {
		return err
	}
	defer unix.Close(fb)
	if d.J != nil {
		capture := func(p string) (PreImage, error) {
			if p == a {
				return CaptureAt(d.J.Blobs(), fa, la)
			}
			return CaptureAt(d.J.Blobs(), fb, lb)
		}
		rec, err := d.J.Record(d.Session, op, a, b, capture)
		if err != nil {
			return err
		}
		defer func() {
			x, e1 := LstatAt(fa, la, a)
			y, e2 := LstatAt(fb, lb, b)
			if e1 == nil && e2 == nil {
				d.J.NoteAfter(d.Session, rec.Seq, []After{x, y})
			}
		}()
	}
	if flags != 0 {
		return unix.Renameat2(fa, la, fb, lb, flags)
	}
	return RenameReplacingAt(fa, la, fb, lb)
}
