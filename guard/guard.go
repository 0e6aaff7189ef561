// Package guard is rubinofs' read tracker, hash cache and write policy: the
// only place that decides whether a mutation of an existing file is allowed.
// It has no FUSE import; package fusefs maps FUSE operations to Ops and asks.
//
// The policy (read-before-write): a session may overwrite, truncate, rename
// over or delete an existing regular file only when it has read it (or written
// it itself) and the file still hashes to what it saw. Never read: code
// "unread". Changed since: code "stale". Freshness is decided by the xxh3-128
// content hash; mtime is only a hint to recheck (docs/DESIGN.md#freshness).
// Records are per file identity, so every alias of a file shares one
// (docs/DESIGN.md#file-identity), and a session's own write refreshes its
// record (docs/DESIGN.md#own-write-refresh). Deleting a file is guarded too,
// so delete-and-recreate cannot bypass the check; creating a new file never
// is (docs/DESIGN.md#guarded-ops). Each session has its own tracker
// (docs/DESIGN.md#sessions); the tracker also answers duplicate reads and
// skeleton drill-ins (docs/DESIGN.md#dedup-window, docs/DESIGN.md#recovery,
// docs/DESIGN.md#skeleton-drill-in).
//
// Concurrency: every exported method is safe for concurrent use. Check and
// mutation are made one step by the caller holding Lock(id) across both.
package guard

import (
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/sessions"
)

// Decision is Decide's answer. Allow means the caller may proceed. WouldDeny
// is set with Allow in warn mode: the mutation proceeds, but Code and Message
// say what enforce would have refused (Message starting with WarnPrefix,
// never "refusing") and the caller logs it.
type Decision struct {
	Allow     bool
	WouldDeny bool
	Code      Code
	Message   string
	// ReplacedBy names who replaced the file since the session read it,
	// for a CodeStale refusal of a file that now has another identity
	// (docs/DESIGN.md#stale-replaced): "session NAME", ReplacedByAnother,
	// ReplacedOutside, or "" when not known or not that case.
	ReplacedBy string
	// Errno is the errno the caller gets on a refusal (Config.Errno:
	// EACCES by default, or EPERM; EAGAIN for CodeUnknownSession); set
	// whenever Code is, 0 when allowed.
	Errno syscall.Errno
}

// WarnPrefix starts the Message of a warn-mode decision (Decision.WouldDeny):
// the mutation was allowed, and what enforce mode would have said follows.
const WarnPrefix = "would refuse (warn mode, allowed): "

// Denial is one entry of the denial log (.rubino/guard/denials), refused or,
// in warn mode, refused-would-be (Warned).
type Denial struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	Pid     uint32    `json:"pid"`
	Comm    string    `json:"comm"`
	Op      Op        `json:"op"`
	Path    string    `json:"path"`
	Code    Code      `json:"code"`
	Message string    `json:"message"`
	// ReplacedBy is Decision.ReplacedBy.
	ReplacedBy string `json:"replaced_by,omitempty"`
	Warned     bool   `json:"warned,omitempty"`
}

// Config configures a Guard. The zero value is a usable enforcing guard.
type Config struct {
	Mode Mode
	// Unlink is the unlink policy (default UnlinkGuard: unlink(2) is
	// decided like every other mutation).
	Unlink UnlinkPolicy
	// Errno is what a refused caller gets, in Decision.Errno: 0 means
	// syscall.EACCES; ParseErrno gives the accepted values (EACCES, EPERM).
	Errno syscall.Errno
	// MaxDenials bounds the denial log (default 1000 entries); the oldest
	// are dropped first. Every denial is also counted in its session's
	// summary (DenialSummary, docs/DESIGN.md#denial-summary), which this
	// bound does not touch.
	MaxDenials int
	// OnDenial, when set, observes every RecordDenial (the daemon logs it
	// through slog). It runs on the caller's goroutine, inside the FUSE
	// request, before the denial is logged: it must be quick and must not
	// call back into the Guard's denial log.
	OnDenial func(Denial)
	// Granularity is the backing filesystem's timestamp granularity for the
	// hash cache's racy rule (default 1 s; see HashCache).
	Granularity time.Duration
	// FineCtime: the backing filesystem gives every change made after a
	// stat of a file a ctime distinct from the one that stat saw
	// (multigrain timestamps, Linux 6.13+ on ext4, XFS, btrfs and tmpfs;
	// the daemon probes it at mount), so a stat key that still matches
	// proves the file unchanged since it was taken and the hash cache's
	// racy rule is not needed (docs/DESIGN.md#fine-ctime). Ignored with
	// UntrustedStat.
	FineCtime bool
	// MaxHashes bounds the hash cache (default 1<<17 entries).
	MaxHashes int
	// UntrustedStat: the backing filesystem's stat may be a client cache's
	// (a network or FUSE filesystem another host writes through its own
	// client), so a cached hash is never reused: every freshness check and
	// every read registration hashes the content it is given to open
	// (HashCache.NoReuse; docs/DESIGN.md#uncached-view).
	UntrustedStat bool
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
	// Git, when set, enables the git-safe policy in DecideCaller
	// (docs/DESIGN.md#git-safe); nil decides without it.
	Git GitBlobs
	// LazyHashMin is the size in bytes from which the hash of a read
	// through a handle is deferred (docs/DESIGN.md#lazy-hash): 0 means
	// DefaultLazyHashMin, a negative value never.
	LazyHashMin int64
	// MaxHashSize is the size in bytes above which a file's content is
	// not read for its hash and its stat stands for it
	// (docs/DESIGN.md#hash-bound): 0 means DefaultMaxHashSize, a negative
	// value no bound.
	MaxHashSize int64
	// Scanners are the program names whose reads count for their own
	// process only (docs/DESIGN.md#scanner-reads); nil means
	// DefaultScanners, an empty non-nil list none.
	Scanners []string
	// MaxRecordsPerUID bounds the read records the sessions of one uid
	// hold together (docs/DESIGN.md#record-budget): 0 means
	// DefaultMaxRecordsPerUID, a negative value no bound. It applies once
	// SetSessionOwners is called.
	MaxRecordsPerUID int
}

