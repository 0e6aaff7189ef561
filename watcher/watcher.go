// Package watcher is rubinofs' recursive fsnotify watcher over the backing
// workspace. It tells changes made outside the mount (an IDE, a human's shell,
// another container writing the backing directory) from the daemon's own, and
// feeds the external ones, coalesced, to an invalidation callback (package
// fusefs drops the guard's cached hashes and the kernel's caches for them).
//
// What is watched: every directory of the workspace, added as the initial walk
// finds it or as it is created later, except the subtrees Skip selects
// (default: .git/objects, whose files are immutable, named by their content
// and churned by every git command; watching them buys nothing but events).
// Skipped subtrees, and subtrees that could not be watched because inotify ran
// out of watches (ENOSPC, or Config.MaxWatches), are reported through
// OnUnwatched: the mount gives them short cache timeouts instead.
//
// Own changes: the daemon brackets every change it makes with Begin/end. An
// event for a path is the daemon's own when no own change of that path is in
// flight and the path's lstat equals the one recorded when the last own change
// ended; anything else is external. Since Linux 6.13 (multigrain timestamps)
// a change right after the recorded lstat gets a distinct ctime, so equal stats
// mean no one else wrote. An own change of a directory above a path (a
// rename moving it) puts off the decision on the path until it has ended.
// Own directory renames are bracketed with BeginMove: the own records below
// the old path move to the new one, an event that names an old path (the
// old watch reports under it) is matched where the file is now, and the scan
// of the moved directory reports an entry only when its ctime is not before
// the move began (a rename changes nothing below the directory; anything
// changed in the moment between the old watch and the new one has a later
// ctime). Directory bookkeeping (adding and dropping watches) is done for own
// and external events alike.
//
// Overflow: when the kernel queue overflows (fsnotify.ErrEventOverflow) events
// are lost: OnOverflow is called (the mount invalidates everything cached) and
// the tree is walked again to add watches for directories created meanwhile.
// The guard's hash check at write time protects correctness in any case.
//
// Concurrency: one goroutine drains fsnotify's channels (a buffered watcher)
// and another delivers batches; callbacks run on the delivery goroutine, one
// at a time, and must not call back into the Watcher's Close. Begin, Stats and
// Close are safe for concurrent use.
package watcher

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// Op is what happened to a path, as a set of bits.
type Op uint32

// The operations, as fsnotify reports them.
const (
	Create Op = 1 << iota // the name was created (or moved in)
	Write                 // the content was written
	Remove                // the name was removed
	Rename                // the name was moved away
	Chmod                 // attributes changed (chmod, chown, utimens)
)

// scanned marks a path queued by the scan of a directory that appeared (its
// entries raised no event of their own before the watch). It is never
// delivered: flush strips it.
const scanned Op = 1 << 31

// String lists the bits, "CREATE|WRITE".
func (o Op) String() string {
	var parts []string
	for _, p := range []struct {
		op   Op
		name string
	}{{Create, "CREATE"}, {Write, "WRITE"}, {Remove, "REMOVE"}, {Rename, "RENAME"}, {Chmod, "CHMOD"}} {
		if o&p.op != 0 {
			parts = append(parts, p.name)
		}
	}
	return strings.Join(parts, "|")
}

// Event is one coalesced external change: every operation seen on Path
// (workspace-relative, slash-separated, never "") within one batch window.
type Event struct {
	Path string
	Op   Op
}

// DefaultSkip is the default Config.Skip: .git/objects at any depth.
func DefaultSkip(rel string) bool {
	return rel == ".git/objects" || strings.HasSuffix(rel, "/.git/objects")
}

