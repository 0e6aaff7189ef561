package watcher

import (
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Own changes are matched by file identity. inotify names a change by the
// path it was made through, and one file may have many paths (hard links),
// or change path under the daemon (renames, RENAME_EXCHANGE): a write through
// f1 changes the size and times every other name of the file shows. So the
// watcher keeps two tables, both filled by the daemon's brackets (Begin):
//
//   - per identity (device, inode): the file's lstat right after the last own
//     change of it ended, whichever of its names that change went through;
//   - per path: own changes in flight, and whether the last own change of the
//     name left it absent (an unlink, or a rename away).
//
// An event for a path is the daemon's own when no own change of the path, of
// a directory above it or of the identity it names now is in flight, and
// either the path names an identity whose lstat is still what the last own
// change of it left, or the path is absent and the last own change of it
// removed it. Anything else is external.
//
// Records and decisions compare lstats taken at different moments, so their
// order is kept: every lstat gets a ticket before it begins, and a record
// is replaced only by one whose lstat began later (record). Every bracket
// that sees the file when it ends records it, even when another own change
// of the same identity ends after it: that one may no longer see the file
// (its name was freed, and the inode number given to this file). classify
// takes its lstats again when an own change ended while it took them.
//
// Since Linux 6.13 (multigrain timestamps) a change right after the
// recorded lstat gets a distinct ctime, so an equal stat means no one else
// changed the file.
//
// An external change racing with an own one (the same file changed outside
// just before the daemon changes it) is still reported: each bracket lstats
// its paths as it begins, and an identity whose state then differs from the
// one recorded is marked dirty; its next event is external. An external
// change delivered moves the recorded state on to what was seen, so the
// daemon's next own change of that file is not taken for a race.

// fileID is a file identity: device and inode number.
type fileID struct{ dev, ino uint64 }

func idOf(st *syscall.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: st.Ino} }

// idState is what the watcher knows of one identity. gen counts ended own
// changes of it; recGen is the gen its recorded state covers (recGen < gen:
// the ending bracket is still taking the record). seq is the ticket of the
// lstat st came from (ownTable.ticket), to keep a record from being
// overwritten by an lstat that began before it.
type idState struct {
	inflight    int
	gen, recGen uint64
	known       bool // st holds a state
	st          syscall.Stat_t
	seq         uint64
	dirty       bool // changed outside before an own change began (see above)
	at          time.Time
}

func (s *idState) busy() bool { return s.inflight > 0 || s.recGen != s.gen }

// pathState is what the watcher knows of own changes of one name. rel is
// the key it is kept under: an own move of a directory above it re-keys it
// (noteMove), and the ending bracket follows.
type pathState struct {
	rel         string
	inflight    int
	gen, recGen uint64
	exists      bool // rel existed when the last own change ended
	at          time.Time
}

func (p *pathState) busy() bool { return p.inflight > 0 || p.recGen != p.gen }

// ownTable holds the own-change records. All fields are guarded by mu; no
// system call is made while it is held.
type ownTable struct {
	mu        sync.Mutex
	paths     map[string]*pathState
	ids       map[fileID]*idState
	moves     []ownMove // own directory moves and exchanges, oldest first
	seq       uint64    // the last lstat ticket given (ticket)
	nmoves    uint64    // counts own moves recorded (noteMove)
	pathGen   uint64    // the last pathState.gen given (end): never reused
	lastPrune time.Time
	// bytes is what the three tables hold, estimated (ownbound.go);
	// nextPrune the bytes past which Begin prunes before its second is
	// up; dropped counts records dropped before their TTL (pressure).
	bytes     int64
	nextPrune int64
	dropped   uint64
}

func newOwnTable() ownTable {
	return ownTable{paths: map[string]*pathState{}, ids: map[fileID]*idState{}}
}

func (t *ownTable) path(rel string) *pathState {
	p := t.paths[rel]
	if p == nil {
		p = &pathState{rel: rel}
		t.putPath(rel, p)
	}
	return p
}

func (t *ownTable) id(id fileID) *idState {
	s := t.ids[id]
	if s == nil {
		s = &idState{}
		t.ids[id] = s
		t.bytes += idCost
	}
	return s
}

// pathBusy reports whether an own change of rel or of a directory above it
// is in flight or not yet recorded. Called with mu held.
func (t *ownTable) pathBusy(rel string) bool {
	for p := rel; p != ""; p = parentOf(p) {
		if o := t.paths[p]; o != nil && o.busy() {
			return true
		}
	}
	return false
}

