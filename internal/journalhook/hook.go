// Package journalhook is the change journal's hook in the mount's mutation
// path (docs/DESIGN.md#journal-hook): which workspace paths are journaled,
// the record of a change with its pre-images before the backing operation
// and its after-notes after it (Hook.Record, Pending), a writable handle's
// first change and its note at release (Handle), the count of changes made
// unrecorded, and the generation of handle records a checkpoint starts.
//
// The hook never imports the FUSE adapter: it reaches the backing
// workspace through Mount, which package fusefs implements. A nil *Hook
// is the journal off: every method is then a no-op (or false), so with the
// journal off no journal code runs beyond a nil check.
package journalhook

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/journal"
)

// Journal ops a mutation records (journal.Record's op): the change a
// session made, as the rewind undoes it.
const (
	OpCreate   = "create"
	OpWrite    = "write"
	OpTruncate = "truncate"
	OpUnlink   = "unlink"
	OpRename   = journal.OpRename
	OpExchange = journal.OpExchange
	OpMkdir    = "mkdir"
	OpRmdir    = "rmdir"
	OpChmod    = "chmod"
	OpSymlink  = "symlink"
	OpLink     = "link"
	OpMknod    = "mknod"
	// OpTimes is a change of a name's times (utimens): not recorded (a
	// rewind restores no times) but noted, NoteState.
	OpTimes = "times"
)

// Mount is the backing workspace as the hook sees it; package fusefs
// implements it. Its methods are safe for concurrent use.
type Mount interface {
	// OpenParent opens the parent directory of the workspace-relative
	// path rel below the workspace root descriptor, without following a
	// symlink on the way: its descriptor, rel's last element in it, and
	// what releases the descriptor. The errno is the walk's.
	OpenParent(rel string) (dirfd int, leaf string, done func(), errno syscall.Errno)
	// NotOpen reports whether no handle through the mount is open on the
	// backing file st: only then may the journal link a doomed file's
	// inode into its store (journal.CaptureOptions).
	NotOpen(st *unix.Stat_t) bool
	// NameOf is the workspace-relative name that the open backing
	// descriptor fd's file has now, as the kernel knows it (a rename of
	// the file or of a directory above it, through the mount or not, is
	// in it at once); false when the file has no name (unlinked) or lies
	// outside the workspace.
	NameOf(fd int) (rel string, ok bool)
}

// Exempter selects the paths not journaled besides .git/ and the control
// tree (git-ignored paths, unless --journal-ignored). isDir is for ignore
// patterns ending in "/".
type Exempter interface {
	Exempt(rel string, isDir bool) bool
}

// Config is what a Hook is built over.
type Config struct {
	// Journal is the change journal; nil: the journal is off (New
	// returns nil).
	Journal *journal.Journal
	// Exempt selects the paths not journaled (nil: none besides .git/
	// and the control tree).
	Exempt Exempter
	// Mount is the backing workspace.
	Mount Mount
	// Guard's hash cache spares the journal reading or copying a file it
	// already stored (journal.CaptureOptions.KnownHash).
	Guard *guard.Guard
	// Logger takes the hook's warnings and errors.
	Logger *slog.Logger
	// Report lists an error in .rubino/errors (nil: not listed).
	Report func(ctltree.ErrorRecord)
}

// Hook is the journal's hook in one mount. Safe for concurrent use; nil is
// the journal off.
type Hook struct {
	cfg  Config
	gaps gaps
	// gen counts the checkpoints taken through the mount: a handle
	// records its next change again in a new generation (Handle.gen).
	gen atomic.Uint64
	// moves is held shared by each recorded rename and exchange from
	// its record (its pre-images taken) to its after-note or failure
	// note, over the backing move, and exclusively by a handle's release
	// while it names the file and notes its state (Handle.Release): a
	// release note is never named after a backing move and logged
	// before the move's after-note, where the conflict rule reads names
	// as from before the move (docs/DESIGN.md#journal-hook). A note
	// logged after the record but named before the backing move is read
	// right. Held over the backing rename only, not the pre-images'
	// copies, a release waits for renames as long as their syscalls take.
	// A removal needs no gate: its after-note follows any line logged
	// after its record (journal.Journal.NoteRemoved).
	moves sync.RWMutex
}

