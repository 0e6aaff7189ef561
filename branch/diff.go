package branch

// What a branch changed: its overlayfs upper directory read against the
// workspace it lies over, and that read rendered as git diff renders it
// (docs/DESIGN.md#branch-diff).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/journal"
	"golang.org/x/sys/unix"
)

// Status is how a path differs between the workspace and the branch, as
// the letters of `git diff --name-status`.
type Status byte

// The statuses of a Change.
const (
	Added       Status = 'A' // in the branch only
	Modified    Status = 'M' // both, same type; content (bytes, target, device) or permission bits differ
	Deleted     Status = 'D' // in the workspace only
	TypeChanged Status = 'T' // both, of different types (file, symlink, directory, ...)
)

// Change is one path the branch changed. Path is slash-separated,
// relative to the workspace root, never empty. Old and New are the
// lstat type and permission bits (fs.FileMode, with setuid, setgid and
// sticky) of the workspace's (lower) and the branch's (upper) side, 0 on
// the side where the path is absent. Directories are changes too (added,
// deleted, their permission bits modified, replaced by a file): git diff
// shows none of them, WriteDiff neither.
type Change struct {
	Path     string
	Status   Status
	Old, New fs.FileMode
}

// The overlayfs xattrs read in the upper directory (kernel
// Documentation/filesystems/overlayfs.rst). A mount with userxattr
// (user.overlay.*) is not read.
const (
	xattrOpaque   = "trusted.overlay.opaque"
	xattrWhiteout = "trusted.overlay.whiteout"
	xattrRedirect = "trusted.overlay.redirect"
	xattrMetacopy = "trusted.overlay.metacopy"
)

// modeBits are the bits of an fs.FileMode compared for Modified.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ErrUnsupported is wrapped by Changes' error for an upper directory
// using an overlayfs feature it cannot read: a redirected directory
// (redirect_dir) or a metadata-only copy-up (metacopy). The branch mount
// turns neither on (docs/DESIGN.md#branch-diff).
var ErrUnsupported = errors.New("overlayfs feature not supported (redirect_dir, metacopy)")

// Changes lists what the overlayfs upper directory upper changes in the
// lower layers it lies over (absolute paths, the top one first: a
// branch's base layer then the workspace, or the workspace alone; at
// least one), sorted by Path (byte order, as git sorts paths), one Change
// a path, following docs/DESIGN.md#branch-diff. The lower layers are read
// as the kernel merges them (a whiteout or an opaque directory in a layer
// above the last hides what is below it); below, "lower" means that
// merged tree:
//   - a file, symlink or directory in upper absent from lower is Added
//     (with everything below it);
//   - a whiteout (character device 0/0, or an empty file with
//     trusted.overlay.whiteout) over a lower path is Deleted, with each
//     path below it;
//   - below a directory with trusted.overlay.opaque "y", or one that
//     replaced a lower non-directory, every lower path absent from upper is
//     Deleted;
//   - a path in both is Modified when its permission bits or its content
//     (bytes, compared streaming; symlink target; device number) differ,
//     TypeChanged when its type does (the lower subtree of a directory
//     replaced by a file is Deleted), and no change when only the copy-up
//     happened (a chmod back, an open for writing, a touch).
//
// Owner, group, times and xattrs are not compared. Memory is bounded by
// one directory's listing and two 32 KiB buffers, plus the result. The
// error is the first failing system call's (an *fs.PathError), or wraps
// ErrUnsupported. Reads the directories as the caller's credentials allow
// (docs/DESIGN.md#trust); the trees must not change meanwhile (unmount
// the branch first, or accept a torn read). Safe for concurrent use.
func Changes(upper string, lowers ...string) ([]Change, error) {
	if len(lowers) == 0 {
		return nil, &fs.PathError{Op: "branch diff", Path: upper, Err: syscall.EINVAL}
	}
	fi, err := os.Lstat(upper)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "branch diff", Path: upper, Err: syscall.ENOTDIR}
	}
	for _, lower := range lowers {
		lfi, err := os.Lstat(lower)
		if err != nil {
			return nil, err
		}
		if !lfi.IsDir() {
			return nil, &fs.PathError{Op: "branch diff", Path: lower, Err: syscall.ENOTDIR}
		}
	}
	w := newWalker(upper, lowers)
	x, err := xattrs(upper)
	if err != nil {
		return nil, err
	}
	if err := w.dir("", w.low.layers, x.opaque); err != nil {
		return nil, err
	}
	sort.Slice(w.out, func(i, j int) bool { return w.out[i].Path < w.out[j].Path })
	return w.out, nil
}

