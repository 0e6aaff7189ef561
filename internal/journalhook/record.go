package journalhook

// One journaled change by name (docs/DESIGN.md#journal-hook): recorded
// with its pre-images before the backing operation (Hook.Record), its
// after-states noted after a success (Pending.Commit), a linked pre-image
// unshared after a failure (Pending.Abort).

import (
	"errors"
	"fmt"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/journal"
	"github.com/rubinofs/rubinofs/sessions"
)

// Name is one name of a journaled change: names[0] is the record's path,
// names[1] (a rename's or exchange's target, a link's new name) its path2.
type Name struct {
	// Rel is the workspace-relative path.
	Rel string
	// Dir is the descriptor of Rel's parent directory when the caller
	// holds one (the mutation's lock step), borrowed until Pending.Commit
	// or Pending.Abort;
	// -1: the hook opens it (Mount.OpenParent).
	Dir int
	// Leaf is Rel's last element in Dir (ignored when Dir < 0).
	Leaf string
	// Doomed: the change removes or replaces the name (an unlink, a
	// rename's target; never an exchange's), whose file the journal may
	// then keep by linking its inode rather than copying it
	// (journal.CaptureOptions, docs/DESIGN.md#journal-sync).
	Doomed bool
}

// Pending is one recorded change between its record and the end of its
// backing operation. A nil *Pending is a change not journaled: its
// methods do nothing. Not safe for concurrent use.
type Pending struct {
	h       *Hook
	session string
	op      string
	names   []Name
	owned   []func() // the directories the hook opened, and the move gate
	rec     journal.Record
	ok      bool           // recorded (false: a gap, nothing to note)
	share   *journal.Share // the session's uid's share of the budget (nil: none)
}

// Record records the change op on names for session before its backing
// operation (journal.Journal.Record, the pre-images taken through the
// names' parent directories): the pre-images are durable when it returns
// errno 0 (docs/DESIGN.md#journal-store). With errno 0, call Commit or
// Abort on the Pending (nil-safe) once the backing operation is over:
// either releases the directories the hook opened (with an errno they
// are released already). A failure refuses the change: ENOENT or
// ENOTDIR, logged nowhere, when a name's parent directory is not there
// (what the backing operation would return); EIO (the reason is logged and listed in
// .rubino/errors), or EAGAIN for a caller whose session could not be
// resolved in time (sessions.Unknown), whose change cannot be
// attributed (docs/DESIGN.md#no-wait-on-caller). A full state directory
// (ENOSPC, EDQUOT) or a stopped session's journal (the budget, or its
// uid's share of it, is spent: docs/DESIGN.md#journal-share) refuses nothing: the change goes ahead unrecorded and is counted
// (Status). The caller decides first that the change is journaled
// (JournalsAny). names must not be empty.
func (h *Hook) Record(session, op string, names []Name) (*Pending, syscall.Errno) {
	p := &Pending{h: h, session: session, op: op, names: names}
	if session == sessions.Unknown {
		return p, syscall.EAGAIN
	}
	p.share = h.cfg.Journal.ShareOf(session) // docs/DESIGN.md#journal-share
	for i := range p.names {
		if p.names[i].Dir >= 0 {
			continue
		}
		fd, leaf, done, errno := h.cfg.Mount.OpenParent(p.names[i].Rel)
		if errno == syscall.ENOENT || errno == syscall.ENOTDIR {
			// No such directory: the change cannot happen at this path
			// either (a rename of a directory above has just made it
			// stale, and the mount runs the request again), so there is
			// nothing to record and no failure to report.
			p.release()
			return p, errno
		}
		if errno != 0 {
			p.names[i].Dir, p.names[i].Leaf = -1, path.Base(p.names[i].Rel)
			continue
		}
		p.names[i].Dir, p.names[i].Leaf = fd, leaf
		p.owned = append(p.owned, done)
	}
	path2 := ""
	if len(names) > 1 {
		path2 = names[1].Rel
	}
	rel := names[0].Rel
	rec, err := h.cfg.Journal.Record(session, op, rel, path2, p.capture)
	p.rec = rec
	switch {
	case err == nil:
		p.ok = true
		if op == OpRename || op == OpExchange {
			// From here (the capture done, the backing move next) to
			// Commit or Abort: no release note meanwhile (Hook.moves).
			h.moves.RLock()
			p.owned = append(p.owned, h.moves.RUnlock)
		}
		return p, 0
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		h.gap(session, op, rel, err)
		return p, 0
	case errors.Is(err, journal.ErrStopped):
		// The budget is spent: the session's journal is stopped, the
		// change goes ahead unrecorded (docs/DESIGN.md#journal-budget).
		h.stoppedGap(session, op, rel, err)
		return p, 0
	}
	h.failed(session, op, rel, err)
	p.release()
	return p, syscall.EIO
}

// NoteState notes (an after-note, ref 0) the state a change the journal
// does not record left names in: a change of a file's times (OpTimes),
// which moves its mtime, which the conflict rule compares
// (journal.SameState). Without the note a rewind took every file tar,
// unzip, rsync -a or touch -d had set the times of for one changed
// outside the mount. Each name's state is taken through names[i].Dir
// (opened through Mount.OpenParent when < 0, and released). A session
// not resolved (sessions.Unknown) notes nothing; a failure is logged at
// warn, as a lost after-note is.
func (h *Hook) NoteState(session string, names []Name) {
	if h == nil || session == sessions.Unknown || len(names) == 0 {
		return
	}
	afters := make([]journal.After, len(names))
	for i, nm := range names {
		if nm.Dir < 0 {
			fd, leaf, done, errno := h.cfg.Mount.OpenParent(nm.Rel)
			if errno != 0 {
				return // the name is gone already: a later change notes it
			}
			nm.Dir, nm.Leaf = fd, leaf
			defer done()
		}
		afters[i] = afterAt(nm.Dir, nm.Leaf, nm.Rel)
	}
	if err := h.cfg.Journal.NoteAfter(session, 0, afters); err != nil {
		h.cfg.Logger.Warn("journal: an after-note was lost: a rewind will report the path as a conflict", "path", names[0].Rel, "session", session, "err", err)
	}
}

