package fusefs

// The guarded mutation path (docs/DESIGN.md#mutation-path).
//
// Every change of an existing guarded file by name (an O_TRUNC open, a
// truncate by path, unlink, rename over, RENAME_EXCHANGE) is one call of
// FS.mutate with a mutation: the names it touches, what to ask the guard,
// the backing operation, and what each name's file went through. mutate
// runs the safety-critical sequence in one order for all of them: lock the
// identities and take them fresh, ask the guard, pin, run the backing
// operation as the daemon's own change, tell the guard, credit.
//
// Changes through an open handle (write, fallocate, ftruncate,
// copy_file_range into it: File.mutate) keep the handle's own path, since
// the handle decides once and keeps its right, but share the steps after
// the decision with mutate: noteChange tells the guard, creditWrite credits
// the session. A truncate through the descriptor of a file unlinked while
// open (Node.truncateFd) is an FS.mutate call too (mutation.viaFd). A
// per-session journal or a metric of guarded mutations hooks into
// FS.decide, noteChange and creditWrite.

import (
	"context"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/journalhook"
)

// change is what a mutation did to the file at one of its names, as the
// guard is told once the backing operation has succeeded (noteChange).
type change uint8

const (
	// unchanged: the file itself is not changed (a rename source; its
	// records follow it through mutName.to).
	unchanged change = iota
	// rewritten: the content changed (an O_TRUNC open, a truncate, a
	// write, an exchange): Guard.NoteMutation.
	rewritten
	// unlinked: the name was removed: Guard.NoteLastNameGone when it was
	// the file's last link, else Guard.NoteMutation.
	unlinked
	// replaced: another file was renamed over the name:
	// Guard.NoteLastNameGone when it was the file's last link, else
	// nothing (the file lives on, unchanged, under its other names).
	replaced
)

// mutName is one name a mutation touches.
type mutName struct {
	rel    string // workspace-relative path
	change change // what the guard is told after success
	// to is the name the file's records follow it to (Guard.Rename), ""
	// for none.
	to string
	// pin holds the file's inode until the guard has been told (pinInode):
	// for a name whose file may lose its last link.
	pin bool
}

// ask is one decision a mutation needs: the guard op on names[i]. It is
// asked only when that name is guarded and the guard decides for the
// caller (FS.guarded).
type ask struct {
	i  int
	op guard.Op
}

// mutation is one guarded change by name, for FS.mutate.
type mutation struct {
	names []mutName
	// asks are asked in this order; the first refusal is returned.
	asks []ask
	// move: names[0] is renamed to names[1], bracketed with ownMove so the
	// watcher follows a moved directory.
	move bool
	// flux: a daemon-first size change (truncate by path): the guarded
	// names are in flux (FS.flux) from before the decision to the end.
	flux bool
	// credit: credit the caller's session with the content of names[0]
	// afterwards (creditWrite), when it is guarded.
	credit bool
	// was is names[0] as the caller found it before the locks: when the
	// name is no longer a guarded file under the lock, the mutation is
	// still asked about and noted on it (an O_TRUNC open decides on the
	// file it looked up).
	was *guardedChild
	// viaFd: names[0]'s file is reached through fd, not by its name,
	// which is gone (truncate(2) of the /proc/PID/fd link of a file
	// unlinked while open): the identity and the stat decided on come
	// from the descriptor, and no name is bracketed for the watcher (the
	// name may lead to another file by now, whose external change must
	// not be taken for ours). names[0].rel is for display and exemption.
	viaFd bool
	fd    int
	// by is the caller when already resolved; nil: resolved from the
	// request's context, and only when a name is guarded.
	by *caller
	// run is the backing operation.
	run func() syscall.Errno
	// runIn, when set, is the backing operation instead of run, given the
	// parent directory of each name as lockFresh resolved it for the
	// decision (guardedChild.at; fd < 0 for a name it did not resolve,
	// which the operation resolves itself): the change is made in the
	// directory decided on, without resolving it again.
	runIn func(at []dirFd) syscall.Errno
	// done runs after a successful run, under the locks, once the guard
	// has been told: names[0] as locked and the mutation sequence its
	// note returned (0 when none).
	done func(first guardedChild, seq uint64)
	// jop is the journal op the mutation records (journal.Record: path
	// names[0], path2 names[1]), "" for none (docs/DESIGN.md#journal-hook).
	jop string
	// fresh: no name can be a guarded file whose identity must be locked
	// (the op makes a new name and fails on an existing one, or changes
	// no guarded content: mkdir, mknod, symlink, link, rmdir, chmod, an
	// O_EXCL create): the lock step is skipped.
	fresh bool
	// noAsk: the guard is not asked (a rewind's step, which the conflict
	// rule decides instead); by is then the session's synthetic caller.
	noAsk bool
}

