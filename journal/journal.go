// Package journal is the store of the per-session change journal: the
// blobs of pre-images and one append-only log per session, the pre-image
// rule (once per path per checkpoint interval) and the queries a CLI needs
// to list, diff and rewind a session's changes. It knows nothing of FUSE
// or the guard; the mutation path calls it (docs/DESIGN.md#journal-store).
package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Journal. MaxBlobSize is the largest file (bytes)
// whose bytes a pre-image keeps (0: DefaultMaxBlobSize); Copy selects the
// copy method of the blob store (CopyAuto by default); Budget bounds the
// blobs and the session logs together in bytes (0: no bound; a pre-image
// past it is recorded as UnrecoverableOverBudget, a session whose change
// finds it spent has its journal stopped (ErrStopped), and GC removes
// ended sessions' logs to get back under it: docs/DESIGN.md#journal-budget); Now is the clock of record times (nil: time.Now). Sync
// says when records and blobs are made durable (SyncWrite, the zero
// value, or SyncFsync: docs/DESIGN.md#journal-sync); with SyncWrite,
// FlushInterval bounds how long the flusher waits after a write before
// making it durable (0: DefaultFlushInterval), and FlushError (nil:
// ignored) is called, from the flusher's goroutine, with each failed
// flush's error. OwnerOf (nil: none known) returns the uid a session
// belongs to; the first record of its log names it (Record.Owner).
// OwnerBudget bounds the bytes the sessions of one uid hold in the
// journal (0: no such bound), for every uid but those Exempt (nil: none)
// accepts; OthersBudget (0: no such bound) bounds those of all such uids
// together. Live (nil: none) reports whether a session of the name is
// live now: GC never takes its log for an ended one, though an earlier
// session of the name ended. None of them may take the Journal's locks
// (LogOwner takes none) (docs/DESIGN.md#journal-share,
// docs/DESIGN.md#session-names).
type Options struct {
	MaxBlobSize   int64
	Copy          CopyMode
	Budget        int64
	Now           func() time.Time
	Sync          SyncMode
	FlushInterval time.Duration
	FlushError    func(error)
	OwnerBudget   int64
	OthersBudget  int64
	OwnerOf       func(session string) (uid uint32, ok bool)
	Exempt        func(uid uint32) bool
	Live          func(session string) bool
}

// Journal is the journal under STATE/journal: blobs/ and sessions/. Safe
// for concurrent use: each session has one mutex, held for the whole of
// Record and Checkpoint (the capture of pre-images included), so the
// records of a session are totally ordered and their Seq has no gaps;
// different sessions proceed in parallel. The blob store needs no lock.
type Journal struct {
	dir   string
	blobs *Blobs
	now   func() time.Time

	// gcMu is read-held by Record from the capture to the append and
	// write-held by GC's blob sweep, so a blob a record is about to name
	// is never swept (docs/DESIGN.md#journal-rewind).
	gcMu sync.RWMutex

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool

	// fl is SyncWrite's background flusher; nil with SyncFsync.
	fl *flusher

	// budget bounds blobs and logs together (0: no bound); logBytes is
	// the running total of the session logs' sizes
	// (docs/DESIGN.md#journal-budget).
	budget   int64
	logBytes atomic.Int64

	// ownerBudget, ownerOf and exempt are Options'; shares holds each
	// bounded uid's Share, made at its first use
	// (docs/DESIGN.md#journal-share).
	ownerBudget int64
	ownerOf     func(string) (uint32, bool)
	exempt      func(uint32) bool
	live        func(string) bool // Options.Live
	others      *Share            // every bounded uid's together (nil: no OthersBudget)
	sharesMu    sync.Mutex
	shares      map[uint32]*Share
}

// session is the in-memory state of one open session log.
type session struct {
	mu      sync.Mutex
	log     *sessionLog
	seq     uint64
	nextCP  int
	lastCP  string
	touched *touchedSet // path ids (log.tab) with a pre-image in the current interval
	err     error       // a failed open, returned to every caller
	// stopped is why the session's journal is stopped ("": it is not):
	// docs/DESIGN.md#journal-budget.
	stopped string
	// share is the share of the budget the session's uid has (nil: none),
	// and owner (when ownerOK) that uid, set when its log opens
	// (docs/DESIGN.md#journal-share).
	share   *Share
	owner   uint32
	ownerOK bool
}

