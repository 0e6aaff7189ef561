package fusefs

// The lock step of the mutation pipeline (docs/DESIGN.md#mutation-path,
// #mutation-parent-fd): which identities to lock, what to look at again
// under the locks, and the one guard.Begin call that locks and decides.

import (
	"context"
	"path"
	"strings"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

// locked is one mutation's lock state, from mutation.apply's lock step to
// its release. Not safe for concurrent use: one request's goroutine.
type locked struct {
	f   *FS
	m   *mutation
	ctx context.Context
	// gs is each name as locked (guardedChild.ok: a guarded file whose
	// identity the ticket holds).
	gs []guardedChild
	// tk holds the identity locks (nil: nothing locked).
	tk *guard.Ticket
	// shared is policy.shared, asked once per mutation (docs/DESIGN.md#path-policy).
	shared bool
	// c is the caller once resolved (haveC).
	c     caller
	haveC bool
	// fluxed are the identities put in flux (truncated names).
	fluxed []guard.FileID
	// unlockX drops the cross-mount locks; closeDirs the parent
	// descriptors of the last attempt.
	unlockX, closeDirs func()
}

// who resolves the caller once: m.by, else from the request's context.
func (l *locked) who() caller {
	if !l.haveC {
		if l.m.by != nil {
			l.c = *l.m.by
		} else {
			l.c = l.f.callerOf(l.ctx)
		}
		l.haveC = true
	}
	return l.c
}

// anyGuarded reports whether a name is a guarded file under its lock.
func (l *locked) anyGuarded() bool {
	for _, g := range l.gs {
		if g.ok {
			return true
		}
	}
	return false
}

// done tells the guard what the change did, credits, and unlocks
// (guard.Ticket.Done), after ending the flux; with nil notes (a refused
// or failed change) it only unlocks. It returns names[0]'s mutation
// sequence (0 when none).
func (l *locked) done(notes []guard.Noted, credit *guard.Credit) uint64 {
	l.endFlux()
	if l.tk == nil {
		return 0
	}
	tk := l.tk
	l.tk = nil
	seq, err := tk.Done(l.c.session, notes, credit)
	if credit != nil {
		creditFailed(l.f.log, l.c.session, credit.Target.Path, "truncate", err)
	}
	if len(l.gs) == 0 || !l.gs[0].ok {
		return 0
	}
	return seq
}

// endFlux ends the flux of the truncated names.
func (l *locked) endFlux() {
	for _, id := range l.fluxed {
		l.f.flux.add(id, -1)
	}
	l.fluxed = nil
}

// release drops whatever the mutation still holds, in this order: the
// flux, the cross-mount locks, the identity locks when the guard was not
// told (a refused or failed change: guard.Ticket.Done with no notes), the
// parent descriptors.
func (l *locked) release() {
	l.endFlux()
	if l.unlockX != nil {
		l.unlockX()
	}
	l.done(nil, nil)
	if l.closeDirs != nil {
		l.closeDirs()
	}
}

// begin is the lock step: it finds the guarded files of the subject,
// resolves the caller when it found one (before the locks), and hands
// them to the guard (guard.Begin), which locks them, has look
// check them again under the locks, and decides. Errors: the decision's
// errno, EAGAIN from the cross-mount lock, fstat(2)'s of a descriptor.
func (l *locked) begin(pols []policy) syscall.Errno {
	m := l.m
	l.gs = make([]guardedChild, len(m.names))
	l.shared = len(pols) > 0 && pols[0].shared
	for i, nm := range m.names {
		l.gs[i] = guardedChild{rel: nm.rel}
	}
	switch {
	case m.kind == fresh:
		return 0
	case m.via == byHandle:
		return l.beginHandle()
	case m.via == byFd:
		return l.beginFd(pols[0])
	}
	tracked := make([]bool, len(m.names)) // exemption depends on the path only
	anyTracked := false
	for i, p := range pols {
		tracked[i] = p.tracks
		anyTracked = anyTracked || p.tracks
	}
	if !anyTracked && m.was == nil { // the guard is off, or every name is exempt
		return 0
	}
	rels := m.rels()
	for attempt := 0; ; attempt++ {
		dirs, leaves, closeDirs := l.parentDirs(rels, tracked)
		l.closeDirs = closeDirs
		if errno := m.checkDirs(dirs); errno != 0 {
			return errno // before any decision on what another directory holds
		}
		probe := func() []guardedChild {
			out := make([]guardedChild, len(rels))
			for i, rel := range rels {
				out[i] = l.guardedIn(dirs[i], leaves[i], rel, tracked[i])
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
		if len(ids) > 0 || m.was != nil {
			l.who() // before the locks: a bounded /proc read is not waited on under them
		}
		tk, errno := l.plan(guard.Plan{IDs: ids, Under: func() guard.Look {
			after := probe()
			same := true
			for i := range after {
				if after[i].ok && (!before[i].ok || after[i].id != before[i].id) {
					same = false
					if attempt >= 16 {
						// After 16 replacements in a row, decide on what is
						// locked: a still-unlocked newcomer is treated as
						// unguarded-absent.
						after[i].ok = false
					}
				}
			}
			if !same && attempt < 16 {
				return guard.Look{Again: true}
			}
			if m.was != nil && !after[0].ok {
				after[0] = *m.was
			}
			l.gs = after
			return l.look(attempt)
		}})
		if tk.Again {
			closeDirs()
			l.closeDirs = nil
			continue
		}
		l.tk = tk
		return errno
	}
}

// beginFd is begin for a subject reached through its descriptor: the
// file is locked by the identity fstat gives, and stat'ed again under the
// lock.
func (l *locked) beginFd(p policy) syscall.Errno {
	f, g := l.f, &l.gs[0]
	if !p.tracks {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(l.m.fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	if !regular(&st) {
		return 0
	}
	id := guard.FileID{Dev: uint64(st.Dev), Ino: st.Ino}
	l.who() // before the lock, as begin
	for attempt := 0; ; attempt++ {
		tk, errno := l.plan(guard.Plan{IDs: []guard.FileID{id}, Under: func() guard.Look {
			*g = guardedChild{ok: true, rel: g.rel, id: id}
			if err := f.cross.FstatView(l.m.fd, &g.st); err != nil { // the stat decided on is taken under the lock
				return guard.Look{Errno: fs.ToErrno(err)}
			}
			return l.look(attempt)
		}})
		if tk.Again {
			continue
		}
		l.tk = tk
		return errno
	}
}

// beginHandle is begin for a change through an open handle: its file's
// identity is locked, with the cross-mount lock through the handle's own
// descriptor (File.crossLock), and the guard asks only when the handle
// holds no right, or another session changed the file since its last
// change (the handle then loses its right: its session's record is
// stale, and the file is not half-overwritten).
func (l *locked) beginHandle() syscall.Errno {
	h, f := l.m.h, l.f
	l.c, l.haveC = h.who, true
	if !h.track {
		return 0
	}
	gop := l.m.asks[0].op
	asked := false
	tk, errno := l.plan(guard.Plan{IDs: []guard.FileID{h.id}, Under: func() guard.Look {
		unlockX, errno := h.crossLock() // ownstat.go
		if errno != 0 {
			return guard.Look{Errno: errno}
		}
		l.unlockX = unlockX
		l.gs[0] = guardedChild{ok: true, rel: l.gs[0].rel, id: h.id}
		last := h.adoptLateExternal(f.cfg.Guard.LastMutation(h.id))
		if gop != guard.OpWrite {
			h.wh.Break() // only plain writes are hashed as they pass
		} else if last.Seq != h.seq {
			h.wh.Interleaved() // someone changed the file since this handle's last change
		}
		var lk guard.Look
		if h.check && (!h.granted || (last.Seq != h.seq && last.Session != h.who.session)) {
			asked = true
			var err error
			h.fd(func(fd int) syscall.Errno {
				var t guard.Target
				if t, err = fdTarget(l.m.names[0].rel, fd); err == nil {
					lk.Who = h.who.asker(f)
					lk.Asks = []guard.Ask{{Op: gop, Target: t}}
				}
				return 0
			})
			if err != nil {
				return guard.Look{Errno: fs.ToErrno(err)}
			}
		}
		return lk
	}})
	l.tk = tk
	if asked {
		h.granted = errno == 0
	}
	return errno
}

// look is what the pipeline finds under the identity locks of l.gs: on a
// shared mount the cross-mount locks and a stat under them (crossHold;
// Again when a name's identity changed, before the 16th attempt), then
// the caller, the flux of truncated names, the decisions to make, and
// the files whose deferred hashes to take.
func (l *locked) look(attempt int) guard.Look {
	m, f := l.m, l.f
	if l.shared {
		unlockX, again, errno := l.crossHold(attempt)
		if errno != 0 {
			return guard.Look{Errno: errno}
		}
		if again {
			return guard.Look{Again: true}
		}
		l.unlockX = unlockX
	}
	if errno := l.movedOutWhole(); errno != 0 {
		return guard.Look{Errno: errno}
	}
	var lk guard.Look
	if !l.anyGuarded() {
		return lk
	}
	c := l.who()
	ts := make([]guard.Target, len(l.gs)) // each locked name's target, built once
	for i, g := range l.gs {
		if !g.ok {
			continue
		}
		if m.names[i].change == truncated {
			f.flux.add(g.id, 1)
			l.fluxed = append(l.fluxed, g.id)
		}
		ts[i] = m.target(f, &l.gs[i])
		lk.Settle = append(lk.Settle, ts[i])
	}
	if m.kind == guarded && f.guarded(c) {
		lk.Who = c.asker(f)
		for _, a := range m.asks {
			if l.gs[a.i].ok {
				lk.Asks = append(lk.Asks, guard.Ask{Op: a.op, Target: ts[a.i]})
			}
		}
	}
	return lk
}

// movedOutWhole checks, under the locks, the file a move to an exempt name
// or into a tool tree asks about (guard.OpMoveExempt,
// docs/DESIGN.md#exempt-widening, #tool-trees): it must
// still be a regular file the guard covers, and have no other name. A name
// found holding something else (a peer mount replaced it since the kernel
// looked it up), or a file with other links (an exempt name for it would
// alias a guarded one: `ln x.c .x; mv .x gen/`), is refused with EXDEV
// (guard.Guard.RefuseExemptName, or RefuseToolTree when the new name is
// not exempt), as a directory's move or a link is.
func (l *locked) movedOutWhole() syscall.Errno {
	m, f := l.m, l.f
	for _, a := range m.asks {
		if a.op != guard.OpMoveExempt {
			continue
		}
		g := &l.gs[a.i]
		op := guard.OpMoveExempt
		switch {
		case !g.ok:
		case g.st.Nlink > 1:
			op = guard.OpLinkExempt
		default:
			continue
		}
		refuse := f.cfg.Guard.RefuseExemptName
		if !f.exempt(m.names[a.i].to, false) {
			refuse = f.cfg.Guard.RefuseToolTree // into a tool tree (toolname.go)
		}
		if errno := refuse(l.who().asker(f), op, m.names[a.i].rel, m.names[a.i].to); errno != 0 {
			return errno
		}
	}
	return 0
}

// plan is guard.Begin, counting the warnings and refusals of its
// decisions for the metrics.
func (l *locked) plan(p guard.Plan) (*guard.Ticket, syscall.Errno) {
	tk, errno := l.f.cfg.Guard.Begin(p)
	l.f.counters.decided(tk.Warned, tk.Denied)
	return tk, errno
}

// crossHold takes the cross-mount lock of every guarded name of gs
// (crossmount.Mode.LockAll), and stats each of them again under it: another mount may
// have changed a file between the identity lock's stat and the
// cross-mount lock, and the guard must decide on the stat taken under
// both locks (a hash-cache hit on the older stat would vouch for bytes
// that are gone). When a name's identity changed meanwhile, the
// cross-mount locks are dropped and again is true (from the 16th attempt
// on, the newcomer is treated as unguarded instead, as the identity lock
// step does). Errors: EAGAIN from the cross-mount lock.
func (l *locked) crossHold(attempt int) (unlock func(), again bool, errno syscall.Errno) {
	f, m, gs := l.f, l.m, l.gs
	unlockX, errno := f.cross.LockAll(m.crossTargets(f, gs))
	if errno != 0 {
		return nil, false, errno
	}
	same := true
	for i := range gs {
		if !gs[i].ok {
			continue
		}
		var st syscall.Stat_t
		if err := m.restat(f, &gs[i], &st); err != nil || st.Ino != gs[i].st.Ino || uint64(st.Dev) != gs[i].id.Dev {
			same = false
			if attempt >= 16 {
				gs[i].ok = false
			}
			continue
		}
		gs[i].st = st
		f.cross.NoteUnseen(gs[i].id, guard.StatOf(&st))
	}
	if !same && attempt < 16 {
		unlockX()
		return nil, true, 0
	}
	return unlockX, false, 0
}

// guardedChild is a regular, non-exempt child about to be mutated.
type guardedChild struct {
	ok  bool // the guard applies: it exists, is regular and not exempt
	rel string
	st  syscall.Stat_t
	id  guard.FileID
	// at is the descriptor of rel's parent directory the child was
	// stat'ed in under its lock (locked.begin), and leaf its name there:
	// the decision hashes the file and the pin holds it through them, not
	// by resolving rel again. Borrowed from the lock step until its
	// release; inDir is false when the child was not found through one
	// (mutation.was, byFd, byHandle, not guarded).
	at    dirFd
	leaf  string
	inDir bool
}

// noDir stands for a parent directory not resolved yet (parentDirs,
// mutation.run).
var noDir = dirFd{FD: -1}

// guardedIn stats leaf in d (rel's parent) and reports whether the guard
// applies to mutating rel; tracked is policy.tracks of rel. A d whose fd
// is < 0 (its parent could not be opened) finds nothing.
func (l *locked) guardedIn(d dirFd, leaf, rel string, tracked bool) guardedChild {
	if !tracked || d.FD < 0 {
		return guardedChild{rel: rel}
	}
	var st syscall.Stat_t // unix.Stat_t is the same kernel struct stat (as crossmount.Mode.StatView)
	if unix.Fstatat(d.FD, leaf, (*unix.Stat_t)(unsafe.Pointer(&st)), unix.AT_SYMLINK_NOFOLLOW) != nil || !regular(&st) {
		return guardedChild{rel: rel}
	}
	return guardedChild{ok: true, rel: rel, st: st, id: guard.FileID{Dev: uint64(st.Dev), Ino: st.Ino}, at: d, leaf: leaf, inDir: true}
}

// parentDirs opens the parent directory of each tracked name of rels
// once (names in one directory share it) and returns the descriptors by
// name (fd < 0 for an untracked name or a parent that cannot be opened),
// the leaves, and the function that closes them.
func (l *locked) parentDirs(rels []string, tracked []bool) ([]dirFd, []string, func()) {
	dirs := make([]dirFd, len(rels))
	leaves := make([]string, len(rels))
	parents := make([]string, len(rels))
	var owned []int // opened here (not the root)
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
		if d, errno := l.f.bk.openDir(strings.TrimSuffix(dir, "/")); errno == 0 {
			dirs[i] = d
			if d.Own {
				owned = append(owned, d.FD)
			}
		}
	}
	return dirs, leaves, func() {
		for _, fd := range owned {
			unix.Close(fd)
		}
	}
}

// pinIn opens leaf in d as an O_PATH descriptor (not following a
// symlink) and returns the function that closes it. While it is open the
// inode cannot be freed, so its number cannot be reused by a new file:
// Unlink and Rename pin a guarded name (mutName.pin, always reached by
// name and stat'ed in its parent, guardedChild.at) until the guard has
// been told the name is gone (guard.Ticket.Done), so that a file created
// meanwhile with the same inode number never has its fresh guard state
// dropped or marked as another session's mutation. Nothing is pinned when
// leaf cannot be opened (the removal will fail or find nothing to forget).
// unpin closes the descriptor, or, when the file has no link left (its
// close may free it), hands it to lc, which closes it after the reply
// (docs/DESIGN.md#late-unpin).
func pinIn(d dirFd, leaf string, lc *lateCloser) (unpin func()) {
	fd, err := unix.Openat(d.FD, leaf, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return func() {}
	}
	return func() {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Nlink == 0 {
			lc.closeLater(fd)
			return
		}
		unix.Close(fd) // still linked (a name left, a journal's pre-image): nothing to free
	}
}
