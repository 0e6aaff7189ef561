package guard

import (
	"os"
	"slices"
	"sync"
	"time"
)

// DedupTTL is how long a duplicate-read window stays valid
// (docs/DESIGN.md#dedup-window): past it the reader may legitimately want the
// bytes again (a long turn, summarised away), so the content is served rather
// than reported as a duplicate.
const DedupTTL = 120 * time.Second

// Target is a file about to be read, written or decided on: its
// workspace-relative path (for display only; identity is Stat.ID), its stat,
// and a way to open its content for hashing. Open must open the very file
// Stat describes (fusefs opens the backing path with O_NOFOLLOW, or the
// handle's own descriptor through /proc/self/fd).
type Target struct {
	Path string
	Stat Stat
	Open func() (*os.File, error)
}

// Range is one elided range of a skeleton (docs/DESIGN.md#skeleton-drill-in):
// First is the first line (1-based), Count the number of lines.
type Range struct {
	First, Count int64
}

// record is the last state a session knows of one file identity, whether
// from a read or from its own write (docs/DESIGN.md#freshness).
type record struct {
	path    string
	mtimeNs int64
	ctimeNs int64
	size    int64
	hash    Hash
	// pending: the hash of the content read is not taken yet; it is
	// attributed to the record by pending.Settle, or the record becomes
	// unknown (docs/DESIGN.md#lazy-hash).
	pending *PendingHash
	// unknown: a deferred hash could not be attributed (the file changed
	// before it was taken): the record is seen but vouches for no
	// content, like an in-flux one, except that own writes since still
	// keep it fresh.
	unknown bool
	at      time.Time // when the record was made
	written bool      // the last event was the session's own write
	// foreign: another session mutated the file through the mount since
	// this record was made. The record is stale even if the bytes hash
	// the same again (A writes X, then X again: B's view may be neither).
	foreign bool
	// influx: the read was served while another session was changing the
	// file (RegisterInFlux); the record vouches for no content at all.
	influx bool
	// base is the identity's mutation sequence (Guard.LastMutation) when
	// the record was made: mutations with a higher sequence came after.
	base uint64
	// declared: the hash is one a harness declared (DeclareRead), not one
	// taken from the file or the session's own bytes.
	declared bool
	// mixed: a change not made through the mount by this session came
	// after base (an external change reported by the watcher, or any
	// mutation while the record's hash was being taken), so only the hash
	// can vouch for the record; own writes since base do not keep it fresh.
	mixed bool
}

// ownWritesSince reports whether every mutation of the file since the
// record was made is the session's own (docs/DESIGN.md#own-write-refresh):
// the session changed the file through the mount (a handle's writes,
// not yet credited at flush or release), and neither another session
// (foreign) nor anything outside the mount (mixed) changed it meanwhile. The
// file then differs from the record only by the session's own writes, which
// are authoritative for it, so the record stays fresh for that session.
// last is the identity's last mutation, session the record's session. An in
// flux record vouches for no content, so own writes cannot extend it.
func (r *record) ownWritesSince(last Mutation, session string) bool {
	return !r.foreign && !r.influx && !r.mixed && last.Seq > r.base && last.Session == session
}

// windowKey is one read window of the dedup map: the file identity and the
// window's offset and limit (docs/DESIGN.md#dedup-window).
type windowKey struct {
	id            FileID
	offset, limit int64
}

type window struct {
	hash Hash
	at   time.Time
}

// Tracker is one session's read tracker: the single source of truth for what
// the session last saw or wrote of each file, keyed on file identity so that
// every alias of a file (symlinks, hard links) shares one record
// (docs/DESIGN.md#file-identity). The content hash is authoritative; mtime is
// only kept for display and MtimeAtRead (docs/DESIGN.md#freshness).
//
// Concurrency: every method is safe for concurrent use (one mutex guards the
// maps). Methods that hash read the file outside the lock.
type Tracker struct {
	session string
	hashes  *HashCache
	now     func() time.Time
	// lastMut is Guard.LastMutation: the identity's mutation sequence, for
	// ownWritesSince. Called with mu held (lock order: mu, then the
	// guard's mutMu).
	lastMut func(FileID) Mutation

	mu        sync.Mutex
	state     map[FileID]*record
	windows   map[windowKey]window
	recover   map[FileID]bool
	skeletons map[FileID][]Range
	// byPath maps a record's path to its identity, and gone a name whose
	// file lost its last name to another session to that session
	// (replaced.go, docs/DESIGN.md#stale-replaced); both only name a
	// refusal's cause. gone holds at most MaxReplacedNames entries.
	byPath map[string]FileID
	gone   map[string]string
}

