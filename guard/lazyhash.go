package guard

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rubinofs/rubinofs/sessions"
)

// Deferred hashing of reads (docs/DESIGN.md#lazy-hash). A read registers
// the file's stat at once; the content hash is taken by a background worker
// soon after, or by the first decision that needs it, whichever comes
// first, and is attributed to the read only when the file's stat is still
// the one the read saw and that stat was not racy when the read was
// registered.

// DefaultLazyHashMin is the size in bytes from which a read's hash is
// deferred when Config.LazyHashMin is 0. Smaller files are hashed at the
// read: it costs less than the request that opened them, and a record
// hashed at once survives a later touch.
const DefaultLazyHashMin = 1 << 20

// DefaultMaxHashSize is the size in bytes above which a file's stat stands
// for its content when Config.MaxHashSize is 0 (docs/DESIGN.md#hash-bound):
// 1 GiB, about half a second of reading from the page cache here.
const DefaultMaxHashSize = 1 << 30

// maxDeferred bounds the deferred hashes queued for the background worker,
// in reads. A read beyond it is hashed at once, as before.
const maxDeferred = 64

// PendingHash is the deferred hash of one registered read: the stat the
// read saw, the mutation sequence at the read, and how to open the file
// later. Settle takes the hash once; every later call returns at once.
//
// Concurrency: safe for concurrent use; concurrent settlers wait for the
// first, which hashes outside every lock of the guard.
type PendingHash struct {
	t    *Tracker
	st   Stat
	base uint64
	open func() (*os.File, error) // the worker's opener (valid after the read's handle is gone)
	once sync.Once
	q    *hashQueue // the queue that knows p until it is settled (nil: none)
}

// settle takes the hash (once) with open, and attributes it to the
// record when the file's stat is still the read's and nothing changed it
// through the mount since the read; otherwise the record becomes unknown
// (seen, not fresh). A record replaced or forgotten meanwhile is left
// alone. open nil is settleVia with p's own opener alone.
func (p *PendingHash) settle(open func() (*os.File, error)) {
	if open == nil {
		p.settleVia(nil)
		return
	}
	p.once.Do(func() {
		t, id := p.t, p.st.ID
		var h Hash
		ok := false
		if t.lastMut(id).Seq == p.base {
			got, match, err := t.hashes.sumAt(p.st, open)
			ok = err == nil && match && t.lastMut(id).Seq == p.base
			h = got
		}
		if p.q != nil {
			defer p.q.untrack(p)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		r, cur := t.state[id]
		if !cur || r.pending != p {
			return
		}
		r.pending = nil
		if ok {
			r.hash = h
		} else {
			r.unknown = true
			t.hashes.deferredLost.Add(1)
		}
	})
}

// settleVia takes the hash (once) through the first of via and p's own
// opener (the read's name) that opens the read's file (same device and
// inode, reopen); via nil is skipped. When neither does (the read's name
// renamed or removed since, or leading to another file, and via none or
// another file too), it settles nothing: the record stays pending for a
// decision, which hashes through its own target
// (docs/DESIGN.md#fsstress-findings).
func (p *PendingHash) settleVia(via func() (*os.File, error)) {
	for _, open := range [...]func() (*os.File, error){via, p.open} {
		if open == nil {
			continue
		}
		f, ok := p.reopen(open)
		if !ok {
			continue
		}
		used := false
		p.settle(func() (*os.File, error) { used = true; return f, nil })
		if !used {
			f.Close()
		}
		return
	}
}

// reopen opens the file with open and reports whether it is the read's
// file (same identity); false closes it.
func (p *PendingHash) reopen(open func() (*os.File, error)) (*os.File, bool) {
	f, err := open()
	if err != nil {
		return nil, false
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil || StatOf(&st).ID != p.st.ID {
		f.Close()
		return nil, false
	}
	return f, true
}

// Settle takes the deferred hash now, if it is not taken yet (a nil p is a
// no-op). It hashes the file in the caller, opened by the read's name.
func (p *PendingHash) Settle() {
	if p != nil {
		p.settleVia(nil)
	}
}

// hashQueue is the background worker's queue: at most one worker runs,
// started when a hash is queued and ended when the queue is empty. It also
// knows every deferred hash not settled yet, queued or not, by file
// identity (settleFor).
type hashQueue struct {
	mu      sync.Mutex
	jobs    []*PendingHash
	running bool
	idle    sync.Cond // signalled when the worker ends
	// pending are the unsettled hashes by identity, and npending their
	// number (read without mu: settleFor's fast path).
	pending  map[FileID][]*PendingHash
	npending atomic.Int64
	// hold is read-locked by the worker around each job; PauseDeferred
	// write-locks it.
	hold sync.RWMutex
}

// track records p as unsettled until p.settle untracks it.
func (q *hashQueue) track(p *PendingHash) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = make(map[FileID][]*PendingHash)
	}
	p.q = q
	q.pending[p.st.ID] = append(q.pending[p.st.ID], p)
	q.npending.Add(1)
}