type walker struct {
	upper      string
	low        lowerView
	buf1, buf2 []byte
	out        []Change
}

func newWalker(upper string, lowers []string) *walker {
	return &walker{upper: upper, low: lowerView{layers: lowers}, buf1: make([]byte, 32<<10), buf2: make([]byte, 32<<10)}
}

func (w *walker) add(p string, st Status, old, new fs.FileMode) {
	w.out = append(w.out, Change{Path: p, Status: st, Old: old, New: new})
}

// overlayAttrs is what an upper entry's xattrs say.
type overlayAttrs struct {
	opaque, whiteout bool
}

// xattrs reads the overlay xattrs of the upper entry at abs.
func xattrs(abs string) (overlayAttrs, error) {
	var a overlayAttrs
	buf := make([]byte, 1024)
	n, err := unix.Llistxattr(abs, buf)
	if err == unix.ERANGE {
		if n, err = unix.Llistxattr(abs, nil); err == nil {
			buf = make([]byte, n)
			n, err = unix.Llistxattr(abs, buf)
		}
	}
	if err == unix.ENOTSUP {
		return a, nil
	}
	if err != nil {
		return a, &fs.PathError{Op: "listxattr", Path: abs, Err: err}
	}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		switch name {
		case xattrRedirect, xattrMetacopy:
			return a, fmt.Errorf("%s has %s: %w", abs, name, ErrUnsupported)
		case xattrWhiteout:
			a.whiteout = true
		case xattrOpaque:
			v := make([]byte, 8)
			m, err := unix.Lgetxattr(abs, xattrOpaque, v)
			if err != nil {
				return a, &fs.PathError{Op: "getxattr", Path: abs, Err: err}
			}
			a.opaque = string(v[:m]) == "y" // "x": holds xattr whiteouts, not opaque
		}
	}
	return a, nil
}

func isWhiteout(fi fs.FileInfo, a overlayAttrs) bool {
	if fi.Mode()&fs.ModeCharDevice != 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Rdev == 0 {
			return true
		}
	}
	return fi.Mode().IsRegular() && fi.Size() == 0 && a.whiteout
}

// dir classifies the upper entries of directory rel ("" = the root).
// lower: the lower layers rel is a merged directory of (nil: rel is no
// directory below, so nothing there is the "before" state). replace: the
// branch's rel replaced lower's entirely (an opaque directory or one
// below it), so lower entries absent from upper are deleted.
func (w *walker) dir(rel string, lower []string, replace bool) error {
	ents, err := os.ReadDir(filepath.Join(w.upper, rel))
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := path.Join(rel, e.Name())
		uabs := filepath.Join(w.upper, p)
		ufi, err := os.Lstat(uabs)
		if err != nil {
			return err
		}
		var ua overlayAttrs
		if ufi.IsDir() || ufi.Mode().IsRegular() {
			if ua, err = xattrs(uabs); err != nil {
				return err
			}
		}
		var lo lowerEntry
		if lower != nil {
			if lo.fi, lo.abs, lo.sub, err = w.low.child(lower, p); err != nil {
				return err
			}
		}
		if err := w.entry(p, ufi, ua, lo, replace); err != nil {
			return err
		}
	}
	if !replace || lower == nil {
		return nil
	}
	// Lower entries the replacing directory does not hold are gone.
	lnames, err := w.low.names(lower, rel)
	if err != nil {
		return err
	}
	i := 0
	for _, name := range lnames {
		for i < len(ents) && ents[i].Name() < name {
			i++
		}
		if i < len(ents) && ents[i].Name() == name {
			continue
		}
		p := path.Join(rel, name)
		var lo lowerEntry
		if lo.fi, lo.abs, lo.sub, err = w.low.child(lower, p); err != nil {
			return err
		}
		if err := w.deleted(p, lo, true); err != nil {
			return err
		}
	}
	return nil
}

