package fusefs

// The mutation pipeline (docs/DESIGN.md#mutation-path).
//
// Every change the mount makes is one call of FS.mutate with a mutation:
// its subject (names, a descriptor, or an open handle), its kind
// (guarded, fresh, rewind), what to ask the guard, the journal op, and
// the backing operation. mutate runs the safety-critical sequence in one
// order for all of them: lock the identities and look again under the
// locks, decide (guard.Begin: one call), pin, journal, run the backing
// operation as the daemon's own change, tell the guard and credit
// (guard.Ticket.Done: one call).

import (
	"context"
	"log/slog"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/internal/journalhook"
)

// change is what a mutation did to the file at one of its names, as the
// guard is told once the backing operation has succeeded.
type change uint8

const (
	// unchanged: the file itself is not changed (a rename source; its
	// records follow it through mutName.to).
	unchanged change = iota
	// rewritten: the content changed (an O_TRUNC open, a write, an
	// exchange): guard.Rewritten.
	rewritten
	// truncated: a size change the daemon makes before the kernel's page
	// cache (truncate by path or through a descriptor, a rewind's
	// restore): guard.Rewritten, the guarded file is in flux
	// (fluxCounts.add) from before the decision to the note, and the
	// session is credited with the content it left.
	truncated
	// unlinked: the name was removed: guard.Unlinked.
	unlinked
	// replaced: another file was renamed over the name: guard.Replaced.
	replaced
)

// guard is c as the guard is told it.
func (c change) guard() guard.Change {
	switch c {
	case rewritten, truncated:
		return guard.Rewritten
	case unlinked:
		return guard.Unlinked
	case replaced:
		return guard.Replaced
	}
	return guard.Unchanged
}

// mutName is one name a mutation touches.
type mutName struct {
	rel    string // workspace-relative path
	change change // what the guard is told after success
	// to is the name the file's records follow it to (guard.Noted.To),
	// "" for none. names[0] with a to is a rename of names[0] to
	// names[1] (mutation.moves).
	to string
	// pin holds the file's inode until the guard has been told (pinIn):
	// for a name whose file may lose its last link.
	pin bool
	// dir is the directory node the request names rel in (a request by
	// parent and name), nil for none: the descriptor the change is made
	// through must be that directory (Node.isDirAt), or the mutation
	// fails with ESTALE before it (docs/DESIGN.md#dir-identity).
	dir *Node
}

// ask is one decision a mutation needs: the guard op on names[i]. It is
// asked only when that name is guarded and the guard decides for the
// caller (FS.guarded).
type ask struct {
	i  int
	op guard.Op
}

// mutKind is how a mutation is decided.
type mutKind uint8

const (
	// guarded: the identities of the guarded files at the subject are
	// locked, the guard decides each ask, and is told the change.
	guarded mutKind = iota
	// fresh: no name can be a guarded file whose identity must be locked
	// (the op makes a new name and fails on an existing one, or changes
	// no guarded content: mkdir, mknod, symlink, link, rmdir, chmod, an
	// O_EXCL create): nothing is locked, asked or told.
	fresh
	// rewind: a rewind's step: locked and told as guarded, never asked
	// (the rewind's conflict rule decided); by is the session's caller.
	rewind
)

// reach is how a mutation reaches the file at its subject's first name.
type reach uint8

const (
	// byName: every name by its path, through its parent directory.
	byName reach = iota
	// byFd: names[0]'s file through subject.fd, not by its name, which
	// is gone (truncate(2) of the /proc/PID/fd link of a file unlinked
	// while open): the identity and the stat decided on come from the
	// descriptor, and no name is bracketed for the watcher (the name may
	// lead to another file by now, whose external change must not be
	// taken for ours). names[0].rel is for display and exemption.
	byFd
	// byHandle: names[0]'s file through the open handle subject.h (a
	// write, fallocate, ftruncate, copy_file_range into it): the handle
	// asks at its first change and again only after another session
	// changed the file (File.mutate).
	byHandle
)

// subject is what a mutation changes: names, a descriptor, or a handle.
type subject struct {
	names []mutName
	via   reach
	fd    int   // byFd: the descriptor
	h     *File // byHandle: the handle
}

// onFd is the subject names[0] (rel) reached through fd.
func onFd(rel string, fd int) subject {
	return subject{names: []mutName{{rel: rel, change: truncated}}, via: byFd, fd: fd}
}