// Guard holds one read tracker per session, the shared hash cache, the
// per-identity locks and the denial log.
type Guard struct {
	mode   Mode
	unlink UnlinkPolicy
	errno  syscall.Errno
	now    func() time.Time
	hashes *HashCache
	maxDen int
	git    GitBlobs
	// scanners and roots decide whose reads count (readers.go); procs
	// holds the scanner processes' records.
	scanners scannerSet
	roots    HarnessRoots
	procs    procTrackers
	// lazyMin and deferred: reads whose hash is deferred (lazyhash.go).
	lazyMin  int64
	deferred hashQueue
	// records bounds the read records per uid (recordbudget.go).
	records recordBudget

	mu       sync.Mutex
	sessions map[string]*Tracker

	// den is the denial log and its per-session summaries (denials.go).
	den denialLog

	lockMu sync.Mutex
	locks  map[FileID]*idLock

	mutMu     sync.Mutex
	mutations map[FileID]Mutation

	// open counts open handles per identity and keeps the records of an
	// identity whose last name is gone until its last handle is released
	// (handles.go).
	open openIdentities

	reads, writes, decisions, denied, warned atomic.Uint64
	// allowed, unread and stale count Decide's answers by code (a warn-mode
	// refusal counts under its code), for .rubino/metrics (DecisionCounts).
	allowed, unread, stale atomic.Uint64
	onDenial               func(Denial)
}

type idLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxDenials <= 0 {
		cfg.MaxDenials = 1000
	}
	if cfg.Errno == 0 {
		cfg.Errno = syscall.EACCES
	}
	if cfg.LazyHashMin == 0 {
		cfg.LazyHashMin = DefaultLazyHashMin
	}
	if cfg.MaxHashSize == 0 {
		cfg.MaxHashSize = DefaultMaxHashSize
	}
	if cfg.MaxRecordsPerUID == 0 {
		cfg.MaxRecordsPerUID = DefaultMaxRecordsPerUID
	}
	return &Guard{
		records:   recordBudget{max: cfg.MaxRecordsPerUID},
		mode:      cfg.Mode,
		unlink:    cfg.Unlink,
		errno:     cfg.Errno,
		now:       cfg.Now,
		hashes:    newHashCacheFor(cfg),
		maxDen:    cfg.MaxDenials,
		onDenial:  cfg.OnDenial,
		git:       cfg.Git,
		scanners:  newScannerSet(cfg.Scanners),
		lazyMin:   cfg.LazyHashMin,
		sessions:  make(map[string]*Tracker),
		locks:     make(map[FileID]*idLock),
		mutations: make(map[FileID]Mutation),
	}
}

// Mode returns the guard's mode.
func (g *Guard) Mode() Mode { return g.mode }

// Unlink returns the guard's unlink policy.
func (g *Guard) Unlink() UnlinkPolicy { return g.unlink }

// Errno returns the errno refused callers get (EACCES unless configured).
func (g *Guard) Errno() syscall.Errno { return g.errno }

// Hashes returns the shared hash cache.
func (g *Guard) Hashes() *HashCache { return g.hashes }

// ForSession returns the read tracker of session, creating it: one tracker
// per session, shared by all its callers (docs/DESIGN.md#sessions).
func (g *Guard) ForSession(session string) *Tracker {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.sessions[session]
	if !ok {
		t = newTracker(session, g.hashes, g.now, g.LastMutation)
		g.sessions[session] = t
	}
	return t
}

