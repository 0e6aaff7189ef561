package guard

// The read records of one uid's sessions, bounded together
// (docs/DESIGN.md#record-budget).

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxRecordsPerUID is Config.MaxRecordsPerUID's default: about
// 440 MB of records at about 220 bytes each.
const DefaultMaxRecordsPerUID = 2_000_000

// recordSweepEvery is how often the per-uid totals are counted again.
const recordSweepEvery = time.Second

// noOwner is the key of the sessions whose owner is not known.
const noOwner = math.MaxUint32

// recordBudget bounds the read records that the sessions of one uid (and
// the scanner processes in them) hold together. A uid may have many live
// sessions, each with a record of every file it read, so without a bound
// one uid could hold sessions × files records. The totals are counted
// again at most once every recordSweepEvery, by a walk over the trackers
// (no count is kept per record, so none can drift), and a new read of a
// session whose uid is at its bound is not registered: the session's
// later write of that file is refused as unread (fail closed), as for a
// scanner past MaxProcTrackers. A read of a file the session already has
// a record of is still registered. A uid can pass the bound by one
// sweep's worth of reads.
type recordBudget struct {
	max     int
	ownerOf atomic.Pointer[func(session string) (uint32, bool)]

	mu      sync.Mutex // one sweep at a time
	swept   atomic.Int64
	totals  atomic.Pointer[map[uint32]int]
	refused atomic.Uint64
}

// SetSessionOwners installs the lookup of a session's owner uid (the
// sessions registry's OwnerOf); until then no read is refused by the
// record budget. Safe for concurrent use.
func (g *Guard) SetSessionOwners(ownerOf func(session string) (uint32, bool)) {
	g.records.ownerOf.Store(&ownerOf)
}

// recordAllowed reports whether tr, the tracker c's read of id counts in,
// may register it: yes unless the uid owning c's session is at its bound
// and tr has no record of id yet.
func (g *Guard) recordAllowed(c Caller, tr *Tracker, id FileID) bool {
	b := &g.records
	of := b.ownerOf.Load()
	if of == nil || b.max <= 0 {
		return true
	}
	uid, ok := (*of)(c.Session)
	if !ok {
		uid = noOwner
	}
	if g.uidRecords(uid) < b.max || tr.has(id) {
		return true
	}
	b.refused.Add(1)
	return false
}

// uidRecords returns the records uid's sessions held at the last sweep,
// sweeping again first when the last is older than recordSweepEvery.
func (g *Guard) uidRecords(uid uint32) int {
	b := &g.records
	now := g.now().UnixNano()
	if now-b.swept.Load() >= int64(recordSweepEvery) && b.mu.TryLock() {
		of := *b.ownerOf.Load()
		totals := map[uint32]int{}
		for _, t := range g.allTrackers() {
			owner, ok := of(t.Session())
			if !ok {
				owner = noOwner
			}
			totals[owner] += t.count()
		}
		b.totals.Store(&totals)
		b.swept.Store(now)
		b.mu.Unlock()
	}
	if m := b.totals.Load(); m != nil {
		return (*m)[uid]
	}
	return 0
}

// has reports whether the tracker holds a record of id.
func (t *Tracker) has(id FileID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.state[id]
	return ok
}