// Config configures a Watcher.
type Config struct {
	// Root is the backing workspace directory (absolute; /proc/self/fd/N
	// for an in-place mount).
	Root string
	// Skip reports whether a directory subtree (workspace-relative) is not
	// watched; nil means DefaultSkip.
	Skip func(rel string) bool
	// Coalesce is the batch window: events of one path within it are
	// delivered once, at most Coalesce after the first (default 5 ms).
	Coalesce time.Duration
	// MaxWatches limits the watches this watcher adds (0: only the
	// kernel's fs.inotify.max_user_watches limits them). Past it, as on
	// ENOSPC, subtrees are reported unwatched.
	MaxWatches int
	// QueueSize is fsnotify's buffered channel size (default 4096 events).
	QueueSize int
	// OnEvents receives each batch of external changes.
	OnEvents func([]Event)
	// OnOverflow is called when events were lost.
	OnOverflow func()
	// OnUnwatched is called for each subtree root left unwatched, with the
	// reason (ErrSkipped for Skip, else the error of adding the watch).
	OnUnwatched func(rel string, err error)
	// OnProgress, if set, is called during the initial walk with the number
	// of directories watched so far (every 1000 and at the end).
	OnProgress func(dirs int, done bool)
	// Logger receives diagnostics as structured records (default:
	// discard): an error fsnotify reports (other than an overflow, which
	// goes to OnOverflow) at level warn, once per distinct error.
	Logger *slog.Logger
}

// ErrSkipped is the reason OnUnwatched gives for a subtree Config.Skip chose.
var ErrSkipped = errors.New("skipped by configuration")

// errLimit is the reason for a subtree past Config.MaxWatches.
var errLimit = errors.New("watch limit reached (ENOSPC)")

// maxUnwatched bounds the subtrees reported one by one; past it the whole
// workspace ("") is reported once.
const maxUnwatched = 64

// Watcher watches one workspace. Create it with Start.
type Watcher struct {
	cfg Config
	fsw *fsnotify.Watcher
	log *slog.Logger

	mu        sync.Mutex
	dirs      map[string]bool // watched directories (rel)
	unwatched map[string]bool
	pending   map[string]Op
	timer     *time.Timer
	requeued  map[string]Op // paths whose own change was in flight at delivery

	ownMu     sync.Mutex
	own       map[string]*ownState
	moves     []ownMove // the daemon's own directory moves, oldest first
	lastPrune time.Time

	deliver    chan struct{}
	overflowed chan struct{} // errLoop to drain: events were lost
	stop       chan struct{}
	wg         sync.WaitGroup

	events, external, ownEvents, overflows, batches atomic.Uint64
	closed                                          atomic.Bool
}

// ownState is what the watcher knows of the daemon's own changes of one
// path. gen counts ended changes; recGen is the gen whose resulting lstat
// is recorded in st/exists (recGen < gen: a record is being taken). rel is
// the key it is kept under: an own move of a directory above it re-keys it
// (noteMove), and the recording lstat follows.
type ownState struct {
	rel         string
	inflight    int
	gen, recGen uint64
	st          syscall.Stat_t
	exists      bool
	at          time.Time
}

// Start walks Root, adds the watches and starts watching. It fails only when
// inotify cannot be initialised or Root cannot be read; subtrees that cannot
// be watched are reported through OnUnwatched.
func Start(cfg Config) (*Watcher, error) {
	if cfg.Skip == nil {
		cfg.Skip = DefaultSkip
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = 5 * time.Millisecond
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnEvents == nil {
		cfg.OnEvents = func([]Event) {}
	}
	if cfg.OnOverflow == nil {
		cfg.OnOverflow = func() {}
	}
	if cfg.OnUnwatched == nil {
		cfg.OnUnwatched = func(string, error) {}
	}
	fsw, err := fsnotify.NewBufferedWatcher(uint(cfg.QueueSize))
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		cfg: cfg, fsw: fsw, log: cfg.Logger,
		dirs: map[string]bool{}, unwatched: map[string]bool{},
		pending: map[string]Op{}, requeued: map[string]Op{},
		own:     map[string]*ownState{},
		deliver: make(chan struct{}, 1), stop: make(chan struct{}),
		overflowed: make(chan struct{}, 1),
	}
	if _, err := os.Stat(cfg.Root); err != nil {
		fsw.Close()
		return nil, err
	}
	n := w.addTree("", nil)
	if cfg.OnProgress != nil {
		cfg.OnProgress(n, true)
	}
	w.wg.Add(3)
	go w.drain()
	go w.errLoop()
	go w.deliverLoop()
	return w, nil
}