// Reset drops every session's tracker. The hash cache is kept: it describes
// files, not sessions.
func (g *Guard) Reset() {
	g.mu.Lock()
	g.sessions = make(map[string]*Tracker)
	g.mu.Unlock()
}

// DropSession drops one session's tracker (the session ended); its
// scanner processes keep their own records until they exit.
func (g *Guard) DropSession(session string) {
	g.mu.Lock()
	delete(g.sessions, session)
	g.mu.Unlock()
}

// RenameSession moves a session's tracker and its denial summary to a new
// name; an existing tracker (summary) of that name is replaced.
func (g *Guard) RenameSession(from, to string) {
	g.renameSummary(from, to) // before g.mu: RecordDenial takes the log's lock, then g.mu
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.sessions[from]; ok {
		delete(g.sessions, from)
		t.mu.Lock() // check reads the name under t.mu
		t.session = to
		t.mu.Unlock()
		g.sessions[to] = t
	}
	for _, t := range g.procTrackerList() {
		t.mu.Lock()
		if t.session == from {
			t.session = to
		}
		t.mu.Unlock()
	}
}

// Sessions lists the sessions that have a tracker, sorted.
func (g *Guard) Sessions() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.sessions))
	for s := range g.sessions {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// RecordCount returns how many files session has records of (0 for a
// session without a tracker; none is created).
func (g *Guard) RecordCount(session string) int {
	return g.tracker(session).count()
}

// tracker returns session's tracker without creating one.
func (g *Guard) tracker(session string) *Tracker {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sessions[session]
}

// NoteRead registers that session was served t's content (Tracker.Register).
// Errors are those of hashing. A no-op in ModeOff and for sessions.Unknown
// (a read nobody can be credited with).
func (g *Guard) NoteRead(session string, t Target) error {
	if g.mode == ModeOff || session == sessions.Unknown {
		return nil
	}
	g.reads.Add(1)
	return g.ForSession(session).Register(t, Hash{})
}

// NoteReadInFlux registers a read of t served while another session was
// changing it (Tracker.RegisterInFlux). A no-op in ModeOff.
func (g *Guard) NoteReadInFlux(session string, t Target) {
	if g.mode == ModeOff || session == sessions.Unknown {
		return
	}
	g.reads.Add(1)
	g.ForSession(session).RegisterInFlux(t)
}

// NoteWrite credits session with writing t's current content
// (Tracker.NoteWrite). Errors are those of hashing. A no-op in ModeOff,
// for sessions.Unknown, and for a file the session has no record of when
// its uid is at its record budget (docs/DESIGN.md#record-budget).
func (g *Guard) NoteWrite(session string, t Target) error {
	if g.mode == ModeOff || session == sessions.Unknown {
		return nil
	}
	g.writes.Add(1)
	tr := g.ForSession(session)
	if !g.recordAllowed(Caller{Session: session}, tr, t.Stat.ID) {
		return nil // past the uid's record budget: docs/DESIGN.md#record-budget
	}
	return tr.NoteWrite(t, Hash{})
}

// Lock takes the lock of file identity id and returns its unlock. fusefs
// holds it across a decision and the mutation it allows, so no other
// mutation through the mount slips in between. Locks of several identities
// must be taken in a fixed order (fusefs sorts by (Dev, Ino)).
func (g *Guard) Lock(id FileID) (unlock func()) {
	g.lockMu.Lock()
	l, ok := g.locks[id]
	if !ok {
		l = &idLock{}
		g.locks[id] = l
	}
	l.refs++
	g.lockMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		g.lockMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(g.locks, id)
		}
		g.lockMu.Unlock()
	}
}

// Forget drops every session's knowledge of id and its cached hash: the last
// name of the file is gone, and the inode number may be reused.
func (g *Guard) Forget(id FileID) { g.forgetBy(id, "") }

// forgetBy is Forget for a file whose last name session by removed ("":
// not known): every other session that had a record of it remembers its
// name as replaced by by (docs/DESIGN.md#stale-replaced).
func (g *Guard) forgetBy(id FileID, by string) {
	g.hashes.Invalidate(id)
	g.mutMu.Lock()
	delete(g.mutations, id)
	g.mutMu.Unlock()
	for _, t := range g.allTrackers() {
		t.forget(id, by)
	}
}

// Rename updates the display path of id in every session (records follow
// identities, so a renamed file keeps its records).
func (g *Guard) Rename(id FileID, path string) { g.RenameBy(id, path, "") }

// RenameBy is Rename for a rename made by session by ("": not known):
// every other session with a record of id remembers its old name as
// replaced by by (docs/DESIGN.md#stale-replaced), so a new file there is
// refused to it as stale, not unread. Safe for concurrent use.
func (g *Guard) RenameBy(id FileID, path, by string) {
	for _, t := range g.allTrackers() {
		t.rename(id, path, by)
	}
}

