package guard

// The guard's two calls around one guarded change (docs/DESIGN.md#mutation-path):
// Begin before it (lock the identities, decide), Ticket.Done after it
// (records follow the files, each file's change is noted, the session is
// credited, unlock). The adapter makes the change between the two; the
// guard is the only place that decides.

import (
	"sort"
	"syscall"
	"time"
)

// Change is what a change did to one locked file, as told to the guard
// after it succeeded (Ticket.Done).
type Change uint8

const (
	// Unchanged: the file itself is not changed (a rename source; its
	// records follow it through Noted.To).
	Unchanged Change = iota
	// Rewritten: the content changed (an O_TRUNC open, a truncate, a
	// write, an exchange): NoteMutation.
	Rewritten
	// Unlinked: the name was removed: NoteLastNameGone when it was the
	// file's last link, else NoteMutation.
	Unlinked
	// Replaced: another file was renamed over the name: NoteLastNameGone
	// when it was the file's last link, else nothing (the file lives on,
	// unchanged, under its other names).
	Replaced
)

// ToolTrees exempts from refusals the files of tool-owned trees for their
// tool's uid (docs/DESIGN.md#tool-trees); *ignore.Tools implements it.
type ToolTrees interface {
	// Changing is told a path is about to be changed (a marker about to
	// go keeps its tree's exemption).
	Changing(rel string)
	// Exempt reports whether a refusal of rel (identity dev, ino) for uid
	// is no refusal.
	Exempt(rel string, uid uint32, dev, ino uint64) bool
}

// Asker is who asks: the caller as the guard sees it, with the uid and
// pid the denial log and the tool trees need.
type Asker struct {
	Caller Caller
	Uid    uint32
	Pid    uint32
	// Tools, when non-nil, exempts tool trees from refusals.
	Tools ToolTrees
}

// Ask is one decision a change needs: Op on the file Target, as stat'ed
// under its identity lock.
type Ask struct {
	Op     Op
	Target Target
}

// Look is what the author of a change found under the identity locks
// (Plan.Under): who asks, the decisions to make in order, and the files
// whose deferred read hashes are to be taken before the change (their
// Target.Open reads them). Again: an identity changed meanwhile; nothing
// is decided, the locks are dropped and Begin returns a ticket with Again
// set. Errno: the author cannot go on (returned by Begin after the
// unlock).
type Look struct {
	Who    Asker
	Asks   []Ask
	Settle []Target
	Again  bool
	Errno  syscall.Errno
}

// Plan is one guarded change as the guard is asked about it before it is
// made (Begin).
type Plan struct {
	// IDs are the identities to lock (any order; duplicates are locked
	// once), in the fixed (Dev, Ino) order.
	IDs []FileID
	// Under runs once the locks are held: the author stats its files
	// again and says what to decide. It may tell the guard of a change
	// found meanwhile (NoteMutation) but never takes a Lock.
	Under func() Look
}

// Ticket is a change the guard allowed and whose identities it holds
// locked, until Done. Not safe for concurrent use: one request's
// goroutine holds it.
type Ticket struct {
	g      *Guard
	unlock func()
	// Again: an identity changed before the decision (Look.Again):
	// nothing is held; look again.
	Again bool
	// Warned counts asks allowed in warn mode that would have been
	// refused; Denied is set when an ask was refused (Begin's errno).
	Warned int
	Denied bool
	// Look is what Plan.Under returned.
	Look Look
}

// Begin locks p.IDs in (Dev, Ino) order, calls p.Under, and decides each
// of its asks in order (Check). The first refusal is returned as its
// errno: EACCES, the configured Config.Errno, or EAGAIN for an
// sessions.Unknown caller; a refusal is recorded (RecordDenial), unless a
// tool tree exempts the file. An errno of Under is returned as is.
// Allowed, it takes the deferred read hashes of Look.Settle still
// pending (SettleDeferred). The ticket is never nil, and holds the locks
// until Done whatever the errno, except when Under found an identity
// changed (Ticket.Again: nothing is held; look again). Safe for
// concurrent use.
func (g *Guard) Begin(p Plan) (*Ticket, syscall.Errno) {
	t := &Ticket{g: g, unlock: g.lockAll(p.IDs)}
	t.Look = p.Under()
	if t.Look.Again {
		t.unlock()
		t.unlock, t.Again = nil, true
		return t, 0
	}
	if t.Look.Errno != 0 {
		return t, t.Look.Errno
	}
	for _, a := range t.Look.Asks {
		errno, warned := g.Check(t.Look.Who, a.Op, a.Target)
		if warned {
			t.Warned++
		}
		if errno != 0 {
			t.Denied = true
			return t, errno
		}
	}
	if g.HasDeferred() {
		for _, f := range t.Look.Settle {
			g.SettleDeferred(f.Stat.ID, f.Open)
		}
	}
	return t, 0
}