// onHandle is the subject of a change through h.
func onHandle(h *File) subject {
	return subject{names: []mutName{{rel: h.node.rel(), change: rewritten}}, via: byHandle, h: h}
}

// mutation is one change through the mount, for FS.mutate.
type mutation struct {
	kind mutKind
	subject
	// asks are asked in this order; the first refusal is returned.
	asks []ask
	// was is names[0] as the caller found it before the locks: when the
	// name is no longer a guarded file under the lock, the mutation is
	// still asked about and noted on it (an O_TRUNC open decides on the
	// file it looked up).
	was *guardedChild
	// by is the caller when already resolved; nil: resolved from the
	// request's context, and only when a name is guarded or journaled.
	by *caller
	// run is the backing operation, given the parent directory of each
	// name as the lock step resolved it for the decision
	// (guardedChild.at; fd < 0 for a name it did not resolve, which the
	// operation resolves itself): the change is made in the directory
	// decided on, without resolving it again.
	run func(at []dirFd) syscall.Errno
	// then runs after a successful run, under the locks, before the
	// guard is told: names[0] as locked.
	then func(first guardedChild)
	// jop is the journal op the mutation records (journal.Record: path
	// names[0], path2 names[1]), jTimes for one only noted after it
	// (journalNote), "" for none (docs/DESIGN.md#journal-hook).
	jop string
}

// moves reports whether m renames names[0] to names[1] (bracketed with
// ownMove so the watcher follows a moved directory).
func (m *mutation) moves() bool {
	return m.via == byName && len(m.names) == 2 && m.names[0].to != ""
}

// mutate runs m (mutation.apply) and returns its errno.
func (f *FS) mutate(ctx context.Context, m mutation) syscall.Errno {
	_, errno := m.apply(ctx, f)
	return errno
}

// apply runs m, one change through f, in this order
// (docs/DESIGN.md#mutation-path):
//
//  1. answer each name's policy once (policyOf), shared mode once;
//  2. lock the identities of the guarded files at m's subject, look at
//     them again under the locks (and the cross-mount lock on a shared
//     mount), resolve the caller, put truncated names in flux, and ask
//     the guard each of m.asks whose name is guarded, when it decides
//     for the caller (guard.Begin, the guard's first call): a refusal is
//     returned (EACCES, the configured errno, or EAGAIN for
//     sessions.Unknown) and nothing changes;
//  3. pin the guarded names marked pin;
//  4. open the daemon's own-change bracket of every name (ownChange,
//     ownMove for a rename) and, with the journal on and a journaled
//     name, record the change durably before it (a failure refuses it
//     with EIO);
//  5. run the backing operation, unshare a linked pre-image after a
//     failure, end the bracket; its errno is returned as is;
//  6. after a success: the journal notes the after-states, this mount's
//     own stat is noted (noteOwnAfter), m.then runs, the flux ends, and
//     the guard is told each guarded name's change and credits a
//     truncating session (guard.Ticket.Done, the guard's second call,
//     which unlocks);
//  7. unpin, drop the cross-mount lock.
//
// Names that are not guarded (absent, not regular, exempt, guard off) are
// only bracketed for the watcher. seq is the mutation sequence the guard
// gave names[0]'s change (0 when none). Errors besides those: the errno
// of fstat(2) of the subject's descriptor, EAGAIN from the cross-mount
// lock. Safe for concurrent use.
func (m mutation) apply(ctx context.Context, f *FS) (uint64, syscall.Errno) {
	var pbuf [2]policy // a rename's two names need no allocation
	pols := m.policies(f, pbuf[:0])
	journaled := m.via == byName && m.jop != "" && anyJournals(pols)
	lk := &locked{f: f, m: &m, ctx: ctx}
	defer lk.release()
	if errno := lk.begin(pols); errno != 0 {
		return 0, errno
	}
	if lk.anyGuarded() || journaled {
		lk.who()
	}
	for i, nm := range m.names {
		if g := &lk.gs[i]; nm.pin && g.ok && g.inDir {
			defer pinIn(g.at, g.leaf, &f.unpins)() // until the guard is told
		}
	}
	if m.kind == fresh {
		f.oc.settleDeferred(m.rels()...) // ownattr.go: before the change sets a ctime
	}
	end := m.ownBracket(f, lk.gs) // before the journal's link of a doomed file: docs/DESIGN.md#own-bracket-journal
	jp, errno := (*journalhook.Pending)(nil), syscall.Errno(0)
	if journaled && m.jop != jTimes {
		jp, errno = journalRecord(f.jh, &m, lk.gs, lk.c.session) // journal_hook.go; Commit or Abort releases it
	} else if m.via == byHandle {
		errno = m.h.hj.Change(m.jop, m.names[0].rel) // its first change (journalhook.Handle)
	}
	if errno != 0 {
		end(false)
		return 0, errno
	}
	at := m.dirs(lk.gs, jp)
	if errno := m.checkJournalDirs(at, lk.gs); errno != 0 {
		jp.Abort()
		end(false)
		return 0, errno
	}
	if errno := m.run(at); errno != 0 {
		jp.Abort()
		end(false)
		return 0, errno
	}
	end(true)
	jp.Commit()
	if m.moves() && m.jop != jExchange {
		m.carryHash(f, lk.gs)
	}
	if journaled && m.jop == jTimes {
		journalNote(f.jh, &m, lk.gs, lk.c.session)
	}
	if m.via != byHandle {
		m.noteOwnAfter(f, lk.gs) // crossmount_step.go (a handle notes its own: File.noteOwnStat)
	}
	if m.then != nil {
		m.then(lk.gs[0])
	}
	return lk.done(m.notes(lk.gs), m.credit(f, lk.gs)), 0
}