// Open returns the journal under dir (STATE/journal), creating dir,
// dir/blobs and dir/sessions (0700). Session logs open lazily, at their
// first use. It walks the blob store once to learn its size (Blobs.Used).
// With SyncWrite it starts the flusher goroutine, which Close stops.
func Open(dir string, opt Options) (*Journal, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		return nil, err
	}
	b, err := NewBlobs(filepath.Join(dir, "blobs"), opt.MaxBlobSize, opt.Copy)
	if err != nil {
		return nil, err
	}
	b.SetBudget(opt.Budget)
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	j := &Journal{dir: dir, blobs: b, now: now, sessions: map[string]*session{}, budget: opt.Budget,
		ownerBudget: opt.OwnerBudget, ownerOf: opt.OwnerOf, exempt: opt.Exempt, live: opt.Live, shares: map[uint32]*Share{}}
	if opt.OthersBudget > 0 {
		j.others = &Share{limit: opt.OthersBudget, others: true}
	}
	if err := j.countLogs(); err != nil {
		return nil, err
	}
	b.others = j.logBytes.Load
	if opt.Sync == SyncWrite {
		b.deferSync = true
		j.startFlusher(opt.FlushInterval, opt.FlushError)
	}
	return j, nil
}

// Blobs is the journal's blob store.
func (j *Journal) Blobs() *Blobs { return j.blobs }

// Close stops the flusher, makes everything written durable (Flush) and
// closes every open session log. Later calls fail with ErrClosed. The
// error is the flush's or a close's.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	j.stopFlusher()
	first := j.Flush()
	for _, s := range j.sessions {
		s.mu.Lock()
		if s.log != nil {
			if err := s.log.close(); err != nil && first == nil {
				first = err
			}
			s.log = nil
		}
		s.err = ErrClosed
		s.mu.Unlock()
	}
	return first
}

// ErrClosed is returned by calls on a closed Journal.
var ErrClosed = errors.New("journal: closed")

// ValidSession reports whether name can name a session log: non-empty, at
// most 128 bytes, no '/', no NUL, and not starting with '.'.
func ValidSession(name string) bool {
	return name != "" && len(name) <= 128 && !strings.ContainsAny(name, "/\x00") && name[0] != '.'
}

// LogPath is the log file of session name: DIR/sessions/NAME.jsonl.
func (j *Journal) LogPath(name string) string {
	return filepath.Join(j.dir, "sessions", name+".jsonl")
}