// mutate runs m, one guarded mutation by name, in this order
// (docs/DESIGN.md#mutation-path):
//
//  1. lock the identities of the guarded files at m's names and stat them
//     again under the locks (lock): the guard decides on what is locked,
//     never on an older stat;
//  2. when a name is guarded, resolve the caller; with m.flux put the
//     guarded names in flux;
//  3. ask the guard each of m.asks whose name is guarded, when it decides
//     for the caller: a refusal is returned (EACCES, the configured errno,
//     or EAGAIN for sessions.Unknown: FS.decide) and nothing changes;
//  4. pin the guarded names marked pin, and take the deferred read hashes
//     of the names' files still pending (settleDeferredOf);
//  5. run the backing operation as the daemon's own change of every name
//     (ownChange, ownMove for a rename); its errno is returned as is;
//  6. after a success: the guarded names' records follow them
//     (Guard.Rename), each guarded name's change is told (noteChange), the
//     session is credited (m.credit), and m.done runs;
//  7. unpin, end the flux, unlock.
//
// Names that are not guarded (absent, not regular, exempt, guard off) are
// only bracketed for the watcher. Errors besides those: the errno of
// fstat(2) of m.fd. Safe for concurrent use.
func (f *FS) mutate(ctx context.Context, m mutation) syscall.Errno {
	gs, unlock, errno := m.lockCross(f) // crossmount_step.go
	if errno != 0 {
		return errno
	}
	defer unlock()
	var c caller
	anyGuarded := false
	for _, g := range gs {
		anyGuarded = anyGuarded || g.ok
	}
	journaled := journalsAny(f.jh, &m)
	if anyGuarded || journaled {
		if m.by != nil {
			c = *m.by
		} else {
			c = f.callerOf(ctx)
		}
	}
	if m.flux {
		for _, g := range gs {
			if g.ok {
				f.flux.add(g.id, 1)
				defer f.flux.add(g.id, -1)
			}
		}
	}
	if anyGuarded && !m.noAsk && f.guarded(c) {
		for _, a := range m.asks {
			if g := gs[a.i]; g.ok {
				if errno := f.decide(c, a.op, m.target(f, &g)); errno != 0 {
					return errno
				}
			}
		}
	}
	for i, nm := range m.names {
		if nm.pin && gs[i].ok {
			defer f.pinInodeOf(&gs[i])() // until the guard is told (pinInode)
		}
	}
	f.oc.settleDeferredOf(&m, gs) // ownattr.go: before the change sets a ctime
	var jp *journalhook.Pending   // nil: not journaled
	if journaled {
		var errno syscall.Errno
		jp, errno = journalRecord(f.jh, &m, gs, c.session)
		defer jp.Close()
		if errno != 0 {
			return errno
		}
	}
	if errno := m.runOwn(f, gs); errno != 0 {
		jp.Abort()
		return errno
	}
	jp.Commit()
	for i, nm := range m.names {
		if gs[i].ok && nm.to != "" {
			f.cfg.Guard.RenameBy(gs[i].id, nm.to, c.session)
		}
	}
	m.noteOwnAfter(f, gs) // crossmount_step.go
	var seq uint64
	for i, nm := range m.names {
		if gs[i].ok {
			s := f.noteChange(gs[i].id, c.session, nm.change, gs[i].st.Nlink)
			if i == 0 {
				seq = s
			}
		}
	}
	if m.credit && gs[0].ok {
		if t, ok := m.current(f); ok {
			f.creditWrite(c.session, t, "truncate", guard.Hash{})
		}
	}
	if m.done != nil {
		m.done(gs[0], seq)
	}
	return 0
}

