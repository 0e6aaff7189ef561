package ignore

// Renames and links never widen what tool trees exempt
// (docs/DESIGN.md#tool-trees, "Renames and links"): a rename keeps a
// directory's birth, so an old directory given a marker's name would be a
// marker born before the mount (one that frees everything below it, for
// everyone), and an old file moved below a marker would be freed by it.
// (A file given a file marker's name counts from its ctime, which the
// rename sets: toolMarker.find.)

import (
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// MoveFreed is what a rename or a hard link would free of the guard
// through tool trees (Tools.Moved).
type MoveFreed int

const (
	// FreesNothing: the change frees nothing the guard covers.
	FreesNothing MoveFreed = iota
	// FreesFile: the regular file would be exempt at its new name for the
	// caller's uid and is not at its old one. A rename of it is decided
	// as an overwrite of the file; a link is refused.
	FreesFile
	// FreesTree: the directory would become a marker, or move below one
	// it is not below now: the files below it that the guard covers
	// would be freed. The caller looks below it and refuses when it
	// holds any.
	FreesTree
)

// MarkerName reports whether name (one path component) is the name of a
// marker of what is a directory (dir: node_modules/) or a regular file
// (pyvenv.cfg, CACHEDIR.TAG) under t's markers. A nil Tools has none.
func (t *Tools) MarkerName(name string, dir bool) bool {
	if t == nil {
		return false
	}
	for _, m := range t.markers {
		if m.dir == dir && m.name == name {
			return true
		}
	}
	return false
}

// Enabled reports whether t recognises any marker (a nil Tools does
// not).
func (t *Tools) Enabled() bool { return t != nil && len(t.markers) > 0 }

// MayFree reports, from the names alone, whether Moved could find that a
// rename or link of what is at src (a directory when dir) to dst frees
// anything: dst lies in another directory, or a directory takes a
// directory marker's name. It reads nothing: a rename within a directory
// to an ordinary name (an editor's save, `sed -i`) costs two string
// comparisons and, for a directory, one per marker.
func (t *Tools) MayFree(src, dst string, dir bool) bool {
	if !t.Enabled() {
		return false
	}
	return path.Dir(src) != path.Dir(dst) || dir && t.MarkerName(path.Base(dst), true)
}

// Moved reports what a rename (or, for a regular file, a hard link) of
// src to dst would free for a caller of uid (workspace-relative,
// slash-separated; dir tells what src is):
//
//   - a directory given a directory marker's name: FreesTree;
//   - dst lies below markers src is not below (kept ones included) that
//     would free it (an accepted marker, or the caller's marker for a
//     file of the caller's born after it): FreesFile for a file,
//     FreesTree for a directory (any marker).
//
// What is below an accepted marker frees nothing more by moving: all
// below it is free for everyone already. A file given a file marker's
// name (pyvenv.cfg) frees nothing here: the rename or link sets its
// ctime, from which a file marker counts (toolMarker.find), so it is a
// session's marker, which frees only what is born after it. What cannot
// be read (src gone, a symbolic link in a path) frees nothing: the
// rename or link itself then fails or finds no tree, as Exempt would; the
// caller serialises the renames and links that may free anything
// (fusefs), so a concurrent one through the mount does not change the
// names read. It costs, when MayFree, one openat per directory above dst
// and one statx per file marker per directory (a marker with a prefix:
// an open and a read; with markers kept, a statx of each directory), and
// as much again above src when a marker was found. Safe for concurrent
// use.
func (t *Tools) Moved(src, dst string, dir bool, uid uint32) MoveFreed {
	if !t.MayFree(src, dst, dir) {
		return FreesNothing
	}
	// dst's side first: with no marker there (the common case) src's
	// directories are not read.
	dstDir, ok := t.dstMarkers(dst, path.Dir(src) == path.Dir(dst))
	if !ok || len(dstDir) == 0 && !(dir && t.MarkerName(path.Base(dst), true)) {
		return FreesNothing
	}
	srcDir, st, ok := t.walk(src)
	if !ok {
		return FreesNothing
	}
	return t.moved(srcDir, birthOf(&st), dstDir, dst, dir, uid)
}

// dstMarkers returns the markers of the directories above dst (kept ones
// included); none when same (dst's directory is src's: nothing above
// changes) or dst lies in the workspace root, which is never a tool tree.
// ok is false when a directory cannot be opened.
func (t *Tools) dstMarkers(dst string, same bool) (found []birth, ok bool) {
	d := path.Dir(dst)
	if same || d == "." {
		return nil, true
	}
	found, _, ok = t.walk(d + "/.")
	return found, ok
}

// LinkedFd is Moved for a hard link at dst of the regular file open at fd
// (linkat(2) of a descriptor), whose names are not known: it is taken to
// be below no marker now, so any marker above dst that would free it
// counts (tighter, never looser). A descriptor that cannot be stat'ed
// frees nothing. Safe for concurrent use.
func (t *Tools) LinkedFd(fd int, dst string, uid uint32) MoveFreed {
	if !t.Enabled() {
		return FreesNothing
	}
	dstDir, ok := t.dstMarkers(dst, false)
	if !ok || len(dstDir) == 0 {
		return FreesNothing
	}
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, statxMask, &st) != nil {
		return FreesNothing
	}
	return t.moved(nil, birthOf(&st), dstDir, dst, false, uid)
}