// lowerEntry is a path's entry in the merged lower layers (lowerView.child):
// fi nil when absent.
type lowerEntry struct {
	fi  fs.FileInfo
	abs string
	sub []string
}

// entry classifies path p: ufi is its upper entry (with attrs ua), lo
// its lower one.
func (w *walker) entry(p string, ufi fs.FileInfo, ua overlayAttrs, lo lowerEntry, replace bool) error {
	um, lfi := ufi.Mode(), lo.fi
	if isWhiteout(ufi, ua) {
		if lfi == nil {
			return nil
		}
		return w.deleted(p, lo, true)
	}
	switch {
	case lfi == nil:
		w.add(p, Added, 0, um)
		if ufi.IsDir() {
			return w.dir(p, nil, true)
		}
		return nil
	case ufi.IsDir() && lfi.IsDir():
		if um&modeBits != lfi.Mode()&modeBits {
			w.add(p, Modified, lfi.Mode(), um)
		}
		return w.dir(p, lo.sub, replace || ua.opaque)
	case ufi.IsDir():
		w.add(p, TypeChanged, lfi.Mode(), um)
		return w.dir(p, nil, true)
	case lfi.IsDir():
		w.add(p, TypeChanged, lfi.Mode(), um)
		return w.deleted(p, lo, false)
	case um.Type() != lfi.Mode().Type():
		w.add(p, TypeChanged, lfi.Mode(), um)
		return nil
	}
	same, err := w.sameContent(filepath.Join(w.upper, p), lo.abs, ufi, lfi)
	if err != nil {
		return err
	}
	if !same || um&modeBits != lfi.Mode()&modeBits {
		w.add(p, Modified, lfi.Mode(), um)
	}
	return nil
}

// deleted records lower path p (self: p too, else only what is below
// it) and everything below it as Deleted, walking the lower layers one
// directory at a time.
func (w *walker) deleted(p string, lo lowerEntry, self bool) error {
	if lo.fi == nil {
		return nil
	}
	if self {
		w.add(p, Deleted, lo.fi.Mode(), 0)
	}
	if !lo.fi.IsDir() {
		return nil
	}
	names, err := w.low.names(lo.sub, p)
	if err != nil {
		return err
	}
	for _, name := range names {
		c := path.Join(p, name)
		var ce lowerEntry
		if ce.fi, ce.abs, ce.sub, err = w.low.child(lo.sub, c); err != nil {
			return err
		}
		if err := w.deleted(c, ce, true); err != nil {
			return err
		}
	}
	return nil
}

// sameContent reports whether the upper entry uabs and the lower one
// labs, of one non-directory type, hold the same content.
func (w *walker) sameContent(uabs, labs string, ufi, lfi fs.FileInfo) (bool, error) {
	switch m := ufi.Mode(); {
	case m.IsRegular():
		if ufi.Size() != lfi.Size() {
			return false, nil
		}
		return w.sameBytes(uabs, labs, strings.TrimPrefix(uabs, w.upper+string(filepath.Separator)))
	case m&fs.ModeSymlink != 0:
		a, err := os.Readlink(uabs)
		if err != nil {
			return false, err
		}
		b, err := os.Readlink(labs)
		return a == b, err
	case m&fs.ModeDevice != 0:
		us, ok1 := ufi.Sys().(*syscall.Stat_t)
		ls, ok2 := lfi.Sys().(*syscall.Stat_t)
		return ok1 && ok2 && us.Rdev == ls.Rdev, nil
	}
	return true, nil // fifo, socket: no content
}