// Noted is what a change did to one file, for Done.
type Noted struct {
	ID     FileID
	Change Change
	// Nlink is the file's link count before the change.
	Nlink uint64
	// To is the path the file's records follow it to (RenameBy), "" for
	// none.
	To string
}

// Credit is the content a session's own change left (NoteWriteHashed):
// the file's target as it is now and, when known, the hash of its bytes.
type Credit struct {
	Target Target
	Hash   Hash
}

// Done is told, after the change succeeded and while the locks are still
// held, what it did: the records of each renamed file follow it
// (RenameBy), each file's change is noted (NoteMutation,
// NoteLastNameGone) as session's, and, with credit, the session is
// credited with the content (NoteWriteHashed; err is its failure: the
// session's record stays stale). Then it unlocks. seq is the mutation
// sequence of notes[0] (0 when none was noted). After a refused or failed
// change, Done(session, nil, nil) only unlocks. A second Done, or one of
// a ticket with Again set, does nothing.
func (t *Ticket) Done(session string, notes []Noted, credit *Credit) (seq uint64, err error) {
	if t.unlock == nil {
		return 0, nil
	}
	defer func() {
		t.unlock()
		t.unlock = nil
	}()
	g := t.g
	for _, n := range notes {
		if n.To != "" {
			g.RenameBy(n.ID, n.To, session)
		}
	}
	for i, n := range notes {
		if s := g.noteChange(n, session); i == 0 {
			seq = s
		}
	}
	if credit != nil {
		err = g.NoteWriteHashed(session, credit.Target, credit.Hash)
	}
	return seq, err
}

// noteChange tells the guard session changed n.ID as n.Change says and
// returns the new mutation sequence (0 when nothing was noted).
func (g *Guard) noteChange(n Noted, session string) uint64 {
	switch {
	case n.Change == Rewritten, n.Change == Unlinked && n.Nlink > 1:
		return g.NoteMutation(n.ID, session)
	case n.Change == Unlinked, n.Change == Replaced && n.Nlink <= 1:
		g.NoteLastNameGone(n.ID, session)
	}
	return 0
}

// lockAll takes the identity locks of ids in a fixed order (no deadlock
// between two renames locking the same pair) and returns one unlock.
func (g *Guard) lockAll(ids []FileID) func() {
	ids = append([]FileID(nil), ids...)
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
		unlocks = append(unlocks, g.Lock(id))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// Check asks the guard about op on t for who (DecideBy), records a denial (or a
// warning) and returns the errno to give the caller: 0, or the guard's
// configured errno (Decision.Errno, Config.Errno; EACCES by default), or
// EAGAIN for an sessions.Unknown caller; warned reports an allowed op that
// warn mode would have refused.
//
// EACCES by default, not EPERM: the refusal is a permission decision about
// this caller and this file, which is what EACCES means to tools
// ("Permission denied"), and editors/shells already report it well. EPERM is
// the configurable alternative (guard.errno) for tools that misread EACCES;
// EBUSY/ETXTBSY would invite retries, so ParseErrno refuses them.
// A caller of sessions.Unknown gets EAGAIN instead: nothing was decided
// about it, and a retry once its exec is over is exactly right.
//
// The caller's program name (comm, for the git-safe policy and the
// denial log) is looked up at most once, and only when the read-before-write
// policy refuses: an allowed mutation reads nothing of the caller. A
// refusal of a file that who.Tools exempts for the caller's uid is no
// refusal: 0, nothing recorded (docs/DESIGN.md#tool-trees). The caller
// holds Lock(t.Stat.ID).
func (g *Guard) Check(who Asker, op Op, t Target) (errno syscall.Errno, warned bool) {
	c := who.Caller
	if who.Tools != nil {
		who.Tools.Changing(t.Path) // a marker about to go: keep its tree's exemption
	}
	d := g.DecideBy(c, op, t)
	if d.Allow && !d.WouldDeny {
		return 0, false
	}
	if who.Tools != nil && who.Tools.Exempt(t.Path, who.Uid, t.Stat.ID.Dev, t.Stat.ID.Ino) { // docs/DESIGN.md#tool-trees
		return 0, false
	}
	comm := ""
	if c.Comm != nil {
		comm = c.Comm()
	}
	g.RecordDenial(Denial{
		Warned:     d.Allow,
		Time:       time.Now(),
		Session:    c.Session,
		Pid:        who.Pid,
		Comm:       comm,
		Op:         op,
		Path:       t.Path,
		Code:       d.Code,
		Message:    d.Message,
		ReplacedBy: d.ReplacedBy,
	})
	if d.Allow {
		return 0, true
	}
	if d.Errno != 0 {
		return d.Errno, false
	}
	return syscall.EACCES, false
}
