package ignore

// Tool-owned trees (docs/DESIGN.md#tool-trees): directories that a package
// manager or build tool owns (a venv, node_modules, a tagged cache) are
// recognised by a marker, without a .gitignore, and what they hold is
// exempt from refusals as accepted build outputs are.

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// CacheDirSignature is the first line of a CACHEDIR.TAG file under the
// Cache Directory Tagging Specification (https://bford.info/cachedir/).
const CacheDirSignature = "Signature: 8a477f597d28d172789f06886806bc55"

// goCacheREADME starts the README that the go command writes at the root
// of its build cache (GOCACHE); the cache carries no CACHEDIR.TAG.
const goCacheREADME = "This directory holds cached build artifacts from the Go build system."

// DefaultToolMarkers are the markers of tool-owned trees recognised by
// default (the guard.tool_trees key), in the form ParseToolMarker reads:
// a venv, node_modules, __pycache__, a directory tagged by the Cache
// Directory Tagging Specification (Cargo's target/ among them) and the
// Go build cache.
var DefaultToolMarkers = []string{
	"node_modules/",
	"__pycache__/",
	"pyvenv.cfg",
	"CACHEDIR.TAG:" + CacheDirSignature,
	"README:" + goCacheREADME,
}

// maxPrefix bounds the content a marker may require (bytes read from it).
const maxPrefix = 256

// toolMarker is one parsed marker.
type toolMarker struct {
	name   string // a directory's name (dir), or a file's in the tree's root
	dir    bool   // the directory named name is the tree
	prefix []byte // the marker file must start with these bytes (nil: any)
}

// ParseToolMarker checks one marker of the guard.tool_trees key: "NAME/"
// (a directory of that name is a tool-owned tree: node_modules/),
// "FILE" (a directory holding a regular file of that name is one:
// pyvenv.cfg) or "FILE:PREFIX" (the file must start with PREFIX:
// CACHEDIR.TAG's signature). NAME and FILE are single path components,
// not ".", ".." or ".git", and PREFIX is at most 256 bytes. The error
// names the marker and what to write.
func ParseToolMarker(s string) error {
	_, err := parseToolMarker(s)
	return err
}

func parseToolMarker(s string) (toolMarker, error) {
	name, prefix, hasPrefix := strings.Cut(s, ":")
	m := toolMarker{name: name}
	if strings.HasSuffix(name, "/") && !hasPrefix {
		m.name, m.dir = strings.TrimSuffix(name, "/"), true
	}
	switch {
	case m.name == "" || m.name == "." || m.name == ".." || m.name == ".git" || strings.Contains(m.name, "/"):
		return m, fmt.Errorf("tool tree marker %q: write a directory name ending in / (node_modules/), a file name (pyvenv.cfg), or FILE:PREFIX (CACHEDIR.TAG:Signature: ...)", s)
	case hasPrefix && (prefix == "" || len(prefix) > maxPrefix):
		return m, fmt.Errorf("tool tree marker %q: the content after the colon must be 1 to %d bytes", s, maxPrefix)
	}
	if hasPrefix {
		m.prefix = []byte(prefix)
	}
	return m, nil
}

// Tools decides which files of tool-owned trees are exempt from refusals
// for a caller (docs/DESIGN.md#tool-trees). A file is in a tool-owned
// tree when a directory above it, the workspace root excluded, carries a
// marker. It is exempt for a caller of uid U when, for one such marker:
//
//   - the marker was born before the mount served the workspace since the
//     last acceptance of the exemption policy (Policy.Held), like an
//     accepted ignore rule: for every caller; or
//   - the marker was made through the mount (a session's), owned by U,
//     and the file is owned by U and was born at or after the marker.
//
// Birth is the backing file's statx btime (ctime for a marker where the
// file system keeps no btime, or a file marker changed since its birth;
// a file without a btime is never exempt through a session's marker).
// Safe for concurrent use: it keeps its configuration and the markers
// Changing keeps (bounded, under a mutex), and reads the backing
// directory directly without following symbolic links.
type Tools struct {
	root    string
	markers []toolMarker
	policy  *Policy

	mu   sync.Mutex
	kept map[dirKey][]birth // markers of a directory, kept by Changing for when they are gone
}

// maxKept bounds the directories whose markers Tools keeps; past it they
// are forgotten (their files are refused again: tighter, never looser).
const maxKept = 4096

// dirKey names a directory by inode and birth, so that a new directory
// that reuses the inode is another.
type dirKey struct {
	ino uint64
	ns  int64
}

// NewTools returns the decider for the workspace reached at root (read
// directly, never through the mount) with the markers specs (the
// guard.tool_trees key; nil or empty recognises none) and the policy
// whose spans tell a session's marker from an accepted one (nil: every
// marker counts as a session's: none is accepted). A malformed marker is
// an error naming it.
func NewTools(root string, specs []string, p *Policy) (*Tools, error) {
	t := &Tools{root: root, policy: p}
	for _, s := range specs {
		m, err := parseToolMarker(s)
		if err != nil {
			return nil, err
		}
		t.markers = append(t.markers, m)
	}
	return t, nil
}

// birth is what Exempt knows of a file's or marker's origin.
type birth struct {
	uid   uint32
	ns    int64 // btime, or ctime for a marker without one (a file marker's: the later of the two)
	born  int64 // btime, or ctime without one
	btime bool  // born is a btime
	ino   uint64
}

func birthOf(st *unix.Statx_t) birth {
	b := birth{uid: st.Uid, ino: st.Ino, ns: st.Ctime.Sec*1e9 + int64(st.Ctime.Nsec)}
	if st.Mask&unix.STATX_BTIME != 0 {
		b.ns, b.btime = st.Btime.Sec*1e9+int64(st.Btime.Nsec), true
	}
	b.born = b.ns
	return b
}