// abs returns the backing path of rel.
func (w *Watcher) abs(rel string) string {
	if rel == "" {
		return w.cfg.Root
	}
	return w.cfg.Root + "/" + rel
}

// rel returns the workspace-relative path of a backing path fsnotify reported.
func (w *Watcher) rel(p string) (string, bool) {
	if p == w.cfg.Root {
		return "", true
	}
	r, ok := strings.CutPrefix(p, w.cfg.Root+"/")
	return r, ok
}

// addTree watches dir rel and every directory below it that is not skipped,
// and returns how many it watched. found, if set, receives every entry seen
// below rel (for the scan of a directory created before its watch).
func (w *Watcher) addTree(rel string, found func(rel string)) int {
	count := 0
	var walk func(rel string)
	walk = func(rel string) {
		if !w.addDir(rel) {
			return
		}
		count++
		if w.cfg.OnProgress != nil && count%1000 == 0 {
			w.cfg.OnProgress(count, false)
		}
		ents, err := os.ReadDir(w.abs(rel))
		if err != nil {
			return // removed meanwhile: its Remove event follows
		}
		for _, e := range ents {
			child := path.Join(rel, e.Name())
			if found != nil {
				found(child)
			}
			if e.Type()&fs.ModeDir != 0 {
				walk(child)
			}
		}
	}
	walk(rel)
	return count
}

// addDir adds one watch; false when rel is not watched (skipped, limit,
// error).
func (w *Watcher) addDir(rel string) bool {
	if rel != "" && w.cfg.Skip(rel) {
		w.reportUnwatched(rel, ErrSkipped)
		return false
	}
	w.mu.Lock()
	if w.dirs[rel] {
		w.mu.Unlock()
		return true
	}
	limited := w.cfg.MaxWatches > 0 && len(w.dirs) >= w.cfg.MaxWatches
	w.mu.Unlock()
	var err error
	if limited {
		err = errLimit
	} else {
		err = w.fsw.AddWith(w.abs(rel))
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			w.reportUnwatched(rel, err)
		}
		return false
	}
	w.mu.Lock()
	w.dirs[rel] = true
	w.mu.Unlock()
	return true
}

// reportUnwatched records and reports an unwatched subtree root, collapsing
// to the whole workspace past maxUnwatched.
func (w *Watcher) reportUnwatched(rel string, err error) {
	w.mu.Lock()
	if w.unwatched[rel] || w.unwatched[""] {
		w.mu.Unlock()
		return
	}
	if len(w.unwatched) >= maxUnwatched {
		rel = ""
	}
	w.unwatched[rel] = true
	w.mu.Unlock()
	w.cfg.OnUnwatched(rel, err)
}

// dropTree forgets the watches of rel and below (it was removed or moved
// away; fsnotify dropped the watch of rel itself, not of its descendants).
func (w *Watcher) dropTree(rel string) {
	w.mu.Lock()
	var gone []string
	for d := range w.dirs {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			gone = append(gone, d)
			delete(w.dirs, d)
		}
	}
	w.mu.Unlock()
	for _, d := range gone {
		w.fsw.Remove(w.abs(d)) // ErrNonExistentWatch for ones already gone
	}
}

// drain reads fsnotify's events (so its buffer never fills while a batch
// is delivered), keeps the watch set in step and queues events; it handles
// the overflows errLoop reports.
func (w *Watcher) drain() {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case <-w.overflowed:
			w.Overflow()
		}
	}
}