// lock is mutate's first step: it locks the identities of the guarded
// files at m's names and returns them as stat'ed under the locks
// (lockFresh; m.was stands in for a names[0] that is no longer a guarded
// file), with the unlock. With m.viaFd the one file is m.fd's: locked by
// the identity fstat gives, and stat'ed again under the lock.
func (f *FS) lock(m *mutation) ([]guardedChild, func(), syscall.Errno) {
	if m.fresh {
		gs := make([]guardedChild, len(m.names))
		for i, nm := range m.names {
			gs[i] = guardedChild{rel: nm.rel}
		}
		return gs, func() {}, 0
	}
	if !m.viaFd {
		rels := make([]string, len(m.names))
		for i, nm := range m.names {
			rels[i] = nm.rel
		}
		gs, unlock := f.lockFresh(rels...)
		if m.was != nil && !gs[0].ok {
			gs[0] = *m.was
		}
		return gs, unlock, 0
	}
	g := guardedChild{rel: m.names[0].rel}
	if !f.tracks(g.rel) {
		return []guardedChild{g}, func() {}, 0
	}
	if err := syscall.Fstat(m.fd, &g.st); err != nil {
		return nil, nil, fs.ToErrno(err)
	}
	if !regular(&g.st) {
		return []guardedChild{g}, func() {}, 0
	}
	g.ok, g.id = true, guard.StatOf(&g.st).ID
	unlock := f.cfg.Guard.Lock(g.id)
	if err := f.cross.FstatView(m.fd, &g.st); err != nil { // the stat decided on is taken under the lock
		unlock()
		return nil, nil, fs.ToErrno(err)
	}
	return []guardedChild{g}, unlock, 0
}