// sameBytes compares the files a and b, the path rel of two layers
// (openSide).
func (w *walker) sameBytes(a, b, rel string) (bool, error) {
	fa, err := openSide(a, rel)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := openSide(b, rel)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	for {
		na, ea := io.ReadFull(fa, w.buf1)
		nb, eb := io.ReadFull(fb, w.buf2)
		if !bytes.Equal(w.buf1[:na], w.buf2[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == io.EOF || eb == io.ErrUnexpectedEOF, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil && eb != io.EOF && eb != io.ErrUnexpectedEOF {
			return false, eb
		}
	}
}

// openSide opens the regular file abs, the path rel of a layer, through
// its parent opened without following a symlink, with O_NOFOLLOW and
// without waiting on a fifo: an agent in the branch (or a session of the
// workspace) swapping the file for a symlink (to a file only root may
// read), a fifo or a directory symlink after Changes saw it gets an
// error, never that file shown nor a diff that hangs.
func openSide(abs, rel string) (*os.File, error) {
	rel = filepath.ToSlash(rel)
	root := strings.TrimSuffix(abs, string(filepath.Separator)+filepath.FromSlash(rel))
	fd, leaf, err := journal.OpenParent(root, rel)
	if err == nil {
		defer unix.Close(fd)
		var f *os.File
		if f, err = openRegularAt(fd, leaf, rel, nil); err == nil {
			return f, nil
		}
	}
	if errors.Is(err, ErrBranchChanged) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("%s: changed while it was read (no regular file there now): %w", rel, ErrChangedWhileRead)
	}
	return nil, err
}

// ErrChangedWhileRead is wrapped by the errors of WriteDiff and Changes
// for a file that is a symlink, fifo or other non-file by the time its
// bytes are read (openSide): not followed, not read.
var ErrChangedWhileRead = errors.New("not followed")

// binaryProbe is how many leading bytes WriteDiff searches for a NUL to
// call a file binary, and bigFile the size from which a file is binary
// unread (git's rule and its core.bigFileThreshold default).
const (
	binaryProbe = 8000
	bigFile     = 512 << 20
)

// WriteDiff writes to w the unified diff, as `git diff` prints it, of
// the changes (as Changes returned them, in their order) between the
// workspace directory lower and the branch's upper directory upper,
// limited to paths (workspace-relative, slash-separated, each with what
// is below it; nil, "" or ".": all). Per file or symlink:
// "diff --git a/P b/P", "new file mode M" / "deleted file mode M" /
// "old mode M" + "new mode M" (git's modes: 100644, 100755, 120000),
// "--- a/P", "+++ b/P" and hunks with 3 lines of context (a symlink's
// content is its target), or "Binary files a/P and b/P differ" when a
// side has a NUL in its first 8000 bytes or is 512 MiB or more. A type
// change is a deletion then an addition, as git shows it. Directories,
// devices, fifos and sockets are not shown, nor a change git's modes do
// not see (permission bits other than the owner's x). A text file is
// held in memory whole while its hunks are computed (by
// github.com/pmezard/go-difflib through journal.WriteFileDiff). The error
// is w's or the first failing system call's. Safe for concurrent use.
func WriteDiff(w io.Writer, upper, lower string, changes []Change, paths []string) error {
	return WriteDiffLayers(w, upper, []string{lower}, changes, paths)
}

// WriteDiffLayers is WriteDiff over several lower layers, the top one
// first, read as Changes reads them (a branch's base layer over the
// workspace: docs/DESIGN.md#branch-from).
func WriteDiffLayers(w io.Writer, upper string, lowers []string, changes []Change, paths []string) error {
	cmp := newWalker(upper, lowers)
	for _, c := range changes {
		if !selected(c.Path, paths) {
			continue
		}
		oldShown, newShown := diffable(c.Old), diffable(c.New)
		if !oldShown && !newShown {
			continue
		}
		var a, b journal.FileSide
		var err error
		lower := "" // c.Path in the lower layers
		if oldShown {
			var lfi fs.FileInfo
			if lfi, lower, err = cmp.low.lookup(c.Path); err == nil && lfi == nil {
				err = &fs.PathError{Op: "branch diff", Path: c.Path, Err: fs.ErrNotExist}
			}
			if err != nil {
				return err
			}
			if a, err = loadSide(lower, c.Path, c.Old); err != nil {
				return err
			}
		}
		if newShown {
			if b, err = loadSide(filepath.Join(upper, c.Path), c.Path, c.New); err != nil {
				return err
			}
		}
		if a.Exists && b.Exists && a.Mode>>12 != b.Mode>>12 { // type change: git's two entries
			if err := journal.WriteFileDiff(w, c.Path, a, journal.FileSide{}); err != nil {
				return err
			}
			a = journal.FileSide{}
		} else if a.Exists && b.Exists && (a.Binary || b.Binary) {
			// Equal bytes: only the mode lines (two Binary sides always differ).
			same, err := cmp.sameBytes(filepath.Join(upper, c.Path), lower, c.Path)
			if err != nil {
				return err
			}
			if same {
				a = journal.FileSide{Exists: true, Mode: a.Mode}
				b = journal.FileSide{Exists: true, Mode: b.Mode}
			}
		}
		if err := journal.WriteFileDiff(w, c.Path, a, b); err != nil {
			return err
		}
	}
	return nil
}

// selected reports whether workspace path p is one of paths or below one
// of them; nil paths, "" and "." select every path.
func selected(p string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, q := range paths {
		q = strings.TrimSuffix(q, "/")
		if q == "" || q == "." || p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// diffable: a regular file or a symlink, what git diffs.
func diffable(m fs.FileMode) bool {
	return m != 0 && (m.IsRegular() || m&fs.ModeSymlink != 0)
}

// gitMode is git's canonical mode of m: 120000 for a symlink, 100755 for
// a file its owner may execute, else 100644.
func gitMode(m fs.FileMode) uint32 {
	switch {
	case m&fs.ModeSymlink != 0:
		return 0o120000
	case m&0o100 != 0:
		return 0o100755
	}
	return 0o100644
}

// loadSide reads abs, the path rel of a layer (of mode m: a file or a
// symlink), as a diff side; a file is opened by openSide.
func loadSide(abs, rel string, m fs.FileMode) (journal.FileSide, error) {
	s := journal.FileSide{Exists: true, Mode: gitMode(m)}
	if m&fs.ModeSymlink != 0 {
		t, err := os.Readlink(abs)
		s.Content = []byte(t)
		return s, err
	}
	f, err := openSide(abs, rel)
	if err != nil {
		return s, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return s, err
	}
	if fi.Size() >= bigFile {
		s.Binary = true
		return s, nil
	}
	head := make([]byte, binaryProbe)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return s, err
	}
	if bytes.IndexByte(head[:n], 0) >= 0 {
		s.Binary = true
		return s, nil
	}
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()))
	buf.Write(head[:n])
	if _, err := buf.ReadFrom(f); err != nil {
		return s, err
	}
	s.Content = buf.Bytes()
	return s, nil
}

// WriteNameStatus writes the changes (in their order) limited to paths
// (as WriteDiff) to w as `git diff --name-status` does: one line a file
// or symlink, its letter, a tab and its path. A directory's own change
// is not listed; one replaced by a file lists the file as A (its old
// content as D lines), a file replaced by a directory as D. Unlike
// WriteDiff it lists a change of permission bits git's modes do not see,
// and devices, fifos and sockets. The error is w's.
func WriteNameStatus(w io.Writer, changes []Change, paths []string) error {
	for _, c := range changes {
		if !selected(c.Path, paths) {
			continue
		}
		st := c.Status
		switch oldDir, newDir := c.Old.IsDir(), c.New.IsDir(); {
		case (c.Old == 0 || oldDir) && (c.New == 0 || newDir):
			continue
		case oldDir:
			st = Added
		case newDir:
			st = Deleted
		}
		if _, err := fmt.Fprintf(w, "%c\t%s\n", st, journal.GitQuote(c.Path)); err != nil {
			return err
		}
	}
	return nil
}