// errLoop reads fsnotify's errors until fsnotify closes the channel (at
// Close), and never calls into fsnotify itself: fsnotify sends some errors
// while holding the lock that Add and Remove take (a failed removal of a
// moved directory's watch, backend_inotify.go handleEvent), so a reader of
// Errors that is itself waiting in Remove (drain's dropTree) deadlocks the
// watcher and its Close. Overflows are handed to drain.
func (w *Watcher) errLoop() {
	defer w.wg.Done()
	var lastErr string
	for err := range w.fsw.Errors {
		if errors.Is(err, fsnotify.ErrEventOverflow) {
			select {
			case w.overflowed <- struct{}{}:
			default: // one pending overflow covers this one
			}
		} else if msg := err.Error(); msg != lastErr {
			// Degraded, continuing: the event is lost, the watcher runs
			// on. The same error again is not logged again.
			lastErr = msg
			w.log.Warn("watcher error: an external change may be missed", "err", err)
		}
	}
}

// handle processes one fsnotify event.
func (w *Watcher) handle(ev fsnotify.Event) {
	rel, ok := w.rel(ev.Name)
	if !ok || rel == "" {
		return
	}
	w.events.Add(1)
	var op Op
	if ev.Has(fsnotify.Create) {
		op |= Create
	}
	if ev.Has(fsnotify.Write) {
		op |= Write
	}
	if ev.Has(fsnotify.Remove) {
		op |= Remove
	}
	if ev.Has(fsnotify.Rename) {
		op |= Rename
	}
	if ev.Has(fsnotify.Chmod) {
		op |= Chmod
	}
	if op&(Remove|Rename) != 0 {
		w.dropTree(rel)
	}
	if op&Create != 0 {
		var st syscall.Stat_t
		if syscall.Lstat(w.abs(rel), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			// Watch first, then scan: whatever was created in it before
			// the watch raised no event of its own.
			w.addTree(rel, func(child string) { w.queue(child, Create|scanned) })
		}
	}
	w.queue(rel, op)
}

// queue adds op on rel to the pending batch and arms the batch timer.
func (w *Watcher) queue(rel string, op Op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[rel] |= op
	if w.timer == nil {
		w.timer = time.AfterFunc(w.cfg.Coalesce, func() {
			select {
			case w.deliver <- struct{}{}:
			default:
			}
		})
	}
}

// deliverLoop delivers batches, one at a time.
func (w *Watcher) deliverLoop() {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case <-w.deliver:
			w.flush()
		}
	}
}