// target is the guard's view of the locked file g: read by its name, or
// through m.fd.
func (m *mutation) target(f *FS, g *guardedChild) guard.Target {
	if m.viaFd {
		return fdTargetOf(g.rel, m.fd, &g.st)
	}
	if g.inDir {
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
	if m.viaFd {
		t, err := fdTarget(rel, m.fd)
		return t, err == nil
	}
	var st syscall.Stat_t
	if f.bk.lstatRel(rel, &st) != 0 {
		return guard.Target{}, false
	}
	return f.target(rel, &st), true
}

// runOwn runs the backing operation (runIn with gs's parent descriptors,
// else run), bracketed as the daemon's own change of every name (a rename
// with ownMove, told whether it moved); a mutation through a descriptor
// is not bracketed.
func (m *mutation) runOwn(f *FS, gs []guardedChild) syscall.Errno {
	run := m.run
	if m.runIn != nil {
		run = func() syscall.Errno {
			at := make([]dirFd, len(gs))
			for i := range gs {
				at[i] = noDir
				if gs[i].inDir {
					at[i] = gs[i].at
				}
			}
			return m.runIn(at)
		}
	}
	switch {
	case m.viaFd:
		return run()
	case m.move:
		end := f.oc.ownMove(m.names[0].rel, m.names[1].rel)
		errno := run()
		end(errno == 0)
		return errno
	}
	rels := make([]string, len(m.names))
	for i, nm := range m.names {
		rels[i] = nm.rel
	}
	defer f.oc.ownChange(rels...)()
	return run()
}

// noteChange tells the guard that session changed id as ch says (nlink is
// the file's link count before the change) and returns the new mutation
// sequence (0 when nothing was noted). Called under id's identity lock,
// after the backing change succeeded, and before the file's inode may be
// freed (pinInode or an open handle holds it).
func (f *FS) noteChange(id guard.FileID, session string, ch change, nlink uint64) uint64 {
	g := f.cfg.Guard
	switch {
	case ch == rewritten, ch == unlinked && nlink > 1:
		return g.NoteMutation(id, session)
	case ch == unlinked, ch == replaced && nlink <= 1:
		g.NoteLastNameGone(id, session)
	}
	return 0
}

// creditWrite credits session with t's content as its own change
// (Guard.NoteWriteHashed), after a write or a truncate of its own (what
// names it in the log). h is the content's hash when the caller hashed the
// bytes as they were written (guard.WriteHash); the zero Hash reads the
// file back. A failure (the content could not be hashed) is logged at
// warn: the session's record stays stale and it must read the file again.
func (f *FS) creditWrite(session string, t guard.Target, what string, h guard.Hash) {
	if err := f.cfg.Guard.NoteWriteHashed(session, t, h); err != nil {
		f.log.Warn("crediting an own "+what+" failed: the session must read the file again", "path", t.Path, "session", session, "err", err)
	}
}

// guardedChild is a regular, non-exempt child about to be mutated.
type guardedChild struct {
	ok  bool // the guard applies: it exists, is regular and not exempt
	rel string
	st  syscall.Stat_t
	id  guard.FileID
	// at is the descriptor of rel's parent directory the child was
	// stat'ed in under its lock (lockFresh), and leaf its name there: the
	// decision hashes the file and the pin holds it through them, not by
	// resolving rel again. Borrowed from lockFresh until its unlock;
	// inDir is false when the child was not found through one (m.was,
	// viaFd, not guarded).
	at    dirFd
	leaf  string
	inDir bool
}

// noDir stands for a parent directory not resolved yet (parentDirs,
// mutation.runIn).
var noDir = dirFd{FD: -1}

// guardedIn stats leaf in d (rel's parent) and reports whether the guard
// applies to mutating rel; tracked is f.tracks(rel). A d whose fd is < 0
// (its parent could not be opened) finds nothing.
func (f *FS) guardedIn(d dirFd, leaf, rel string, tracked bool) guardedChild {
	if !tracked || d.FD < 0 {
		return guardedChild{rel: rel}
	}
	var st syscall.Stat_t
	if _, errno := statAt(d, leaf, &st); errno != 0 || !regular(&st) {
		return guardedChild{rel: rel}
	}
	return guardedChild{ok: true, rel: rel, st: st, id: guard.StatOf(&st).ID, at: d, leaf: leaf, inDir: true}
}

// parentDirs opens the parent directory of each tracked name of rels
// once (names in one directory share it) and returns the descriptors by
// name (fd < 0 for an untracked name or a parent that cannot be opened),
// the leaves, and the function that closes them.
func (f *FS) parentDirs(rels []string, tracked []bool) ([]dirFd, []string, func()) {
	dirs := make([]dirFd, len(rels))
	leaves := make([]string, len(rels))
	parents := make([]string, len(rels))
	var owned []dirFd
	for i, rel := range rels {
		dirs[i] = noDir
		if !tracked[i] || rel == "" {
			continue
		}
		dir, leaf := path.Split(rel)
		parents[i], leaves[i] = dir, leaf
		shared := false
		for j := 0; j < i; j++ {
			if tracked[j] && rels[j] != "" && parents[j] == dir {
				dirs[i], shared = dirs[j], true
				break
			}
		}
		if shared {
			continue
		}
		if d, errno := f.bk.openDir(strings.TrimSuffix(dir, "/")); errno == 0 {
			dirs[i] = d
			owned = append(owned, d)
		}
	}
	return dirs, leaves, func() {
		for _, d := range owned {
			d.Close()
		}
	}
}

// lockFresh locks the identities of the guarded files at rels and returns
// them as stat'ed again under the locks, with the unlock. A decision must
// use a stat taken under the lock: a mutation that slipped in between the
// first stat and the lock would otherwise be judged on a stale hash-cache
// key (and a lost update let through). When a name was replaced meanwhile
// (another identity), it unlocks and tries again. Each attempt resolves
// the names' parent directories once, and both stats of the attempt are
// taken in them (parentDirs); the returned children keep them (at) until
// the unlock (docs/DESIGN.md#mutation-parent-fd).
func (f *FS) lockFresh(rels ...string) ([]guardedChild, func()) {
	tracked := make([]bool, len(rels)) // exemption depends on the path only
	anyTracked := false
	for i, rel := range rels {
		tracked[i] = f.tracks(rel)
		anyTracked = anyTracked || tracked[i]
	}
	if !anyTracked { // the guard is off, or every name is exempt
		out := make([]guardedChild, len(rels))
		for i, rel := range rels {
			out[i] = guardedChild{rel: rel}
		}
		return out, func() {}
	}
	for attempt := 0; ; attempt++ {
		dirs, leaves, closeDirs := f.parentDirs(rels, tracked)
		probe := func() []guardedChild {
			out := make([]guardedChild, len(rels))
			for i, rel := range rels {
				out[i] = f.guardedIn(dirs[i], leaves[i], rel, tracked[i])
			}
			return out
		}
		before := probe()
		var ids []guard.FileID
		for _, g := range before {
			if g.ok {
				ids = append(ids, g.id)
			}
		}
		unlockIDs := f.lockAll(ids...)
		unlock := func() {
			unlockIDs()
			closeDirs()
		}
		after := probe()
		same := true
		for i := range after {
			if after[i].ok && (!before[i].ok || after[i].id != before[i].id) {
				same = false
			}
		}
		if same || attempt >= 16 {
			// After 16 replacements in a row, decide on what is locked:
			// a still-unlocked newcomer is treated as unguarded-absent.
			for i := range after {
				if after[i].ok && (!before[i].ok || after[i].id != before[i].id) {
					after[i].ok = false
				}
			}
			return after, unlock
		}
		unlock()
	}
}

// lockAll takes the identity locks of ids in a fixed order (no deadlock
// between two renames locking the same pair) and returns one unlock.
func (f *FS) lockAll(ids ...guard.FileID) func() {
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].Dev != ids[j].Dev {
			return ids[i].Dev < ids[j].Dev
		}
		return ids[i].Ino < ids[j].Ino
	})
	var unlocks []func()
	for i, id := range ids {
		if i > 0 && id == ids[i-1] {
			continue
		}
		unlocks = append(unlocks, f.cfg.Guard.Lock(id))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// pinInode opens the workspace path rel as an O_PATH descriptor (not
// following a final symlink) and returns the function that closes it. While
// it is open the inode cannot be freed, so its number cannot be reused by a
// new file: Unlink and Rename hold it until the guard has been told the
// name is gone (Guard.NoteLastNameGone), so that a file created meanwhile
// with the same inode number never has its fresh guard state dropped or
// marked as another session's mutation. When rel cannot be opened nothing is
// pinned (the removal will fail or find nothing to forget).
func (f *FS) pinInode(rel string) (unpin func()) {
	d, leaf, errno := f.bk.prepareAt(rel)
	if errno != 0 {
		return func() {}
	}
	defer d.Close()
	return pinIn(d, leaf)
}

// pinInodeOf is pinInode for a locked child, through the parent
// descriptor it was stat'ed in when it has one.
func (f *FS) pinInodeOf(g *guardedChild) (unpin func()) {
	if !g.inDir {
		return f.pinInode(g.rel)
	}
	return pinIn(g.at, g.leaf)
}

// pinIn opens leaf in d as an O_PATH descriptor (not following a
// symlink) and returns the function that closes it; nothing is pinned
// when it cannot be opened.
func pinIn(d dirFd, leaf string) (unpin func()) {
	fd, err := unix.Openat(d.FD, leaf, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return func() {}
	}
	return func() { unix.Close(fd) }
}