func newTracker(session string, hashes *HashCache, now func() time.Time, lastMut func(FileID) Mutation) *Tracker {
	return &Tracker{
		session:   session,
		hashes:    hashes,
		now:       now,
		lastMut:   lastMut,
		state:     make(map[FileID]*record),
		windows:   make(map[windowKey]window),
		recover:   make(map[FileID]bool),
		skeletons: make(map[FileID][]Range),
	}
}

// Session returns the tracker's session id.
func (t *Tracker) Session() string {
	t.mu.Lock() // RenameSession changes it
	defer t.mu.Unlock()
	return t.session
}

// put stores r as the record of id, based on the mutation sequence base
// taken before r's hash: when the file was mutated meanwhile, the hash may
// describe content before or after that mutation, so own writes must not
// extend the record (mixed). Called with t.mu held.
func (t *Tracker) put(id FileID, r *record, base uint64) {
	r.base = base
	if last := t.lastMut(id); last.Seq != base {
		r.base, r.mixed = last.Seq, true
	}
	if old, ok := t.state[id]; ok && old.path != r.path {
		t.unindexPath(id, old.path)
	}
	t.state[id] = r
	t.indexPath(id, r.path)
}

// hashOf returns h when it is known, or the content hash of tg.
func (t *Tracker) hashOf(tg Target, h Hash) (Hash, error) {
	if !h.IsZero() {
		return h, nil
	}
	return t.hashes.Sum(tg.Stat, tg.Open)
}

// Register records a successful read of tg: mtime and content hash are
// stashed so a later write can confirm the file unchanged.
// h is the hash of the bytes served when the caller knows it; the zero Hash
// makes Register hash the file. Errors are those of hashing (the read is then
// not registered, and a later write is refused as unread: fail closed).
func (t *Tracker) Register(tg Target, h Hash) error {
	base := t.lastMut(tg.Stat.ID).Seq
	h, err := t.hashOf(tg, h)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.put(tg.Stat.ID, &record{path: tg.Path, mtimeNs: tg.Stat.MtimeNs, ctimeNs: tg.Stat.CtimeNs, size: tg.Stat.Size, hash: h, at: t.now()}, base)
	t.mu.Unlock()
	return nil
}

// emptyHash is the content hash of an empty file.
var emptyHash = HashBytes(nil)

// registerCreated records that the session created tg empty, at mutation
// sequence seq (Guard.NoteCreate), as its own write of no bytes. The hash is
// that of the empty content whatever the file holds by now: bytes that
// reached it meanwhile by any other way than the session's own mutations
// must never count as seen. Knowledge of an earlier file with the same
// identity (a reused inode number) is dropped.
func (t *Tracker) registerCreated(tg Target, seq uint64) {
	id := tg.Stat.ID
	t.mu.Lock()
	defer t.mu.Unlock()
	t.put(id, &record{path: tg.Path, mtimeNs: tg.Stat.MtimeNs, ctimeNs: tg.Stat.CtimeNs, hash: emptyHash, at: t.now(), written: true}, seq)
	t.dropViews(id)
	delete(t.skeletons, id)
}

// dropViews clears what the session's earlier views of id leave behind once
// it has the file's current content (its own write, a full view): a pending
// edit-failure recovery and the dedup windows (docs/DESIGN.md#recovery,
// docs/DESIGN.md#dedup-window). Called with t.mu held.
func (t *Tracker) dropViews(id FileID) {
	delete(t.recover, id)
	for k := range t.windows {
		if k.id == id {
			delete(t.windows, k)
		}
	}
}

// RegisterInFlux records a read of tg whose bytes cannot be vouched for:
// another session was changing the file while it was served (its write
// handle had mutated and not yet been credited), so the kernel may have
// served bytes older or newer than any hash taken now. The record is seen
// but never fresh: the session must read again before it may overwrite.
func (t *Tracker) RegisterInFlux(tg Target) {
	t.mu.Lock()
	t.put(tg.Stat.ID, &record{path: tg.Path, mtimeNs: tg.Stat.MtimeNs, size: tg.Stat.Size, at: t.now(), influx: true},
		t.lastMut(tg.Stat.ID).Seq)
	t.mu.Unlock()
}