// flush takes the pending batch, drops the daemon's own changes and delivers
// the rest.
func (w *Watcher) flush() {
	w.mu.Lock()
	batch := w.pending
	w.pending = map[string]Op{}
	w.timer = nil
	w.mu.Unlock()

	var out []Event
	for rel, op := range batch {
		switch how, also := w.classify(rel, op); how {
		case ownInFlight:
			w.queue(rel, op) // decide once the own change has ended
		case ownDone:
			w.ownEvents.Add(1)
		default:
			out = append(out, Event{Path: rel, Op: op &^ scanned})
			for _, p := range also {
				out = append(out, Event{Path: p, Op: op &^ scanned})
			}
		}
	}
	w.pruneOwn()
	if len(out) == 0 {
		return
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	out = dedupEvents(out)
	w.external.Add(uint64(len(out)))
	w.batches.Add(1)
	w.cfg.OnEvents(out)
}

type origin int

const (
	external origin = iota
	ownInFlight
	ownDone
)

// classify tells an own change from an external one. The own state is read
// before and after the lstat: if any own change of the path, or of a
// directory above it (a rename moving it), was in flight, ended or not yet
// recorded around it, the decision is put off to the next batch (the events
// are queued again, never dropped). Otherwise the path is the daemon's own
// exactly when its lstat is what the last own change left.
//
// Own directory moves (BeginMove): an event may name a path by where it was
// before the daemon moved a directory above it (inotify reports the old
// watch's events under the old path), so each such path is also tried where
// the moves took it; and an entry the scan of an own-moved directory found
// is not a change at all when its ctime predates the move (a rename changes
// no file below the directory, and any change after it sets a later ctime).
// also lists, for an external event of a path that no longer exists, where
// the own moves took it, so the change is applied where the file is now.
func (w *Watcher) classify(rel string, op Op) (how origin, also []string) {
	type cand struct {
		rel string
		o   *ownState
		gen uint64
	}
	w.ownMu.Lock()
	var cands []cand
	for _, c := range w.movedPaths(rel) {
		if w.busyLocked(c) {
			w.ownMu.Unlock()
			return ownInFlight, nil
		}
		if o := w.own[c]; o != nil {
			cands = append(cands, cand{c, o, o.gen})
		}
		if c != rel {
			also = append(also, c)
		}
	}
	// The scan rule: the latest own move of a watched directory above rel.
	var ref *syscall.Timespec
	if op&scanned != 0 && op&^(Create|scanned) == 0 {
		for i := len(w.moves) - 1; i >= 0; i-- {
			if m := &w.moves[i]; strings.HasPrefix(rel, m.to+"/") {
				if m.watched {
					r := m.ref
					ref = &r
				}
				break
			}
		}
	}
	w.ownMu.Unlock()
	if len(cands) == 0 && ref == nil {
		return external, w.alsoIfGone(rel, also)
	}
	sts := make([]syscall.Stat_t, len(cands))
	errs := make([]error, len(cands))
	for i, c := range cands {
		errs[i] = syscall.Lstat(w.abs(c.rel), &sts[i])
	}
	var rst syscall.Stat_t
	rerr := syscall.Lstat(w.abs(rel), &rst)
	w.ownMu.Lock()
	defer w.ownMu.Unlock()
	for i, c := range cands {
		switch o := c.o; {
		case w.own[c.rel] != o || o.gen != c.gen || w.busyLocked(c.rel):
			return ownInFlight, nil
		case o.exists == (errs[i] == nil) && (errs[i] != nil || sameStat(&o.st, &sts[i])):
			return ownDone, nil
		}
	}
	if ref != nil && rerr == nil && !w.busyLocked(rel) && tsBefore(rst.Ctim, *ref) {
		return ownDone, nil // unchanged since before the daemon moved it
	}
	if rerr == nil {
		also = nil
	}
	return external, also
}

// alsoIfGone returns also when rel no longer exists (the event is about a
// file an own move took elsewhere), else nil.
func (w *Watcher) alsoIfGone(rel string, also []string) []string {
	if len(also) == 0 {
		return nil
	}
	var st syscall.Stat_t
	if syscall.Lstat(w.abs(rel), &st) == nil {
		return nil
	}
	return also
}

// busyLocked reports whether an own change of rel or of a directory above it
// is in flight or not yet recorded. Called with ownMu held.
func (w *Watcher) busyLocked(rel string) bool {
	for p := rel; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if o := w.own[p]; o != nil && (o.inflight > 0 || o.recGen != o.gen) {
			return true
		}
	}
	return false
}