// pathGens returns the counts of ended own changes of rel and of each
// directory above it (0 where none is kept): a change in them means one of
// those own changes ended meanwhile. Called with mu held.
func (t *ownTable) pathGens(rel string) []uint64 {
	var gens []uint64
	for p := rel; p != ""; p = parentOf(p) {
		var g uint64
		if o := t.paths[p]; o != nil {
			g = o.gen
		}
		gens = append(gens, g)
	}
	return gens
}

// ticket numbers an lstat about to begin: a later ticket's lstat began
// later, so it sees every change that had ended when an earlier one
// began. Called with mu held.
func (t *ownTable) ticket() uint64 {
	t.seq++
	return t.seq
}

// record stores st as the state of s, taken by the lstat of ticket seq0,
// unless s holds the state of an lstat that began later (whichever of the
// two ended first). Called with mu held.
func (t *ownTable) record(s *idState, st *syscall.Stat_t, seq0 uint64, now time.Time) {
	if s.seq > seq0 {
		return
	}
	s.known, s.st, s.seq, s.at = true, *st, seq0, now
}

// bracket is one own change in progress (Begin).
type bracket struct {
	paths []*pathState
	rels  []string // as given; paths[i].rel may move on (noteMove)
	pre   []*idState
	preID []fileID
	preOf []int // per name: its index in pre, -1 when it did not exist
	fds   []int // O_PATH descriptors of pre[i] when it has other names, else -1
	gens  []uint64
	pgens []uint64
}

// Begin marks rels as being changed by the daemon itself and returns the
// function that ends the change; end records the resulting state of every
// identity involved (the files at rels before and after the change) so the
// change's events, under any name of those files, are recognised as own.
// Call end exactly once, after the change, whether or not it succeeded.
// Bracket all names of one operation in one call (a rename's source and
// target, a link's new name and its target): a file that moves from one to
// the other is then recorded where it ends up. Safe for concurrent use; it
// costs one lstat per name at each end, and for a non-directory with other
// links (it may survive the change under another name) an O_PATH open.
func (w *Watcher) Begin(rels ...string) (end func()) {
	// Prune here too, not only when events arrive: own changes in a
	// subtree without watches (too deep for inotify, skipped, past the
	// limit) bring no events, and their records must not pile up.
	w.pruneOwn()
	b := w.begin(rels)
	return func() { w.end(b) }
}

func (w *Watcher) begin(rels []string) *bracket {
	t := &w.own
	b := &bracket{rels: rels}
	sts := make([]syscall.Stat_t, len(rels))
	oks := make([]bool, len(rels))
	t.mu.Lock()
	seq0 := t.ticket()
	t.mu.Unlock()
	for i, rel := range rels {
		oks[i] = w.lstat(rel, &sts[i]) == nil
	}
	t.mu.Lock()
	for _, rel := range rels {
		p := t.path(rel)
		p.inflight++
		b.paths = append(b.paths, p)
	}
	var others []int // indexes into b.pre of files with other links
	for i := range rels {
		b.preOf = append(b.preOf, -1)
		if !oks[i] {
			continue
		}
		id := idOf(&sts[i])
		dup := false
		for j, have := range b.preID {
			if have == id {
				dup, b.preOf[i] = true, j
			}
		}
		if dup {
			continue
		}
		b.preOf[i] = len(b.pre)
		s := t.id(id)
		if s.known && !s.busy() && s.seq < seq0 && !sameStat(&s.st, &sts[i]) {
			s.dirty = true // changed outside since the last record
		}
		s.inflight++
		b.pre, b.preID = append(b.pre, s), append(b.preID, id)
		b.fds = append(b.fds, -1)
		if sts[i].Mode&syscall.S_IFMT != syscall.S_IFDIR && sts[i].Nlink > 1 {
			others = append(others, len(b.pre)-1)
		}
	}
	t.mu.Unlock()
	for _, j := range others {
		for i := range rels {
			if oks[i] && idOf(&sts[i]) == b.preID[j] {
				b.fds[j] = openPath(w.abs(rels[i]), b.preID[j])
				break
			}
		}
	}
	return b
}

// openPath opens p with O_PATH (no access to the content, no side effect on
// fifos or devices) when it is still the identity id, else returns -1.
func openPath(p string, id fileID) int {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || (fileID{dev: uint64(st.Dev), ino: st.Ino}) != id {
		unix.Close(fd)
		return -1
	}
	return fd
}