// New returns the hook over cfg, or nil when cfg.Journal is nil (the
// journal off).
func New(cfg Config) *Hook {
	if cfg.Journal == nil {
		return nil
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Hook{cfg: cfg}
}

// Journals reports whether a change of rel is journaled: the journal is
// on and rel is not the root, has no ".git" component (but for
// .git/info/exclude), is not in the control tree, is not go-fuse's
// placeholder of a nameless node (OrphanRel) and is not excluded by
// Config.Exempt (git-ignored paths, unless --journal-ignored). isDir is
// for ignore patterns ending in "/".
func (h *Hook) Journals(rel string, isDir bool) bool {
	if h == nil || rel == "" || rel == "." || OrphanRel(rel) {
		return false
	}
	if rel == ctltree.DirName || strings.HasPrefix(rel, ctltree.DirName+"/") {
		return false
	}
	if rel != ".git/info/exclude" && (rel == ".git" || strings.HasPrefix(rel, ".git/") || strings.Contains(rel, "/.git/") || strings.HasSuffix(rel, "/.git")) {
		// .git/info/exclude is the session's change like any file: it
		// can widen what is exempt (docs/DESIGN.md#exempt-widening).
		return false
	}
	return h.cfg.Exempt == nil || !h.cfg.Exempt.Exempt(rel, isDir)
}

// JournalsAny reports whether a change with op on the n names rel(0) ..
// rel(n-1) is journaled: when any of its names is (a file renamed from an
// ignored temporary name over a tracked one changes the tracked one).
// False for op "" (a mutation the journal does not record).
func (h *Hook) JournalsAny(op string, n int, rel func(i int) string) bool {
	if h == nil || op == "" {
		return false
	}
	isDir := op == OpMkdir || op == OpRmdir
	for i := 0; i < n; i++ {
		if h.Journals(rel(i), isDir) {
			return true
		}
	}
	return false
}

// OrphanRel reports whether rel is go-fuse's placeholder path of a node
// with no name left (".go-fuse.N/deleted", N decimal, always the first
// segment, maybe followed by "/" and the names below it): a file unlinked
// while open, or an O_TMPFILE file not yet named. Its bytes are nobody's
// workspace content and no rewind can name it, so changes through its
// handles are not journaled (docs/DESIGN.md#journal-hook); natively they
// succeed, and so they do here. Only that exact shape matches: a
// workspace file named ".go-fuse.x" is journaled like any other.
func OrphanRel(rel string) bool {
	rest, ok := strings.CutPrefix(rel, ".go-fuse.")
	if !ok {
		return false
	}
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits == 0 {
		return false
	}
	rest, ok = strings.CutPrefix(rest[digits:], "/deleted")
	return ok && (rest == "" || rest[0] == '/')
}

// Checkpointed starts a new generation of handle records: called after
// every checkpoint taken through the mount (the control files, a rewind's
// automatic one), so an open handle records its next change in the new
// interval (Handle.gen). nil-safe.
func (h *Hook) Checkpointed() {
	if h != nil {
		h.gen.Add(1)
	}
}

// Gen is the current generation of handle records (0 with the journal
// off): read it before a record that makes a handle's first change
// (Handle.Truncated, Hook.Created).
func (h *Hook) Gen() uint64 {
	if h == nil {
		return 0
	}
	return h.gen.Load()
}

// AfterOf is the journal.After of rel as st describes it (no hash): a
// directory has no size or mtime.
func AfterOf(rel string, st *syscall.Stat_t) journal.After {
	a := journal.After{Path: rel, Mode: st.Mode, Ino: st.Ino, Size: st.Size,
		MtimeNs: st.Mtim.Sec*1e9 + st.Mtim.Nsec}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		a.Kind, a.Size, a.MtimeNs = journal.KindDir, 0, 0
	case syscall.S_IFLNK:
		a.Kind = journal.KindSymlink
	default:
		a.Kind = journal.KindFile
	}
	return a
}

// afterAt is the journal.After of leaf in the directory dirfd (rel's
// parent), by lstat: KindAbsent when it is gone or dirfd < 0.
func afterAt(dirfd int, leaf, rel string) journal.After {
	a := journal.After{Path: rel, Kind: journal.KindAbsent}
	if dirfd < 0 {
		return a
	}
	flags := unix.AT_SYMLINK_NOFOLLOW
	if leaf == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var ust unix.Stat_t
	if err := unix.Fstatat(dirfd, leaf, &ust, flags); err != nil {
		return a
	}
	st := syscall.Stat_t{Mode: ust.Mode, Ino: ust.Ino, Size: ust.Size,
		Mtim: syscall.Timespec{Sec: ust.Mtim.Sec, Nsec: ust.Mtim.Nsec}}
	return AfterOf(rel, &st)
}