// NoteWrite records the session's own successful write of tg
// (docs/DESIGN.md#own-write-refresh): the new content is authoritative, so the
// next edit does not trip the stale-read guard; any pending edit-failure
// recovery and the file's dedup windows are cleared. h as for Register.
func (t *Tracker) NoteWrite(tg Target, h Hash) error {
	id := tg.Stat.ID
	base := t.lastMut(id).Seq
	if h.IsZero() {
		var err error
		var n int64
		h, _, n, err = t.hashes.sum(tg.Stat, tg.Open, false)
		t.hashes.readBackBytes.Add(uint64(n))
		if err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.put(id, &record{path: tg.Path, mtimeNs: tg.Stat.MtimeNs, ctimeNs: tg.Stat.CtimeNs, size: tg.Stat.Size, hash: h, at: t.now(), written: true}, base)
	t.dropViews(id)
	return nil
}

// Fresh reports whether the file still matches what the session last saw
// (docs/DESIGN.md#freshness). The hash is authoritative: a newer mtime only means
// "recheck", and an equal or older mtime still rechecks the hash (through the
// hash cache, whose racy rule catches a changed byte under an unchanged
// mtime). The one exception is the session's own writes
// (docs/DESIGN.md#own-write-refresh): when every mutation since the record is the
// session's own (record.ownWritesSince), the record stays fresh although
// those writes are not credited yet (a handle credits at flush or
// release), so a second handle of the same session may write meanwhile.
// False when the session never saw the file. Errors are those of hashing.
func (t *Tracker) Fresh(tg Target) (bool, error) {
	_, fresh, err := t.check(tg)
	return fresh, err
}

// check reports whether the session has a record of tg and whether it is
// fresh (Fresh), reading the record once.
//
// A record whose hash is deferred (docs/DESIGN.md#lazy-hash) is settled
// first, in the caller: hashing in the request, as a read-only open did
// before hashes were deferred. A record whose deferred hash was lost is
// fresh only through own writes since.
func (t *Tracker) check(tg Target) (seen, fresh bool, err error) {
	var want Hash
	for {
		t.mu.Lock()
		r, ok := t.state[tg.Stat.ID]
		var p *PendingHash
		stale, own, unknown := false, false, false
		if ok {
			want, stale, p, unknown = r.hash, r.foreign || r.influx, r.pending, r.unknown
			own = r.ownWritesSince(t.lastMut(tg.Stat.ID), t.session)
		}
		t.mu.Unlock()
		if !ok || stale {
			return ok, false, nil
		}
		if own {
			return true, true, nil
		}
		if p != nil {
			p.settle(tg.Open)
			continue // the record is settled now (or replaced): read it again
		}
		if unknown {
			return true, false, nil
		}
		break
	}
	got, err := t.hashes.Sum(tg.Stat, tg.Open)
	if err != nil {
		return true, false, err
	}
	return true, got == want, nil
}

// Seen reports whether the session has a record of id, fresh or not.
func (t *Tracker) Seen(id FileID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.state[id]
	return ok
}

// count returns how many files the tracker has records of; 0 for a nil
// tracker (a session or process that never got one).
func (t *Tracker) count() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.state)
}

// MtimeAtRead returns the mtime recorded at the last read or own write of id,
// and false when there is none. It is for display: freshness never trusts it.
func (t *Tracker) MtimeAtRead(id FileID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.state[id]
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, r.mtimeNs), true
}

// DuplicateRead records a read of the window [offset, offset+limit) of tg and
// reports whether it duplicates an earlier one (docs/DESIGN.md#dedup-window):
// true only when the same window was served before, the bytes still hash
// the same, at most DedupTTL has passed, and no edit-failure recovery is
// pending. A pending recovery is consumed (one fresh read). Otherwise the
// window is recorded and false returned: serve the content. Skips work, never
// serves stale bytes. h as for Register.
func (t *Tracker) DuplicateRead(tg Target, offset, limit int64, h Hash) (bool, error) {
	h, err := t.hashOf(tg, h)
	if err != nil {
		return false, err
	}
	id := tg.Stat.ID
	k := windowKey{id: id, offset: offset, limit: limit}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recover[id] {
		delete(t.recover, id)
	} else if prior, ok := t.windows[k]; ok && prior.hash == h && now.Sub(prior.at) <= DedupTTL {
		return true, nil
	}
	t.windows[k] = window{hash: h, at: now}
	if len(t.windows) > MaxWindows {
		t.pruneWindows(now)
	}
	return false, nil
}

// MaxWindows bounds the read windows one session keeps for DuplicateRead
// (docs/DESIGN.md#dedup-window): past it the windows older than DedupTTL
// go, which can never be duplicates again, and then the oldest, down to
// three quarters of it. A window dropped early only means its next read
// is served again, never that stale bytes are. About 6 MiB a session;
// before, a session's Read tool kept one per distinct window it ever
// asked for (100,000 windows held 36 MB).
const MaxWindows = 16384

// pruneWindows drops the expired windows and then the oldest until at most
// three quarters of MaxWindows are left. One sort per MaxWindows/4
// inserts at most. Called with t.mu held.
func (t *Tracker) pruneWindows(now time.Time) {
	for k, w := range t.windows {
		if now.Sub(w.at) > DedupTTL {
			delete(t.windows, k)
		}
	}
	keep := MaxWindows * 3 / 4
	if len(t.windows) <= keep {
		return
	}
	ats := make([]time.Time, 0, len(t.windows))
	for _, w := range t.windows {
		ats = append(ats, w.at)
	}
	// Newest first: the cut is the oldest time kept.
	slices.SortFunc(ats, func(a, b time.Time) int { return b.Compare(a) })
	cut := ats[keep-1]
	for k, w := range t.windows {
		if len(t.windows) <= keep {
			break
		}
		if w.at.Before(cut) {
			delete(t.windows, k)
		}
	}
	for k, w := range t.windows { // ties at cut, past keep
		if len(t.windows) <= keep {
			break
		}
		if w.at.Equal(cut) {
			delete(t.windows, k)
		}
	}
}