func (w *Watcher) end(b *bracket) {
	t := &w.own
	t.mu.Lock()
	for _, p := range b.paths {
		p.inflight--
		// From one counter: a name's record dropped and made again
		// never repeats a gen a classify took before (pathGens).
		t.pathGen++
		p.gen = t.pathGen
		b.pgens = append(b.pgens, p.gen)
	}
	for _, s := range b.pre {
		s.inflight--
		s.gen++
		b.gens = append(b.gens, s.gen)
	}
	t.mu.Unlock()
	for {
		t.mu.Lock()
		seq0 := t.ticket()
		at := make([]string, len(b.paths))
		for i, p := range b.paths {
			at[i] = p.rel
		}
		t.mu.Unlock()
		sts := make([]syscall.Stat_t, len(at))
		oks := make([]bool, len(at))
		for i, rel := range at {
			oks[i] = w.lstat(rel, &sts[i]) == nil
		}
		fsts := make([]syscall.Stat_t, len(b.fds))
		fok := make([]bool, len(b.fds))
		for i, fd := range b.fds {
			fok[i] = fd >= 0 && syscall.Fstat(fd, &fsts[i]) == nil
		}
		t.mu.Lock()
		moved := false
		for i, p := range b.paths {
			moved = moved || p.rel != at[i]
		}
		if moved {
			// An own directory move re-keyed a name meanwhile: take the
			// lstats again where the files are now.
			t.mu.Unlock()
			continue
		}
		now := time.Now()
		for i, p := range b.paths {
			if p.gen == b.pgens[i] && p.inflight == 0 {
				p.recGen, p.exists, p.at = p.gen, oks[i], now
			}
		}
		seen := map[fileID]bool{}
		for i := range at {
			if !oks[i] || seen[idOf(&sts[i])] {
				continue
			}
			id := idOf(&sts[i])
			seen[id] = true
			s := t.id(id)
			mine := -1
			for j, pid := range b.preID {
				if pid == id {
					mine = j
				}
			}
			switch {
			case mine >= 0:
				// Recorded even when another own change of the file is
				// still in flight or ended after this one: the one that
				// ends last may no longer see the file (its name was
				// freed, and the inode number given to this file), and
				// the ticket keeps a later lstat's record.
				if s.gen == b.gens[mine] && s.inflight == 0 {
					s.recGen = s.gen
				}
				t.record(s, &sts[i], seq0, now)
			case mine < 0 && !s.busy():
				t.record(s, &sts[i], seq0, now) // born here (create)
			case mine < 0:
				// Born here while a bracket of an earlier file with the
				// same inode number is still ending (an unlink in another
				// directory freed it): record it weakly, leaving seq, so
				// that bracket's own record, if it takes one, wins.
				s.known, s.st, s.at = true, sts[i], now
			}
		}
		for j, s := range b.pre {
			if seen[b.preID[j]] {
				continue
			}
			if s.gen == b.gens[j] && s.inflight == 0 {
				s.recGen = s.gen
			}
			if fok[j] && idOf(&fsts[j]) == b.preID[j] {
				t.record(s, &fsts[j], seq0, now) // lives on under another name
			}
			// Else gone: its events name absent paths. Its record stays:
			// a later file given the same inode number has another ctime,
			// and its own creation may already have been recorded.
		}
		t.mu.Unlock()
		break
	}
	for _, fd := range b.fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

type origin int

const (
	external origin = iota
	ownInFlight
	ownDone
)

// classify tells an own change from an external one, by the rule at the
// top of this file. If any own change that may concern the event (of the
// path, a directory above it, or the identity the path names) is in flight
// or not yet recorded, the decision is put off to the next batch (the
// event is queued again, never dropped). An own change that ends while
// classify takes its lstats makes it take them again (classifyOnce): the
// lstats must not predate the records they are compared with.
//
// Own directory moves (BeginMove): an event may name a path by where it was
// before the daemon moved a directory above it (inotify reports the old
// watch's events under the old path), so each such path is also tried where
// the moves took it; and an entry the scan of an own-moved directory found
// is not a change at all when its ctime predates the move (a rename changes
// no file below the directory, and any change after it sets a later ctime),
// judged where the entry is now: at the path the scan found it at, or, when
// later own moves took it away before the event was classified, where they
// took it (movedScanRef).
// also lists, for an external event of a path that no longer exists, where
// the own moves took it, so the change is applied where the file is now.
func (w *Watcher) classify(rel string, op Op) (how origin, also []string) {
	for try := 0; ; try++ {
		how, also, stale := w.classifyOnce(rel, op)
		if !stale {
			return how, also
		}
		if try == classifyTries-1 {
			return ownInFlight, nil // decide in the next batch
		}
	}
}

// classifyTries bounds the lstats classify takes in one batch while own
// changes of the file keep ending between its lstat and its decision.
const classifyTries = 4

// classifyOnce is one attempt of classify. stale: while the lstats were
// being taken, an own change ended of a candidate path or a directory above
// it, or of the identity found there, or an own move was recorded, so the
// lstats and the records may describe different moments (an own write
// landing between the lstat and the decision would make the file's own
// state look external; an own move of a directory above it, made before
// the lstat, would leave the file at a path not yet among the
// candidates): take them again.
func (w *Watcher) classifyOnce(rel string, op Op) (how origin, also []string, stale bool) {
	t := &w.own
	t.mu.Lock()
	cands := t.movedPaths(rel)
	nmoves := t.nmoves
	pgens := make([][]uint64, len(cands))
	for i, c := range cands {
		if t.pathBusy(c) {
			t.mu.Unlock()
			return ownInFlight, nil, false
		}
		pgens[i] = t.pathGens(c)
	}
	also = append(also, cands[1:]...)
	// refs[i]: the scan rule's reference time for cands[i] (nil: the rule
	// does not apply), rel's own, or, for a path later own moves took the
	// entry to, that of the move the scan found it after (movedScanRef).
	refs := make([]*syscall.Timespec, len(cands))
	if op&scanned != 0 && op&^(Create|scanned) == 0 {
		refs[0] = t.scanRef(rel)
		copy(refs[1:], t.movedScanRefs(rel, cands[1:]))
	}
	seq0 := t.ticket()
	t.mu.Unlock()

	hook := w.classifyHook.Load()
	if hook != nil {
		(*hook)(rel, false)
	}
	sts := make([]syscall.Stat_t, len(cands))
	oks := make([]bool, len(cands))
	for i, c := range cands {
		oks[i] = w.lstat(c, &sts[i]) == nil
	}
	if hook != nil {
		(*hook)(rel, true)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, c := range cands {
		if t.pathBusy(c) {
			return ownInFlight, nil, false
		}
		if s := t.ids[idOf(&sts[i])]; oks[i] && s != nil && s.busy() {
			return ownInFlight, nil, false
		}
	}
	if t.nmoves != nmoves {
		return 0, nil, true // the paths the file may be at have changed
	}
	for i, c := range cands {
		if !slices.Equal(t.pathGens(c), pgens[i]) {
			return 0, nil, true
		}
		if s := t.ids[idOf(&sts[i])]; oks[i] && s != nil && s.seq > seq0 {
			return 0, nil, true
		}
	}
	for i, c := range cands {
		if oks[i] {
			if s := t.ids[idOf(&sts[i])]; s != nil && s.known && !s.dirty && sameStat(&s.st, &sts[i]) {
				return ownDone, nil, false
			}
		} else if p := t.paths[c]; p != nil && !p.exists {
			return ownDone, nil, false
		}
	}
	for i := range cands {
		// Where the entry is now: at rel, or, once rel is gone, where
		// own moves made after the scan took it.
		if oks[i] && refs[i] != nil && tsBefore(sts[i].Ctim, *refs[i]) {
			return ownDone, nil, false // unchanged since before the daemon moved it
		}
		if oks[0] {
			break
		}
	}
	// External: what was seen is now accounted for (see above).
	now := time.Now()
	for i := range cands {
		if s := t.ids[idOf(&sts[i])]; oks[i] && s != nil {
			t.record(s, &sts[i], seq0, now)
			s.dirty = false
		}
	}
	if oks[0] {
		also = nil
	}
	return external, also, false
}

// sameStat reports whether b is still the state an own change left (a). A
// directory's size, times and link count change with every entry made in
// it, and those entries raise events of their own, so for directories only
// the identity, type, permissions and owner count.
func sameStat(a, b *syscall.Stat_t) bool {
	same := a.Ino == b.Ino && a.Mode == b.Mode && a.Uid == b.Uid && a.Gid == b.Gid
	if a.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return same
	}
	return same && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim && a.Nlink == b.Nlink
}