// carryHash tells the guard the stat a rename of the guarded file
// names[0] over the guarded file names[1] left it with, taken through
// the destination's directory under the locks (Guard.RenamedOwn): the
// hash cached for the file before the rename then serves after it. Only
// where the destination was a guarded file found in its directory (the
// rename over a file of an editor's or `sed -i`'s save).
func (m *mutation) carryHash(f *FS, gs []guardedChild) {
	src, dst := &gs[0], &gs[1]
	if !src.ok || !dst.inDir || !f.cfg.Guard.CarriesHashes() {
		return
	}
	var st syscall.Stat_t
	if f.cross.StatView(dst.at.FD, dst.leaf, unix.AT_SYMLINK_NOFOLLOW, &st) != nil || st.Ino != src.st.Ino || uint64(st.Dev) != src.id.Dev {
		return
	}
	f.cfg.Guard.RenamedOwn(guard.StatOf(&src.st), guard.StatOf(&st))
}

// rels is the names' paths.
func (m *mutation) rels() []string {
	rels := make([]string, len(m.names))
	for i, nm := range m.names {
		rels[i] = nm.rel
	}
	return rels
}

// policies appends to ps the policy of each of m's names, shared mode
// asked once (a handle's was answered at its open: only the journal's
// flag is asked again, by journalhook.Handle.Change).
func (m *mutation) policies(f *FS, ps []policy) []policy {
	if m.via == byHandle {
		return append(ps, policy{tracks: m.h.track})
	}
	isDir, shared := m.jop == jMkdir || m.jop == jRmdir, f.cross.Shared() // shared: asked once
	for _, nm := range m.names {
		ps = append(ps, f.policyOf(nm.rel, isDir, shared))
	}
	return ps
}

// anyJournals reports whether any name is journaled (a file renamed from
// an ignored temporary name over a tracked one changes the tracked one).
func anyJournals(ps []policy) bool {
	for _, p := range ps {
		if p.journals {
			return true
		}
	}
	return false
}

// notes is what the guard is told of the guarded names after a success.
func (m *mutation) notes(gs []guardedChild) []guard.Noted {
	var ns []guard.Noted
	for i, nm := range m.names {
		if gs[i].ok {
			ns = append(ns, guard.Noted{ID: gs[i].id, Change: nm.change.guard(), Nlink: gs[i].st.Nlink, To: nm.to})
		}
	}
	return ns
}

// credit is the content a truncated guarded names[0] now has, to credit
// the session with; nil for none, or when it cannot be stat'ed.
func (m *mutation) credit(f *FS, gs []guardedChild) *guard.Credit {
	if m.names[0].change != truncated || !gs[0].ok {
		return nil
	}
	if t, ok := m.current(f); ok {
		return &guard.Credit{Target: t}
	}
	return nil
}