// Dir is the descriptor of names[i]'s parent directory the change was
// recorded through (the caller's, or one the hook opened), -1 when there
// is none (nil p, or the directory could not be opened). It stays open
// until Commit or Abort, so the backing operation can make the change in
// the directory whose name it captured (docs/DESIGN.md#own-bracket-journal).
func (p *Pending) Dir(i int) int {
	if p == nil || i >= len(p.names) {
		return -1
	}
	return p.names[i].Dir
}

// Recorded reports whether the change was recorded (false for nil, and
// for a change let through unrecorded: no after-note follows).
func (p *Pending) Recorded() bool { return p != nil && p.ok }

// capture is the journal.Capture of p: the pre-image of one of its names,
// through its parent directory.
func (p *Pending) capture(rel string) (journal.PreImage, error) {
	for i, nm := range p.names {
		if nm.Rel != rel {
			continue
		}
		if nm.Dir < 0 {
			return journal.PreImage{}, fmt.Errorf("the parent directory of %s could not be opened", rel)
		}
		return journal.CaptureWith(p.h.cfg.Journal.Blobs(), nm.Dir, nm.Leaf,
			journal.CaptureOptions{Doomed: p.names[i].Doomed, MayLink: p.h.cfg.Mount.NotOpen, KnownHash: p.h.knownHash, Share: p.share})
	}
	return journal.PreImage{}, fmt.Errorf("%s is none of the mutation's names", rel)
}

// knownHash is the guard's hash-cache entry for the backing file st, in
// the journal's address form, or "" when it has none it trusts for st
// (guard.HashCache.Lookup): the journal then neither reads nor copies a
// file it already stored (journal.CaptureOptions).
func (h *Hook) knownHash(st *unix.Stat_t) string {
	hs, ok := h.cfg.Guard.Hashes().Lookup(guard.StatOf(&syscall.Stat_t{Dev: st.Dev, Ino: st.Ino,
		Size: st.Size, Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim), Mode: st.Mode, Nlink: st.Nlink}))
	if !ok {
		return ""
	}
	return hs.String()
}

// Commit notes the state the change left its names in
// (journal.Journal.NoteAfter), after a successful backing operation, as
// lstat finds them. A removal (unlink, rmdir) notes its name as absent
// without a stat (which could only see another process's new file), and
// only when a line was logged after its record
// (journal.Journal.NoteRemoved): the record already says the name is
// absent, which the conflict rule reads from a removal with no after-note
// behind it (docs/DESIGN.md#own-bracket-journal). A failure is logged at
// warn: the next rewind takes the paths for conflicts, never restores
// over a change. It releases the directories the hook opened.
func (p *Pending) Commit() {
	if p == nil {
		return
	}
	defer p.release()
	if !p.ok {
		return
	}
	note := p.h.cfg.Journal.NoteAfter
	afters := make([]journal.After, len(p.names))
	for i, nm := range p.names {
		if i == 0 && (p.op == OpUnlink || p.op == OpRmdir) {
			afters[i] = afterAt(-1, nm.Leaf, nm.Rel)
			note = p.h.cfg.Journal.NoteRemoved
			continue
		}
		afters[i] = afterAt(nm.Dir, nm.Leaf, nm.Rel)
	}
	if err := note(p.session, p.rec.Seq, afters); err != nil {
		p.h.cfg.Logger.Warn("journal: an after-note was lost: a rewind will report the path as a conflict", "path", p.names[0].Rel, "session", p.session, "err", err)
	}
}

// Abort runs after the backing operation failed. The change was recorded
// but never happened: a failure note says so (journal.Journal.NoteFailed),
// so that a rewind neither takes the names for what the change would have
// left (a failed rmdir of a directory that was not empty looked like a
// directory removed, then put back from outside) nor undoes it. A
// pre-image captured by linking a doomed file's inode would otherwise
// share the inode of a file that lives on (journal.Journal.Unshare).
// Failures are logged at warn: a lost note reports more conflicts at a
// rewind; a blob still sharing the inode fails its check after a later
// change of the file (reported unrecoverable, never restored wrong). It
// releases the directories the hook opened.
func (p *Pending) Abort() {
	if p == nil {
		return
	}
	defer p.release()
	if !p.ok {
		return
	}
	if len(p.rec.Pre) > 0 && (p.names[0].Doomed || len(p.names) > 1 && p.names[1].Doomed) {
		if err := p.h.cfg.Journal.Unshare(p.rec); err != nil {
			p.h.cfg.Logger.Warn("journal: a pre-image still shares its file's inode after a failed removal", "path", p.names[0].Rel, "err", err)
		}
	}
	if err := p.h.cfg.Journal.NoteFailed(p.session, p.rec.Seq); err != nil {
		p.h.cfg.Logger.Warn("journal: a failed change's note was lost: a rewind will report its names as conflicts", "path", p.names[0].Rel, "session", p.session, "err", err)
	}
}

// release releases the directories the hook opened, and a move's hold of
// Hook.moves.
func (p *Pending) release() {
	for _, done := range p.owned {
		done()
	}
	p.owned = nil
}