// untrack forgets p, settled now.
func (q *hashQueue) untrack(p *PendingHash) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ps := q.pending[p.st.ID]
	for i, o := range ps {
		if o == p {
			ps = append(ps[:i], ps[i+1:]...)
			q.npending.Add(-1)
			break
		}
	}
	if len(ps) == 0 {
		delete(q.pending, p.st.ID)
	} else {
		q.pending[p.st.ID] = ps
	}
}

// settleWhere settles every unsettled hash of an identity match accepts,
// as settleFor, through via first (PendingHash.settleVia).
func (q *hashQueue) settleWhere(match func(FileID) bool, via func() (*os.File, error)) {
	if q.npending.Load() == 0 {
		return
	}
	q.mu.Lock()
	var ps []*PendingHash
	for id, l := range q.pending {
		if match(id) {
			ps = append(ps, l...)
		}
	}
	q.mu.Unlock()
	for _, p := range ps {
		p.settleVia(via)
	}
}

// settleFor settles every unsettled hash of id in the caller, and waits
// for one that the worker or a decision is taking meanwhile (PendingHash's
// once). A settled job left in the queue costs the worker nothing. via,
// when not nil, is tried before each read's own name (PendingHash.settleVia).
func (q *hashQueue) settleFor(id FileID, via func() (*os.File, error)) {
	if q.npending.Load() == 0 {
		return
	}
	q.mu.Lock()
	ps := append([]*PendingHash(nil), q.pending[id]...)
	q.mu.Unlock()
	for _, p := range ps {
		p.settleVia(via)
	}
}

// offer queues p for the worker; false when maxDeferred are queued.
func (q *hashQueue) offer(p *PendingHash) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) >= maxDeferred {
		return false
	}
	q.jobs = append(q.jobs, p)
	if !q.running {
		q.running = true
		go q.drain()
	}
	return true
}

// drain settles the queued hashes in order until the queue is empty.
func (q *hashQueue) drain() {
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.running = false
			if q.idle.L != nil {
				q.idle.Broadcast()
			}
			q.mu.Unlock()
			return
		}
		p := q.jobs[0]
		q.jobs[0] = nil
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		q.hold.RLock()
		p.Settle()
		q.hold.RUnlock()
	}
}

// wait returns once the worker has settled everything queued.
func (q *hashQueue) wait() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idle.L == nil {
		q.idle.L = &q.mu
	}
	for q.running {
		q.idle.Wait()
	}
}