// target is the guard's view of the locked file g: read by its name, or
// through the subject's descriptor.
func (m *mutation) target(f *FS, g *guardedChild) guard.Target {
	switch {
	case m.via == byFd:
		return fdTargetOf(g.rel, m.fd, &g.st)
	case g.inDir:
		d, leaf := g.at, g.leaf
		t := f.target(g.rel, &g.st)
		t.Open = func() (*os.File, error) { return openForHashIn(d, leaf, g.rel, f.cross.HashFlags()) }
		return t
	}
	return f.target(g.rel, &g.st)
}

// current is the guard's view of names[0]'s file as the mutation left it,
// for crediting; ok is false when it cannot be stat'ed.
func (m *mutation) current(f *FS) (guard.Target, bool) {
	rel := m.names[0].rel
	if m.via == byFd {
		t, err := fdTarget(rel, m.fd)
		return t, err == nil
	}
	var st syscall.Stat_t
	if f.bk.lstatRel(rel, &st) != 0 {
		return guard.Target{}, false
	}
	return f.target(rel, &st), true
}

// dirs is each name's parent descriptor for the backing operation: the
// lock step's, else the journal's (borrowed, as it captured the name
// there), else noDir.
func (m *mutation) dirs(gs []guardedChild, jp *journalhook.Pending) []dirFd {
	at := make([]dirFd, len(gs))
	for i := range gs {
		if at[i] = (dirFd{FD: jp.Dir(i)}); gs[i].inDir {
			at[i] = gs[i].at
		}
	}
	return at
}

// checkDirs checks each parent descriptor of dirs (fd >= 0: one the
// mutation resolved) against the directory its name was named in
// (mutName.dir): ESTALE when one is another directory (Node.isDirAt).
// The lock step checks its own (locked.begin) before anything is decided;
// the journal's are checked before the run (checkJournalDirs); one the
// run opens itself is checked where it is opened (Node.inDir).
func (m *mutation) checkDirs(dirs []dirFd) syscall.Errno {
	for i, nm := range m.names {
		if nm.dir == nil || dirs[i].FD < 0 || i > 0 && dirs[i].FD == dirs[i-1].FD && m.names[i-1].dir == nm.dir {
			continue
		}
		if errno := nm.dir.isDirAt(dirs[i]); errno != 0 {
			return errno
		}
	}
	return 0
}

// checkJournalDirs is checkDirs of the descriptors of at that the lock
// step did not resolve (and check): those the journal captured the names
// through.
func (m *mutation) checkJournalDirs(at []dirFd, gs []guardedChild) syscall.Errno {
	for i := range at {
		if !gs[i].inDir && at[i].FD >= 0 {
			return m.checkDirs(at)
		}
	}
	return 0
}

// ownBracket opens the daemon's own-change bracket of every name
// (ownChange; ownMove for a rename, told whether it moved) and returns its
// end, to call once with whether the backing operation succeeded. A
// mutation through a descriptor is not bracketed.
func (m *mutation) ownBracket(f *FS, gs []guardedChild) (end func(ok bool)) {
	switch {
	case m.via == byFd:
		return func(bool) {}
	case m.moves():
		// A guarded name is a regular file under its identity lock: what
		// the move leaves at each name needs no lstat to be told from a
		// directory (ignore.Policy.Moved).
		exchange := m.jop == jExchange
		k := ignore.MoveKinds{Rename: !exchange, ToFile: gs[0].ok, FromFile: exchange && gs[1].ok}
		return f.oc.ownMove(m.names[0].rel, m.names[1].rel, k)
	}
	e := f.oc.ownChange(m.rels()...)
	return func(bool) { e() }
}

// creditWrite credits session with t's content as its own change
// (Guard.NoteWriteHashed), after a write of its own through a handle
// (what names it in the log). h is the content's hash when the caller
// hashed the bytes as they were written (guard.WriteHash); the zero Hash
// reads the file back. A failure is logged (creditFailed).
func (f *FS) creditWrite(session string, t guard.Target, what string, h guard.Hash) {
	creditFailed(f.log, session, t.Path, what, f.cfg.Guard.NoteWriteHashed(session, t, h))
}

// creditFailed logs at warn a failed credit (err non-nil: the content
// could not be hashed): the session's record stays stale and it must
// read the file again.
func creditFailed(log *slog.Logger, session, rel, what string, err error) {
	if err != nil {
		log.Warn("crediting an own "+what+" failed: the session must read the file again", "path", rel, "session", session, "err", err)
	}
}
