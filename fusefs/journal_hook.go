package fusefs

// The change journal's hook in the mutation path
// (docs/DESIGN.md#journal-hook): FS.mutate records every change by name
// (journalBefore, journalAfter), and a writable handle records its first
// change and notes its file's state at release (handleJournal).

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/journal"
	"golang.org/x/sys/unix"
)

// Journal ops a mutation records (journal.Record's op): the change a
// session made, as the rewind undoes it.
const (
	jCreate   = "create"
	jWrite    = "write"
	jTruncate = "truncate"
	jUnlink   = "unlink"
	jRename   = "rename"
	jExchange = "exchange"
	jMkdir    = "mkdir"
	jRmdir    = "rmdir"
	jChmod    = "chmod"
	jSymlink  = "symlink"
	jLink     = "link"
	jMknod    = "mknod"
)

// journaling reports whether the journal is on (Config.Journal set).
func (f *FS) journaling() bool { return f.cfg.Journal != nil }

// journals reports whether a change of rel is journaled: the journal is
// on and rel is not the root, has no ".git" component (but for
// .git/info/exclude), is not in the
// control tree and is not excluded by Config.JournalExempt (git-ignored
// paths, unless --journal-ignored). isDir is for ignore patterns ending
// in "/".
func (f *FS) journals(rel string, isDir bool) bool {
	if f.cfg.Journal == nil || rel == "" || rel == "." || orphanRel(rel) {
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
	return f.cfg.JournalExempt == nil || !f.cfg.JournalExempt.Exempt(rel, isDir)
}

// orphanRel reports whether rel is go-fuse's placeholder path of a node
// with no name left (".go-fuse.N/deleted", N decimal, always the first
// segment, maybe followed by "/" and the names below it): a file unlinked
// while open, or an O_TMPFILE file not yet named. Its bytes are nobody's
// workspace content and no rewind can name it, so changes through its
// handles are not journaled (docs/DESIGN.md#journal-hook); natively they
// succeed, and so they do here. Only that exact shape matches: a
// workspace file named ".go-fuse.x" is journaled like any other.
func orphanRel(rel string) bool {
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

// jDirs holds the parent directory of each name of a journaled mutation,
// from the lock step (guardedChild.at) or opened here, until close.
type jDirs struct {
	dirs   []dirFd
	leaves []string
	owned  []dirFd
}

// journalDirs returns the parent directories of m's names: those the
// lock step (locked.begin) holds, the others opened (fd < 0 when they
// cannot be).
func (f *FS) journalDirs(m *mutation, gs []guardedChild) *jDirs {
	j := &jDirs{dirs: make([]dirFd, len(m.names)), leaves: make([]string, len(m.names))}
	for i, nm := range m.names {
		if gs[i].inDir {
			j.dirs[i], j.leaves[i] = gs[i].at, gs[i].leaf
			continue
		}
		d, leaf, errno := f.prepareAt(nm.rel)
		if errno != 0 {
			j.dirs[i], j.leaves[i] = noDir, path.Base(nm.rel)
			continue
		}
		j.dirs[i], j.leaves[i] = d, leaf
		j.owned = append(j.owned, d)
	}
	return j
}

func (j *jDirs) close() {
	for _, d := range j.owned {
		d.close()
	}
}

// capture returns the journal.Capture over j: the pre-image of a name of
// m, through its parent directory.
func (f *FS) capture(m *mutation, j *jDirs) journal.Capture {
	return func(p string) (journal.PreImage, error) {
		for i, nm := range m.names {
			if nm.rel != p {
				continue
			}
			if j.dirs[i].fd < 0 {
				return journal.PreImage{}, fmt.Errorf("the parent directory of %s could not be opened", p)
			}
			return journal.CaptureWith(f.cfg.Journal.Blobs(), j.dirs[i].fd, j.leaves[i],
				journal.CaptureOptions{Doomed: doomed(m, i), MayLink: f.notOpen, KnownHash: f.knownHash})
		}
		return journal.PreImage{}, fmt.Errorf("%s is none of the mutation's names", p)
	}
}

// doomed reports whether m removes or replaces names[i] (an unlink, a
// rename's target: the pinned names, an exchange's excepted), whose file
// the journal may then keep by linking its inode rather than copying it
// (journal.CaptureOptions, docs/DESIGN.md#journal-sync).
func doomed(m *mutation, i int) bool {
	return m.names[i].pin && m.jop != jExchange
}

// notOpen reports whether no handle through the mount is open on the
// backing file st: only then may the journal link a doomed file's inode
// into its store (journal.CaptureOptions), since a handle would see the
// file keep st_nlink 1 after its removal. O(open handles).
func (f *FS) notOpen(st *unix.Stat_t) bool {
	ino := f.stableAttr(&syscall.Stat_t{Dev: st.Dev, Ino: st.Ino}, 0).Ino
	h := &f.handles
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.files {
		if n.StableAttr().Ino == ino {
			return false
		}
	}
	return true
}

// knownHash is the guard's hash-cache entry for the backing file st, in
// the journal's address form, or "" when it has none it trusts for st
// (guard.HashCache.Lookup): the journal then neither reads nor copies a
// file it already stored (journal.CaptureOptions).
func (f *FS) knownHash(st *unix.Stat_t) string {
	h, ok := f.cfg.Guard.Hashes().Lookup(guard.StatOf(&syscall.Stat_t{Dev: st.Dev, Ino: st.Ino,
		Size: st.Size, Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim), Mode: st.Mode, Nlink: st.Nlink}))
	if !ok {
		return ""
	}
	return h.String()
}

// journalUnshare runs after m's backing operation failed: a pre-image
// captured by linking a doomed file's inode would otherwise share the
// inode of a file that lives on (journal.Journal.Unshare). A failure is
// logged at warn: a later change of the file would make the blob fail its
// check at a rewind (reported unrecoverable, never restored wrong).
func (f *FS) journalUnshare(m *mutation, rec journal.Record) {
	if len(rec.Pre) == 0 || !(doomed(m, 0) || len(m.names) > 1 && doomed(m, 1)) {
		return
	}
	if err := f.cfg.Journal.Unshare(rec); err != nil {
		f.log.Warn("journal: a pre-image still shares its file's inode after a failed removal", "path", m.names[0].rel, "err", err)
	}
}

// journalBefore records m (op m.jop) for session before its backing
// operation: the pre-images are durable when it returns 0 and ok
// (docs/DESIGN.md#journal-store). A failure refuses the mutation: EIO
// (the reason is logged and listed in .rubino/errors), or EAGAIN for a
// caller whose session could not be resolved in time, whose change cannot
// be attributed (docs/DESIGN.md#no-wait-on-caller). A full state
// directory (ENOSPC, EDQUOT) refuses nothing: the change goes ahead
// unrecorded (ok false; journalGap).
func (f *FS) journalBefore(m *mutation, j *jDirs, session string) (rec journal.Record, ok bool, errno syscall.Errno) {
	if session == guard.UnknownSession {
		return journal.Record{}, false, syscall.EAGAIN
	}
	path2 := ""
	if len(m.names) > 1 {
		path2 = m.names[1].rel
	}
	rec, err := f.cfg.Journal.Record(session, m.jop, m.names[0].rel, path2, f.capture(m, j))
	switch {
	case err == nil:
		return rec, true, 0
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		f.journalGap(session, m.jop, m.names[0].rel, err)
		return rec, false, 0
	case errors.Is(err, journal.ErrStopped):
		// The budget is spent: the session's journal is stopped, the
		// change goes ahead unrecorded (docs/DESIGN.md#journal-budget).
		f.journalStoppedGap(session, m.jop, m.names[0].rel, err)
		return rec, false, 0
	}
	f.journalFailed(session, m.jop, m.names[0].rel, err)
	return rec, false, syscall.EIO
}

// journalGaps counts the changes made unrecorded because the state
// directory was full, with the last such error, for .rubino/status.
type journalGaps struct {
	mu   sync.Mutex
	n    uint64
	last string
	// stopped marks the sessions whose stop was logged (once each).
	stopped map[string]bool
}

// journalGap lets a change through unrecorded when the state directory
// is full: a full state disk must not stop the workspace (the guard keeps
// deciding from memory too), and the change is counted in .rubino/status
// ("journal": "unrecorded", "last_error"), logged at error the first time
// after a success and listed in .rubino/errors, so the user knows the
// journal has a gap.
func (f *FS) journalGap(session, op, rel string, err error) {
	g := &f.jgaps
	g.mu.Lock()
	first := g.last == ""
	g.n++
	g.last = err.Error()
	g.mu.Unlock()
	if first {
		f.journalError(session, op, rel, fmt.Sprintf("%s made unrecorded: the journal's state directory is full: %v", op, err))
	}
}

// journalStoppedGap counts a change let through unrecorded because its
// session's journal is stopped (the budget is spent), and logs and lists
// the stop the first time per session (docs/DESIGN.md#journal-budget).
func (f *FS) journalStoppedGap(session, op, rel string, err error) {
	g := &f.jgaps
	g.mu.Lock()
	g.n++
	g.last = err.Error()
	if g.stopped == nil {
		g.stopped = map[string]bool{}
	}
	first := !g.stopped[session]
	g.stopped[session] = true
	g.mu.Unlock()
	if first {
		f.journalError(session, op, rel, fmt.Sprintf("%s made unrecorded: %v", op, err))
	}
}

// journalStatus is the "journal" key of .rubino/status: the changes made
// unrecorded and the last reason, the budget and what counts against it
// (bytes), and "stopped": each session whose journal is stopped, with why
// (docs/DESIGN.md#journal-budget).
func (f *FS) journalStatus() (string, any) {
	g := &f.jgaps
	g.mu.Lock()
	st := map[string]any{"unrecorded": g.n}
	if g.last != "" {
		st["last_error"] = g.last
	}
	g.mu.Unlock()
	if j := f.cfg.Journal; j != nil {
		blobs, logs := j.Used()
		st["budget_bytes"] = j.Budget()
		st["blob_bytes"] = blobs
		st["log_bytes"] = logs
		stopped := j.StoppedSessions()
		if len(stopped) > 0 {
			st["stopped"] = stopped
		}
		g.mu.Lock()
		for s := range g.stopped { // restarted by a checkpoint under the budget
			if stopped[s] == "" {
				delete(g.stopped, s)
			}
		}
		g.mu.Unlock()
	}
	return "journal", st
}

// journalFailed logs a change refused because its record could not be
// made durable, and lists it in .rubino/errors.
func (f *FS) journalFailed(session, op, rel string, err error) {
	f.journalError(session, op, rel, fmt.Sprintf("%s refused: its journal record (pre-image) could not be made durable: %v", op, err))
}

// journalError logs msg at error and lists it in .rubino/errors.
func (f *FS) journalError(session, op, rel, msg string) {
	f.log.Error("journal: "+msg, "path", rel, "session", session)
	f.errs.Add(ctltree.ErrorRecord{Time: time.Now(), Session: session, Path: rel,
		Errno: errnoName(syscall.EIO), Message: msg})
}

// journalAfter notes the state m's names were left in by the change rec
// (journal.NoteAfter). A failure is logged at warn: the next rewind takes
// the paths for conflicts, never restores over a change.
func (f *FS) journalAfter(m *mutation, j *jDirs, session string, rec journal.Record) {
	afters := make([]journal.After, len(m.names))
	for i, nm := range m.names {
		afters[i] = afterAt(j.dirs[i], j.leaves[i], nm.rel)
	}
	if err := f.cfg.Journal.NoteAfter(session, rec.Seq, afters); err != nil {
		f.log.Warn("journal: an after-note was lost: a rewind will report the path as a conflict", "path", m.names[0].rel, "session", session, "err", err)
	}
}

// afterAt is the journal.After of leaf in d (rel's parent), by lstat:
// KindAbsent when it is gone or d could not be opened.
func afterAt(d dirFd, leaf, rel string) journal.After {
	a := journal.After{Path: rel, Kind: journal.KindAbsent}
	if d.fd < 0 {
		return a
	}
	var st syscall.Stat_t
	if _, errno := statAt(d, leaf, &st); errno != 0 {
		return a
	}
	return afterOf(rel, &st)
}

// afterOf is the journal.After of rel as st describes it (no hash).
func afterOf(rel string, st *syscall.Stat_t) journal.After {
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

// handleJournal is the journal state of one writable handle: its first
// change is recorded (by the handle's name, before the change), and a
// handle that changed its file notes the file's state at release.
type handleJournal struct {
	mu       sync.Mutex
	session  string // the session seen at open
	recorded bool   // the handle's first change is journaled
	wrote    bool   // it changed the file: an after-note at release
	skip     bool   // its file is not journaled (journals, at its first change)
	// gen is FS.jgen when the handle's change was recorded: after a
	// checkpoint (of any session) its next change is recorded again, so
	// the new interval has the file's pre-image.
	gen uint64
}

// jOpOf is the journal op of a change through a handle.
func jOpOf(gop guard.Op) string {
	if gop == guard.OpTruncate {
		return jTruncate
	}
	return jWrite
}

// journalHandleChange records, at a handle's first change of rel, op jop
// for the handle's session with rel's pre-image taken by its name
// before the change. Its errno refuses the change (journalBefore). Safe
// for concurrent use.
func (f *FS) journalHandleChange(hj *handleJournal, jop, rel string) syscall.Errno {
	if hj == nil {
		return 0
	}
	gen := f.jgen.Load()
	hj.mu.Lock()
	defer hj.mu.Unlock()
	if hj.recorded && hj.gen == gen {
		hj.wrote = true
		return 0
	}
	if hj.skip || orphanRel(rel) {
		// A nameless file's change is not journaled, and not decided
		// either: linkat may name it, and its handle's next change is
		// then journaled like any named file's.
		return 0
	}
	if !f.journals(rel, false) {
		hj.skip = true // decided once per handle, like the guard's right
		return 0
	}
	m := mutation{subject: subject{names: []mutName{{rel: rel}}}, jop: jop}
	j := f.journalDirs(&m, make([]guardedChild, 1))
	defer j.close()
	_, ok, errno := f.journalBefore(&m, j, hj.session)
	if errno != 0 {
		return errno
	}
	hj.recorded, hj.gen = true, gen
	hj.wrote = hj.wrote || ok // unrecorded (a full state directory): no after-note
	return 0
}

// journalHandleRelease notes the state of rel at the release of a handle
// that changed it (ref 0: a handle's close).
func (f *FS) journalHandleRelease(hj *handleJournal, rel string) {
	if hj == nil || f.cfg.Journal == nil {
		return
	}
	hj.mu.Lock()
	wrote := hj.wrote
	hj.wrote = false
	hj.mu.Unlock()
	if !wrote {
		return
	}
	d, leaf, errno := f.prepareAt(rel)
	if errno != 0 {
		return
	}
	defer d.close()
	a := afterAt(d, leaf, rel)
	if err := f.cfg.Journal.NoteAfter(hj.session, 0, []journal.After{a}); err != nil {
		f.log.Warn("journal: an after-note was lost: a rewind will report the path as a conflict", "path", rel, "session", hj.session, "err", err)
	}
}

// truncated marks the handle's first change as journaled by the O_TRUNC
// open that made it (FS.mutate's record), in generation gen (FS.jgen
// before the record). nil-safe.
func (hj *handleJournal) truncated(gen uint64) {
	if hj == nil {
		return
	}
	hj.mu.Lock()
	hj.recorded, hj.wrote, hj.gen = true, true, gen
	hj.mu.Unlock()
}

// journalCheckpointed starts a new generation of handle records: called
// after every checkpoint taken through the mount (the control files, a
// rewind's automatic one), so an open handle records its next change in
// the new interval (handleJournal.gen).
func (f *FS) journalCheckpointed() { f.jgen.Add(1) }

// createdJournal is the journal state of the handle that created rel for
// session: its creation is its first change, journaled by Create's
// mutation in generation gen (nil when rel is not journaled).
func (f *FS) createdJournal(rel, session string, gen uint64) *handleJournal {
	if !f.journals(rel, false) {
		return nil
	}
	return &handleJournal{session: session, recorded: true, wrote: true, gen: gen}
}