// NoteReadDeferred registers that c was served t's content, where c's reads
// count (NoteReadBy), deferring the content hash when it may
// (docs/DESIGN.md#lazy-hash): the record holds the stat at once and the
// hash is taken by the background worker with later, an opener of the same
// file that stays valid after t.Open's handle is gone (fusefs opens the
// backing path), or by the first decision that needs it. The returned
// PendingHash is nil when the hash was not deferred. The hash is taken at
// once, as NoteReadBy does, when the file is smaller than
// Config.LazyHashMin, its mtime or ctime lies within the hash cache's
// Granularity of now (racy), the queue is full, or the cache knows it; and
// it is not taken at all when the reader's record already describes this
// stat with no mutation through the mount since (the read adds nothing),
// nor for a scanner process whose session's record does: the process's
// record takes the session's hash (docs/DESIGN.md#scanner-known-hash).
// Errors are those of hashing at once. A no-op in ModeOff and for
// sessions.Unknown.
func (g *Guard) NoteReadDeferred(c Caller, t Target, later func() (*os.File, error)) (*PendingHash, error) {
	if g.mode == ModeOff || c.Session == sessions.Unknown {
		return nil, nil
	}
	tr := g.readsOf(c)
	if tr == nil || !g.recordAllowed(c, tr, t.Stat.ID) {
		return nil, nil
	}
	g.reads.Add(1)
	return tr.registerDeferred(t, later, g.lazyMin, &g.deferred, g.sessionOf(c.Session, tr))
}

// sessionOf returns session's tracker when reads is not it (reads is a
// scanner process's tracker: readsOf), for the hash its records may know;
// nil otherwise, or when the session has no tracker yet (it knows nothing).
func (g *Guard) sessionOf(session string, reads *Tracker) *Tracker {
	g.mu.Lock()
	t := g.sessions[session]
	g.mu.Unlock()
	if t == reads {
		return nil
	}
	return t
}

// SettleDeferred takes now, in the caller, the deferred hash of every read
// of id whose hash is still pending, in any session (docs/DESIGN.md#lazy-hash,
// docs/DESIGN.md#own-attr-change). fusefs calls it before a change through
// the mount that sets the file's ctime without changing its content
// (chmod, chown, utimens, an extended attribute, a link, a rename, an
// unlink of another name): a hash taken after it would not be under the
// read's stat, and the read would be lost (seen, never fresh), a false
// refusal of the session's next edit. Cheap when nothing is pending (one
// atomic load); otherwise it hashes the file, as a decision would. Safe for
// concurrent use.
//
// via opens the file the change is about to change, by the change's own
// descriptor or its own parent directory and name; nil for none. It is
// tried first and used only when it opens the read's file (same device and
// inode), then the read's own name is: a read whose name leads to another
// file by now (a hard-linked file whose name was exchanged or renamed
// over) is still settled through the change's own file
// (docs/DESIGN.md#fsstress-findings). A read neither leads to stays
// pending for the next decision.
func (g *Guard) SettleDeferred(id FileID, via func() (*os.File, error)) {
	g.deferred.settleFor(id, via)
}

// SettleDeferredWhere is SettleDeferred for every identity match
// accepts (at most the 64 queued reads are looked at): for a caller that
// knows a file by its inode number but not its device, or whose name for
// it may lead to another file by now.
func (g *Guard) SettleDeferredWhere(match func(FileID) bool, via func() (*os.File, error)) {
	g.deferred.settleWhere(match, via)
}

// PauseDeferred holds the background worker off until the returned
// resume is called: queued hashes wait (a decision or SettleDeferred
// still takes one in the caller). Tests use it to make the moment between
// a read and its deferred hash as long as they need, without timing. A
// job the worker has already started is finished first.
func (g *Guard) PauseDeferred() (resume func()) {
	g.deferred.hold.Lock()
	return g.deferred.hold.Unlock
}

// HasDeferred reports whether any read's hash is still pending, so a
// caller can skip the stat that SettleDeferred needs for its identity.
func (g *Guard) HasDeferred() bool { return g.deferred.npending.Load() > 0 }

// WaitDeferred returns once the background worker has settled every hash
// queued so far (the daemon calls it at unmount, so no deferred hash holds
// a backing file open past it; tests use it to wait for the worker).
func (g *Guard) WaitDeferred() { g.deferred.wait() }

