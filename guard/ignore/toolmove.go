package ignore

// Renames and links never widen what tool trees exempt
// (docs/DESIGN.md#tool-trees, "Renames and links"): a rename keeps a
// file's birth, so an old file or directory given a marker's name would
// be a marker born before the mount (one that frees everything below it,
// for everyone), and an old file moved below a marker would be freed by
// it.

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
	// FreesMarker: the file would become a marker born before the mount
	// (an accepted one, which frees every file of its directory for
	// every caller). Refused.
	FreesMarker
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

// MayFree reports, from the names alone, whether Moved could find that a
// rename or link of what is at src (a directory when dir) to dst frees
// anything: dst's last component is a marker's name, or dst lies in
// another directory. It reads nothing: a rename within a directory to an
// ordinary name (an editor's save, `sed -i`) costs two string
// comparisons per marker.
func (t *Tools) MayFree(src, dst string, dir bool) bool {
	if t == nil || len(t.markers) == 0 {
		return false
	}
	return path.Dir(src) != path.Dir(dst) || t.MarkerName(path.Base(dst), dir)
}

// Moved reports what a rename (or, for a regular file, a hard link) of
// src to dst would free for a caller of uid (workspace-relative,
// slash-separated; dir tells what src is):
//
//   - dst's name is a file marker's and src's birth predates the mount's
//     spans (Policy.Held): FreesMarker. A file born while mounted becomes
//     a session's marker, which frees only what is born after it.
//   - dst's name is a directory marker's: FreesTree.
//   - dst lies below markers src is not below (kept ones included), src
//     is not freed already by its own, and they would free it (an
//     accepted marker, or the caller's marker for a file of the caller's
//     born after it): FreesFile for a file, FreesTree for a directory.
//
// A directory below an accepted marker frees nothing more by moving (all
// below it is free already). What cannot be read (src gone, a symbolic
// link in a path) frees nothing: the rename or link itself then fails or
// finds no tree, as Exempt would. It costs, when MayFree, one openat per
// directory above each name and one statx per marker per directory.
// Safe for concurrent use.
func (t *Tools) Moved(src, dst string, dir bool, uid uint32) MoveFreed {
	if !t.MayFree(src, dst, dir) {
		return FreesNothing
	}
	srcDir, srcBirth, ok := t.walk(src)
	if !ok {
		return FreesNothing
	}
	return t.moved(srcDir, srcBirth, path.Dir(src), dst, dir, uid)
}

// LinkedFd is Moved for a hard link at dst of the regular file open at fd
// (linkat(2) of a descriptor), whose names are not known: it is taken to
// be below no marker now, so any marker above dst that would free it
// counts (tighter, never looser). A descriptor that cannot be stat'ed
// frees nothing. Safe for concurrent use.
func (t *Tools) LinkedFd(fd int, dst string, uid uint32) MoveFreed {
	if t == nil || len(t.markers) == 0 {
		return FreesNothing
	}
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, statxMask, &st) != nil {
		return FreesNothing
	}
	return t.moved(nil, birthOf(&st), "", dst, false, uid)
}

// moved is Moved for what was born at srcBirth, below the markers srcDir
// in the directory srcParent ("" when not known).
func (t *Tools) moved(srcDir []birth, srcBirth birth, srcParent, dst string, dir bool, uid uint32) MoveFreed {
	frees := func(ms []birth) bool {
		for _, m := range ms {
			if t.accepted(m) || !dir && m.uid == uid && srcBirth.uid == uid && srcBirth.btime && srcBirth.ns >= m.ns {
				return true
			}
		}
		return false
	}
	if t.MarkerName(path.Base(dst), dir) {
		switch {
		case dir && !frees(srcDir):
			return FreesTree
		case !dir && path.Dir(dst) != "." && t.accepted(srcBirth):
			// What it frees is its new directory's, not itself: refused
			// even when it is free where it is.
			return FreesMarker
		}
	}
	if srcParent == path.Dir(dst) || frees(srcDir) {
		return FreesNothing // same directories above, or free where it is
	}
	var dstDir []birth
	if d := path.Dir(dst); d != "." { // the workspace root is never a tool tree
		var ok bool
		if dstDir, _, ok = t.walk(d + "/."); !ok {
			return FreesNothing
		}
	}
	var added []birth
	for _, m := range dstDir {
		if !containsBirth(srcDir, m) {
			added = append(added, m)
		}
	}
	switch {
	case dir && len(added) > 0:
		return FreesTree
	case !dir && frees(added):
		return FreesFile
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
// ones included) and the birth of rel itself (statx, not following a
// last symbolic link; rel ending in "/." names its directory, whose own
// birth is then returned). ok is false when a directory cannot be opened
// or rel cannot be stat'ed.
func (t *Tools) walk(rel string) (found []birth, self birth, ok bool) {
	parts := strings.Split(rel, "/")
	fd, err := unix.Open(t.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, birth{}, false
	}
	t.mu.Lock()
	anyKept := len(t.kept) > 0
	t.mu.Unlock()
	for _, comp := range parts[:len(parts)-1] {
		sub, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(fd)
			return nil, birth{}, false
		}
		found = append(found, t.markersIn(fd, sub, comp)...)
		if anyKept {
			found = append(found, t.keptIn(sub)...)
		}
		unix.Close(fd)
		fd = sub
	}
	defer unix.Close(fd)
	var st unix.Statx_t
	if unix.Statx(fd, parts[len(parts)-1], unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, statxMask, &st) != nil {
		return nil, birth{}, false
	}
	return found, birthOf(&st), true
}