// movedPaths returns rel and every path the own directory moves recorded
// since may have taken it to: starting at each move whose source holds rel,
// that move and every later one applied in order (a later directory of the
// same name is another directory, so each start is tried). Called with
// ownMu held.
func (w *Watcher) movedPaths(rel string) []string {
	out := []string{rel}
	for i := range w.moves {
		if !underOrSame(rel, w.moves[i].from) {
			continue
		}
		p := rel
		for _, m := range w.moves[i:] {
			if underOrSame(p, m.from) {
				p = m.to + p[len(m.from):]
			}
		}
		dup := false
		for _, q := range out {
			dup = dup || q == p
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}

// underOrSame reports whether p is dir or lies below it.
func underOrSame(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// tsBefore reports whether a is strictly earlier than b.
func tsBefore(a, b syscall.Timespec) bool {
	return a.Sec < b.Sec || (a.Sec == b.Sec && a.Nsec < b.Nsec)
}

// dedupEvents merges events of the same path in a sorted slice.
func dedupEvents(evs []Event) []Event {
	out := evs[:0]
	for _, ev := range evs {
		if n := len(out); n > 0 && out[n-1].Path == ev.Path {
			out[n-1].Op |= ev.Op
			continue
		}
		out = append(out, ev)
	}
	return out
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

// ownTTL is how long a recorded own change is kept to match its events.
const ownTTL = 30 * time.Second

// pruneOwn drops own records older than ownTTL, at most once a second (it
// walks the whole map).
func (w *Watcher) pruneOwn() {
	now := time.Now()
	w.ownMu.Lock()
	defer w.ownMu.Unlock()
	if now.Sub(w.lastPrune) < time.Second {
		return
	}
	w.lastPrune = now
	for rel, o := range w.own {
		if o.inflight == 0 && o.recGen == o.gen && now.Sub(o.at) > ownTTL {
			delete(w.own, rel)
		}
	}
	keep := w.moves[:0]
	for _, m := range w.moves {
		if now.Sub(m.at) <= ownTTL {
			keep = append(keep, m)
		}
	}
	clear(w.moves[len(keep):])
	w.moves = keep
}

// Begin marks rel as being changed by the daemon itself and returns the
// function that ends the change; end records rel's lstat so the change's
// events are recognised as own. Call end exactly once, after the change (and
// whether or not it succeeded). Safe for concurrent use; it costs one map
// update and, at end, one lstat.
func (w *Watcher) Begin(rel string) (end func()) {
	w.ownMu.Lock()
	o := w.own[rel]
	if o == nil {
		o = &ownState{rel: rel}
		w.own[rel] = o
	}
	o.inflight++
	w.ownMu.Unlock()
	return func() {
		w.ownMu.Lock()
		o.inflight--
		o.gen++
		gen, last, at := o.gen, o.inflight == 0, o.rel
		w.ownMu.Unlock()
		if !last {
			return // the last concurrent change to end records the state
		}
		for {
			var st syscall.Stat_t
			err := syscall.Lstat(w.abs(at), &st)
			w.ownMu.Lock()
			if o.rel != at {
				// An own directory move re-keyed the state meanwhile:
				// record the path where the file is now.
				at = o.rel
				w.ownMu.Unlock()
				continue
			}
			if o.gen == gen && o.inflight == 0 {
				o.recGen, o.exists, o.st, o.at = gen, err == nil, st, time.Now()
			}
			w.ownMu.Unlock()
			return
		}
	}
}

// ownMove is one own rename of a directory (BeginMove): from and to are
// workspace-relative, ref is a time no change made after the rename began
// can have as its ctime (the scan rule of classify), at is when it was
// recorded. watched: from lay in a watched subtree, so every change below
// it before the move raised an event of its own.
type ownMove struct {
	from, to string
	ref      syscall.Timespec
	watched  bool
	at       time.Time
}

// BeginMove brackets an own rename of from to to, like Begin on both
// names, and returns the function that ends it; call it exactly once, after
// the rename, with moved set when the rename succeeded (and was no
// RENAME_EXCHANGE). When to is then a directory, the watcher records the
// move before the brackets end: the own records of paths below from are
// kept under their new paths, events that name the old paths are matched
// there, and the scan of the moved directory does not report its entries
// as external changes (classify). Safe for concurrent use.
func (w *Watcher) BeginMove(from, to string) (end func(moved bool)) {
	endFrom, endTo := w.Begin(from), w.Begin(to)
	// ref: the kernel's coarse clock, which file timestamps never precede
	// (multigrain timestamps are at least the coarse time), taken before
	// the rename and floored to 2 s for filesystems that store coarser
	// timestamps (FAT: 2 s); noteMove lowers it to the moved directory's
	// own ctime for filesystems whose clock is not ours (NFS).
	ref := moveRef()
	return func(moved bool) {
		if moved {
			w.noteMove(from, to, ref)
		}
		endFrom()
		endTo()
	}
}

// moveRef is BeginMove's reference time (a variable for tests).
var moveRef = func() syscall.Timespec {
	var now unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now) != nil {
		return syscall.Timespec{} // no scan rule: every scanned entry is reported
	}
	return syscall.Timespec{Sec: now.Sec &^ 1}
}

// noteMove records an own move of the directory from to to (nothing when
// to is not a directory: no path lies below a file). Called while both
// names are bracketed, so no event below them is classified meanwhile.
func (w *Watcher) noteMove(from, to string, ref syscall.Timespec) {
	var st syscall.Stat_t
	if syscall.Lstat(w.abs(to), &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return
	}
	if tsBefore(st.Ctim, ref) {
		ref = st.Ctim
	}
	watched := true
	w.mu.Lock()
	for p := from; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if w.unwatched[p] || w.cfg.Skip(p) {
			watched = false
		}
	}
	if w.unwatched[""] {
		watched = false
	}
	w.mu.Unlock()
	w.ownMu.Lock()
	defer w.ownMu.Unlock()
	moved := map[string]*ownState{}
	for rel, o := range w.own {
		if strings.HasPrefix(rel, to+"/") && o.inflight == 0 && o.recGen == o.gen {
			delete(w.own, rel) // of what was there before: the move replaced it
		}
	}
	for rel, o := range w.own {
		if strings.HasPrefix(rel, from+"/") {
			moved[to+rel[len(from):]] = o
			delete(w.own, rel)
		}
	}
	for rel, o := range moved {
		o.rel = rel
		w.own[rel] = o
	}
	w.moves = append(w.moves, ownMove{from: from, to: to, ref: ref, watched: watched, at: time.Now()})
}

// Overflow handles lost events: it reports them through OnOverflow and walks
// the tree again to watch directories created meanwhile. The drain goroutine
// calls it on fsnotify.ErrEventOverflow; tests call it to exercise the path.
func (w *Watcher) Overflow() {
	w.overflows.Add(1)
	w.cfg.OnOverflow()
	w.addTree("", nil)
}

// Stats are the watcher's counters for .rubino/status.
type Stats struct {
	Watches   int      `json:"watches"`         // directories watched
	Events    uint64   `json:"events"`          // fsnotify events received
	External  uint64   `json:"external_events"` // coalesced external changes delivered
	Own       uint64   `json:"own_events"`      // coalesced changes recognised as the daemon's own
	Batches   uint64   `json:"batches"`         // batches delivered
	Overflows uint64   `json:"overflows"`       // times events were lost
	Unwatched []string `json:"unwatched"`       // subtree roots without watches ("" = everything)
}

// Stats returns the counters.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	s := Stats{Watches: len(w.dirs)}
	for rel := range w.unwatched {
		s.Unwatched = append(s.Unwatched, rel)
	}
	w.mu.Unlock()
	sort.Strings(s.Unwatched)
	s.Events, s.External, s.Own = w.events.Load(), w.external.Load(), w.ownEvents.Load()
	s.Batches, s.Overflows = w.batches.Load(), w.overflows.Load()
	return s
}

// Close stops watching and waits for the goroutines; a batch being
// delivered finishes first. Idempotent.
func (w *Watcher) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	close(w.stop)
	err := w.fsw.Close()
	w.wg.Wait()
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	return err
}

// WatchLimit returns the kernel's per-user inotify watch limit
// (fs.inotify.max_user_watches), or 0 when unknown.
func WatchLimit() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}