// registerDeferred is NoteReadDeferred for one tracker; min is the size
// from which the hash may be deferred (< 0: never); known, when not nil,
// is the session's tracker of a scanner process's t, whose describing
// record lends its hash (docs/DESIGN.md#scanner-known-hash).
func (t *Tracker) registerDeferred(tg Target, later func() (*os.File, error), min int64, q *hashQueue, known *Tracker) (*PendingHash, error) {
	id, k := tg.Stat.ID, keyOf(tg.Stat)
	t.mu.Lock()
	if r, ok := t.state[id]; ok && r.describes(k, t.lastMut(id).Seq) {
		r.path, r.at = tg.Path, t.now()
		t.mu.Unlock()
		return nil, nil
	}
	t.mu.Unlock()
	if h, base, ok := known.describing(id, k); ok {
		// The session already holds exactly this content: the scanner
		// process's read takes its hash (docs/DESIGN.md#scanner-known-hash).
		t.mu.Lock()
		t.put(id, &record{path: tg.Path, mtimeNs: k.mtimeNs, ctimeNs: k.ctimeNs, size: k.size, hash: h, at: t.now()}, base)
		t.mu.Unlock()
		return nil, nil
	}
	now := t.now().UnixNano()
	gran := int64(t.hashes.Granularity)
	if t.hashes.FineCtime {
		gran = 0 // a change after tg's stat moves its ctime: docs/DESIGN.md#fine-ctime
	}
	if later == nil || min < 0 || tg.Stat.Size < min || k.mtimeNs+gran >= now || k.ctimeNs+gran >= now {
		return nil, t.Register(tg, Hash{})
	}
	if h, ok := t.hashes.lookup(k); ok {
		t.hashes.hits.Add(1)
		return nil, t.Register(tg, h)
	}
	p := &PendingHash{t: t, st: tg.Stat, open: later}
	q.track(p)
	t.mu.Lock()
	p.base = t.lastMut(id).Seq
	t.put(id, &record{path: tg.Path, mtimeNs: k.mtimeNs, ctimeNs: k.ctimeNs, size: k.size, at: t.now(), pending: p}, p.base)
	t.mu.Unlock()
	t.hashes.deferred.Add(1)
	if !q.offer(p) {
		p.settle(tg.Open) // hashed at once, as before deferral
	}
	return p, nil
}

// describing returns the hash of t's record of id and the mutation
// sequence it is at, when that record describes the content of the file
// whose stat key is now k (record.describes); ok is false otherwise and
// on a nil t. Safe for concurrent use.
func (t *Tracker) describing(id FileID, k hashKey) (h Hash, seq uint64, ok bool) {
	if t == nil {
		return Hash{}, 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	seq = t.lastMut(id).Seq
	if r, found := t.state[id]; found && r.describes(k, seq) {
		return r.hash, seq, true
	}
	return Hash{}, 0, false
}

// describes reports whether r already holds the content of a file whose
// stat key is now k at mutation sequence seq: its hash is known, nothing
// changed the file through the mount or outside it since (as far as the
// guard knows), and the stat is the one the record was made with. A read
// of such a file adds nothing. Called with the tracker's mu held.
func (r *record) describes(k hashKey, seq uint64) bool {
	return r.pending == nil && !r.unknown && !r.declared && !r.hash.IsZero() && !r.foreign && !r.influx && !r.mixed &&
		r.base == seq && r.size == k.size && r.mtimeNs == k.mtimeNs && r.ctimeNs == k.ctimeNs
}

// settlePending settles every deferred hash of the tracker (Save persists
// only records with a hash).
func (t *Tracker) settlePending() {
	t.mu.Lock()
	var ps []*PendingHash
	for _, r := range t.state {
		if r.pending != nil {
			ps = append(ps, r.pending)
		}
	}
	t.mu.Unlock()
	for _, p := range ps {
		p.Settle()
	}
}