// session returns the session, opened and locked; the caller unlocks it.
func (j *Journal) session(name string) (*session, error) {
	if !ValidSession(name) {
		return nil, fmt.Errorf("journal: bad session name %q", name)
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, ErrClosed
	}
	s := j.sessions[name]
	if s == nil {
		s = &session{}
		j.sessions[name] = s
	}
	s.mu.Lock()
	j.mu.Unlock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	if s.log == nil {
		if err := j.load(name, s); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	return s, nil
}

// load opens the session's log and rebuilds its state: the next Seq, the
// checkpoint counter and the paths with a pre-image since the last
// checkpoint. A new log starts with the implicit checkpoint.
func (j *Journal) load(name string, s *session) error {
	path := j.LogPath(name)
	st, statErr := os.Stat(path)
	s.touched = nil
	s.stopped = ""
	n := 0
	l, err := openLog(path, func(r *Record, tab *pathTable) error {
		n++
		s.seq = r.Seq
		if s.touched == nil {
			s.touched = newTouchedSet(tab)
		}
		if r.Op == OpCheckpoint {
			s.nextCP++
			s.lastCP = r.ID
			s.touched = newTouchedSet(tab)
			s.stopped = ""
			return nil
		}
		if r.Op == OpStop {
			s.stopped = r.Label
			return nil
		}
		for _, p := range r.Pre {
			s.touched.add(tab.intern(p.Path))
		}
		forgetMoved(tab, s.touched, r)
		return nil
	})
	if err != nil {
		return err
	}
	if os.IsNotExist(statErr) {
		if err := syncDir(filepath.Dir(path)); err != nil {
			l.close()
			return err
		}
	}
	s.share = j.ShareOf(name)
	if j.ownerOf != nil {
		s.owner, s.ownerOK = j.ownerOf(name)
	}
	sh := s.share
	l.grew = func(n int64) {
		j.logGrew(n)
		sh.add(n)
	}
	if st != nil {
		j.logGrew(l.size - st.Size()) // a torn tail cut away
	}
	s.log = l
	if s.touched == nil || s.touched.tab != l.tab {
		s.touched = newTouchedSet(l.tab)
	}
	if n == 0 {
		if _, err := j.checkpointLocked(s, "session start"); err != nil {
			// The next use opens the log again and writes its first
			// record (the one naming its uid) again.
			l.close()
			s.log = nil
			return err
		}
	}
	return nil
}

// Capture returns the pre-image of path, as it is now. Record calls it
// under the session's mutex, so it must not call back into the Journal;
// CaptureAt is the usual implementation.
type Capture func(path string) (PreImage, error)

// Record journals one change of session: op on path (and path2, the second
// name of a rename, exchange or link, or ""). For each of path and path2
// not yet changed in the current checkpoint interval it first calls
// capture and keeps the pre-image; then it appends the record. With
// SyncFsync it fdatasyncs it (a write, truncate or chmod that saves no
// pre-image skips the fdatasync: docs/DESIGN.md#journal-rewind) and
// returns once the record is durable; with SyncWrite it returns once the
// record and its blobs are written (the flusher makes them durable within
// its interval: docs/DESIGN.md#journal-sync). The caller makes the change
// only after a nil error (the pre-image is durable before the mutation is
// acknowledged). On an error nothing is recorded and the
// paths stay uncaptured; the caller decides whether to refuse the change
// (the errno the mount returns, EIO for example).
func (j *Journal) Record(sessionName, op, path, path2 string, capture Capture) (Record, error) {
	// The GC lock before the session's: GC takes them in that order.
	j.gcMu.RLock()
	defer j.gcMu.RUnlock()
	s, err := j.session(sessionName)
	if err != nil {
		return Record{}, err
	}
	defer s.mu.Unlock()
	if err := j.stopIfSpent(s); err != nil {
		return Record{}, err
	}
	rec := Record{Seq: s.seq + 1, Time: j.now().UTC(), Op: op, Path: path, Path2: path2}
	for _, p := range []string{path, path2} {
		if p == "" || s.touched.has(s.log.tab.intern(p)) || (p == path2 && p == path) {
			continue
		}
		pre, err := capture(p)
		if err != nil {
			return Record{}, fmt.Errorf("journal: pre-image of %s: %w", p, err)
		}
		pre.Path = p
		rec.Pre = append(rec.Pre, pre)
	}
	synced := j.syncRecord(rec)
	if err := s.log.write(rec, synced); err != nil {
		return Record{}, err
	}
	if !synced {
		j.wrote(s.log)
	}
	s.seq = rec.Seq
	for _, p := range rec.Pre {
		s.touched.add(s.log.tab.intern(p.Path))
	}
	forgetMoved(s.log.tab, s.touched, &rec)
	return rec, nil
}

// Checkpoint appends a checkpoint with label to session's log (durable on
// return) and starts a new interval: the next change of every path saves
// its pre-image again. IDs are "cp" and a six-digit counter from cp000000
// (the implicit checkpoint at the session's start), so they sort in order.
func (j *Journal) Checkpoint(sessionName, label string) (Record, error) {
	s, err := j.session(sessionName)
	if err != nil {
		return Record{}, err
	}
	defer s.mu.Unlock()
	return j.checkpointLocked(s, label)
}

func (j *Journal) checkpointLocked(s *session, label string) (Record, error) {
	rec := Record{Seq: s.seq + 1, Time: j.now().UTC(), Op: OpCheckpoint,
		ID: fmt.Sprintf("cp%06d", s.nextCP), Label: label}
	if s.seq == 0 && s.ownerOK { // the log's first record names its uid
		uid := s.owner
		rec.Owner = &uid
	}
	if err := s.log.append(rec); err != nil {
		return Record{}, err
	}
	s.seq = rec.Seq
	s.nextCP++
	s.lastCP = rec.ID
	s.touched = newTouchedSet(s.log.tab)
	if s.stopped != "" {
		// A checkpoint under the budget restarts a stopped journal; over
		// it, the stop is written again so a reload keeps it.
		s.stopped = ""
		if j.spent() || s.share.spent() {
			if err := j.stopIfSpent(s); !errors.Is(err, ErrStopped) {
				return rec, err
			}
		}
	}
	return rec, nil
}

// forgetMoved drops, after a rename or exchange, the names below both of
// its names from the interval's captured set (path ids of tab): they now
// name other objects (those moved in) or nothing, so their next change
// saves a pre-image again (docs/DESIGN.md#journal-rewind). It costs the
// names below, not the interval's whole set
// (docs/DESIGN.md#journal-interval-cost).
func forgetMoved(tab *pathTable, touched *touchedSet, r *Record) {
	if r.Op != OpRename && r.Op != OpExchange {
		return
	}
	if r.Path != "" {
		touched.forgetBelow(tab.intern(r.Path))
	}
	if r.Path2 != "" {
		touched.forgetBelow(tab.intern(r.Path2))
	}
}