// moved is Moved for what was born at srcBirth, below the markers srcDir
// (in another directory than dst's, or dstDir is empty), to dst below
// the markers dstDir.
func (t *Tools) moved(srcDir []birth, srcBirth birth, dstDir []birth, dst string, dir bool, uid uint32) MoveFreed {
	for _, m := range srcDir {
		if t.accepted(m) {
			return FreesNothing // free for everyone where it is
		}
	}
	if dir && t.MarkerName(path.Base(dst), true) {
		return FreesTree
	}
	var added []birth
	for _, m := range dstDir {
		if !containsBirth(srcDir, m) {
			added = append(added, m)
		}
	}
	if dir {
		if len(added) > 0 {
			return FreesTree
		}
		return FreesNothing
	}
	for _, m := range added {
		if t.accepted(m) || m.uid == uid && srcBirth.uid == uid && srcBirth.btime && srcBirth.ns >= m.ns {
			return FreesFile
		}
	}
	return FreesNothing
}

// accepted reports whether a marker born at b counts as accepted: born
// outside the mount's spans (a nil policy accepts none).
func (t *Tools) accepted(b birth) bool {
	return t.policy != nil && !t.policy.Held(b.ns)
}

// containsBirth reports whether bs holds b.
func containsBirth(bs []birth, b birth) bool {
	for _, c := range bs {
		if c == b {
			return true
		}
	}
	return false
}

// walk opens the directories above rel from the backing root without
// following symbolic links and returns the markers found in them (kept
// ones included) and the statx of rel itself (not following a last
// symbolic link; rel ending in "/." names its directory). Exempt and
// Moved share it. ok is false when a directory cannot be opened
// or rel cannot be stat'ed.
func (t *Tools) walk(rel string) (found []birth, self unix.Statx_t, ok bool) {
	parts := strings.Split(rel, "/")
	fd, err := unix.Open(t.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, self, false
	}
	t.mu.Lock()
	anyKept := len(t.kept) > 0
	t.mu.Unlock()
	for _, comp := range parts[:len(parts)-1] {
		sub, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(fd)
			return nil, self, false
		}
		found = append(found, t.markersIn(fd, sub, comp)...)
		if anyKept {
			found = append(found, t.keptIn(sub)...)
		}
		unix.Close(fd)
		fd = sub
	}
	defer unix.Close(fd)
	if unix.Statx(fd, parts[len(parts)-1], unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, statxMask, &self) != nil {
		return nil, self, false
	}
	return found, self, true
}