const statxMask = unix.STATX_TYPE | unix.STATX_UID | unix.STATX_INO | unix.STATX_CTIME | unix.STATX_BTIME

// Exempt reports whether the regular file at rel (workspace-relative,
// slash-separated), whose device and inode are dev and ino (st_dev and
// st_ino of the backing file), is exempt from refusals for a
// caller of uid by the rule of Tools. A file whose name no longer leads
// to that file, or a path through a symbolic link, is not exempt. It costs one
// openat per directory of rel and one statx per marker per directory (a
// marker with a prefix: an open and a read of at most 256 bytes); the
// callers ask only when the guard would refuse, and an exempt file's
// refusal becomes none (the caller gets 0, not EACCES). Safe for
// concurrent use; a nil Tools exempts nothing.
func (t *Tools) Exempt(rel string, uid uint32, dev, ino uint64) bool {
	if t == nil || len(t.markers) == 0 {
		return false
	}
	parts := strings.Split(rel, "/")
	if len(parts) < 2 {
		return false // the workspace root is never a tool-owned tree
	}
	found, st, ok := t.walk(rel)
	if !ok || len(found) == 0 || st.Ino != ino || unix.Mkdev(st.Dev_major, st.Dev_minor) != dev {
		return false
	}
	file := birthOf(&st)
	for _, m := range found {
		if t.accepted(m) {
			return true // predates the mount, or accepted since
		}
		if m.uid == uid && file.uid == uid && file.btime && (file.ns >= m.ns || t.isMarkerBornHeld(file, m)) {
			return true
		}
	}
	return false
}

// isMarkerBornHeld reports whether file is the marker m itself, born
// while mounted: a session's marker file belongs to its tree though its
// content was written after its birth (the ctime it counts from). A file
// born before the mount and made a marker since (renamed, linked or
// rewritten to one) does not: it is not the tool's.
func (t *Tools) isMarkerBornHeld(file, m birth) bool {
	return file.ino == m.ino && (t.policy == nil || t.policy.Held(m.born))
}

// markersIn returns the births of the markers in the directory dir
// (named comp in parent).
func (t *Tools) markersIn(parent, dir int, comp string) []birth {
	var found []birth
	for _, m := range t.markers {
		if b, ok := m.find(parent, dir, comp); ok {
			found = append(found, b)
		}
	}
	return found
}

// keyOf returns the directory dir's key.
func keyOf(dir int) (dirKey, bool) {
	var st unix.Statx_t
	if unix.Statx(dir, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, statxMask, &st) != nil {
		return dirKey{}, false
	}
	b := birthOf(&st)
	return dirKey{ino: b.ino, ns: b.ns}, true
}

// keptIn returns the markers Changing kept for the directory dir.
func (t *Tools) keptIn(dir int) []birth {
	k, ok := keyOf(dir)
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kept[k]
}

// Changing is called before a guarded change (an unlink, a rename, an
// overwrite) of the file at rel. When rel is a marker file (pyvenv.cfg,
// CACHEDIR.TAG), the markers of its directory are kept, so that removing
// the marker first (`rm -rf v` may meet v/pyvenv.cfg before v/lib) does
// not take the exemption from the files still in the tree; what is kept
// exempts no more than the marker did. It costs a string comparison per
// marker for any other rel. Safe for concurrent use.
func (t *Tools) Changing(rel string) {
	if t == nil {
		return
	}
	base := path.Base(rel)
	isMarker := false
	for _, m := range t.markers {
		isMarker = isMarker || !m.dir && m.name == base
	}
	dir := path.Dir(rel)
	if !isMarker || dir == "." {
		return
	}
	fd, err := unix.Open(t.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	parts := strings.Split(dir, "/")
	var found []birth
	for i, comp := range parts {
		sub, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil && i == len(parts)-1 {
			found = t.markersIn(fd, sub, comp)
		}
		unix.Close(fd)
		if err != nil {
			return
		}
		fd = sub
	}
	defer unix.Close(fd)
	k, ok := keyOf(fd)
	if len(found) == 0 || !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kept == nil || len(t.kept) >= maxKept {
		t.kept = map[dirKey][]birth{}
	}
	for _, b := range found {
		dup := false
		for _, c := range t.kept[k] {
			dup = dup || c == b
		}
		if !dup {
			t.kept[k] = append(t.kept[k], b)
		}
	}
}

// find looks for m in the directory dir (named comp in parent) and
// returns the marker's birth: a directory's btime, a file's btime or
// ctime, whichever is later.
func (m toolMarker) find(parent, dir int, comp string) (birth, bool) {
	var st unix.Statx_t
	if m.dir {
		if comp != m.name || unix.Statx(parent, comp, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, statxMask, &st) != nil {
			return birth{}, false
		}
		return birthOf(&st), true
	}
	if unix.Statx(dir, m.name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, statxMask, &st) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFREG {
		return birth{}, false
	}
	if m.prefix != nil {
		fd, err := unix.Openat(dir, m.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return birth{}, false
		}
		buf := make([]byte, len(m.prefix))
		n, _ := unix.Pread(fd, buf, 0)
		unix.Close(fd)
		if !bytes.Equal(buf[:max(n, 0)], m.prefix) {
			return birth{}, false
		}
	}
	// A file marker counts from its last change of name, link count or
	// content (ctime), if later than its birth: a rename or link keeps
	// btime, and an old file renamed to pyvenv.cfg, or an old README
	// rewritten to the Go cache's, would otherwise be a marker born
	// before the mount (docs/DESIGN.md#tool-trees, "Renames and links").
	b := birthOf(&st)
	b.ns = max(b.ns, st.Ctime.Sec*1e9+int64(st.Ctime.Nsec))
	return b, true
}