// NoteEditFailure flags that the session's last edit of id failed
// (docs/DESIGN.md#recovery): the next DuplicateRead of it serves fresh
// content once. fusefs calls it when the guard refuses a mutation, so the
// recovery read after EACCES is never deduplicated.
func (t *Tracker) NoteEditFailure(id FileID) {
	t.mu.Lock()
	t.recover[id] = true
	t.mu.Unlock()
}

// NoteSkeleton records that id was sent as a skeleton with these elided
// ranges (docs/DESIGN.md#skeleton-drill-in), replacing any earlier record: a
// re-read re-skeletons from scratch.
func (t *Tracker) NoteSkeleton(id FileID, ranges []Range) {
	t.mu.Lock()
	t.skeletons[id] = append([]Range(nil), ranges...)
	t.mu.Unlock()
}

// DrillIn reports whether the targeted read window of lines [offset,
// offset+limit-1] overlaps a range elided in the last skeleton of id
// (docs/DESIGN.md#skeleton-drill-in): the reader is drilling into a body the skeleton hid. Read-only.
func (t *Tracker) DrillIn(id FileID, offset, limit int64) bool {
	winEnd := offset + limit - 1
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.skeletons[id] {
		if r.First <= winEnd && r.First+r.Count-1 >= offset {
			return true
		}
	}
	return false
}

// forget drops everything the session knows of id, whose last name session
// by removed ("" when not known): when by is another session, the record's
// name is remembered as replaced (noteGone).
func (t *Tracker) forget(id FileID, by string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.state[id]; ok {
		t.unindexPath(id, r.path)
		if by != "" {
			t.noteGone(r.path, by)
		}
	}
	delete(t.state, id)
	delete(t.skeletons, id)
	t.dropViews(id)
}

// Foreign reports whether another session's mutation through the mount
// made the session's record of id stale since it was taken
// (NoteMutation), or the record was taken while another session was
// changing the file (RegisterInFlux). False when there is no record.
// Safe for concurrent use.
func (t *Tracker) Foreign(id FileID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.state[id]
	return ok && (r.foreign || r.influx)
}

// markForeign makes the record of id (if any) stale: another session
// changed the file.
func (t *Tracker) markForeign(id FileID) {
	t.mu.Lock()
	if r, ok := t.state[id]; ok {
		r.foreign = true
	}
	t.mu.Unlock()
}

// markMixed notes a change of id outside the mount (the watcher's): the
// record (if any) is left to the hash, and own writes no longer extend it.
func (t *Tracker) markMixed(id FileID) {
	t.mu.Lock()
	if r, ok := t.state[id]; ok {
		r.mixed = true
	}
	t.mu.Unlock()
}

// rename changes the display path of id's record; when session by (not
// ""), another session, moved it, the old name is remembered as replaced
// (noteGone).
func (t *Tracker) rename(id FileID, path, by string) {
	t.mu.Lock()
	if r, ok := t.state[id]; ok {
		t.unindexPath(id, r.path)
		if by != "" && r.path != path {
			t.noteGone(r.path, by)
		}
		r.path = path
		t.indexPath(id, path)
	}
	t.mu.Unlock()
}

// snapshotOf copies the record of id.
func (t *Tracker) snapshotOf(id FileID) (record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.state[id]
	if !ok {
		return record{}, false
	}
	return *r, true
}

// snapshot copies the records.
// eachRecord calls fn with a copy of every record, outside the
// tracker's mutex: the ids are taken at once, the records in batches of
// 512 under the mutex, so neither the request path waits on fn nor is a
// whole copy of the tracker ever in memory (100,000 records were 40 MB
// of it). A record dropped meanwhile is skipped.
func (t *Tracker) eachRecord(fn func(FileID, record)) {
	t.mu.Lock()
	ids := make([]FileID, 0, len(t.state))
	for id := range t.state {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	batch := make([]record, 512)
	ok := make([]bool, 512)
	for len(ids) > 0 {
		n := min(len(ids), 512)
		t.mu.Lock()
		for i, id := range ids[:n] {
			r := t.state[id]
			if ok[i] = r != nil; ok[i] {
				batch[i] = *r
			}
		}
		t.mu.Unlock()
		for i, id := range ids[:n] {
			if ok[i] {
				fn(id, batch[i])
			}
		}
		ids = ids[n:]
	}
}