// RenamedOwn tells the guard that a change through the mount which sets
// only a file's ctime (a rename of it) took it from the stat before to
// the stat after, both taken under its identity lock (Lock): where a
// change after a stat always moves the ctime (Config.FineCtime), its
// cached hash is carried to after's key, so that the next decision on a
// file `sed -i` renamed into place reads nothing back
// (docs/DESIGN.md#fine-ctime). A no-op when the size or mtime differ, or
// the cache holds no entry under before. Safe for concurrent use.
func (g *Guard) RenamedOwn(before, after Stat) { g.hashes.carry(before, after) }

// CarriesHashes reports whether RenamedOwn can do anything (the hash
// cache trusts fine ctimes: Config.FineCtime), so a caller may skip the
// stat it would take for it.
func (g *Guard) CarriesHashes() bool { return g.hashes.FineCtime && !g.hashes.NoReuse }

// Invalidate drops the cached hash of id after an external change, so the
// next freshness check rehashes. Records stay: the hash stays authoritative,
// so an external touch with identical bytes keeps them fresh.
func (g *Guard) Invalidate(id FileID) { g.hashes.Invalidate(id) }

func (g *Guard) trackers() []*Tracker {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Tracker, 0, len(g.sessions))
	for _, t := range g.sessions {
		out = append(out, t)
	}
	return out
}

// DecisionCounts are Decide's answers by code since the guard started:
// allowed, and refused (or, in warn mode, would-be refused) as unread or
// stale. Each is monotonic; for .rubino/metrics. Safe for concurrent use.
type DecisionCounts struct {
	Allowed, Unread, Stale uint64
}

// DecisionCounts returns the decision counters (ModeOff decides nothing).
func (g *Guard) DecisionCounts() DecisionCounts {
	return DecisionCounts{Allowed: g.allowed.Load(), Unread: g.unread.Load(), Stale: g.stale.Load()}
}

// Counts are the guard's counters for .rubino/status.
type Counts struct {
	Reads     uint64 `json:"reads"`     // reads registered
	Writes    uint64 `json:"writes"`    // own writes credited
	Decisions uint64 `json:"decisions"` // mutations decided
	Denials   uint64 `json:"denials"`   // refused (enforce)
	Warnings  uint64 `json:"warnings"`  // would have been refused (warn)
	Sessions  int    `json:"sessions"`  // sessions with a tracker
	// RecordsRefused counts reads not registered because their session's
	// uid held its bound of records (docs/DESIGN.md#record-budget).
	RecordsRefused uint64    `json:"records_refused"`
	Hash           HashStats `json:"hash_cache"`
	// DenialLog is the denial log's sizes (docs/DESIGN.md#denial-summary).
	DenialLog DenialLogStats `json:"denial_log"`
}

// Counts returns the counters.
func (g *Guard) Counts() Counts {
	return Counts{
		Reads: g.reads.Load(), Writes: g.writes.Load(), Decisions: g.decisions.Load(),
		Denials: g.denied.Load(), Warnings: g.warned.Load(), Sessions: len(g.trackers()), RecordsRefused: g.records.refused.Load(),
		Hash: g.hashes.Stats(), DenialLog: g.DenialLogStats(),
	}
}

// TrackedRecord is one record of a session as shown in guard/tracked.
type TrackedRecord struct {
	Path  string `json:"path"`
	State string `json:"state"` // "fresh", "stale" or "gone"
	Hash  string `json:"hash"`  // hex xxh3-128 of the content the session saw
	Own   bool   `json:"own"`   // the record comes from the session's own write
}

// Tracked lists session's records sorted by path. lookup resolves a record's
// path to its current target (fusefs stats the backing file); a record whose
// path no longer resolves to the same identity is "gone", and one whose
// content differs is "stale". Checking freshness may hash files.
func (g *Guard) Tracked(session string, lookup func(path string) (Target, error)) []TrackedRecord {
	t := g.tracker(session)
	if t == nil {
		return nil
	}
	var out []TrackedRecord
	t.eachRecord(func(id FileID, r record) {
		tr := TrackedRecord{Path: r.path, Own: r.written, State: "gone"}
		if cur, err := lookup(r.path); err == nil && cur.Stat.ID == id {
			// check settles a deferred hash first (docs/DESIGN.md#lazy-hash)
			tr.State = "stale"
			if _, fresh, err := t.check(cur); err == nil && fresh {
				tr.State = "fresh"
			}
			if now, ok := t.snapshotOf(id); ok {
				r = now
			}
		}
		tr.Hash = r.hash.String()
		out = append(out, tr)
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
