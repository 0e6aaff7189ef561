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
// mean no one else wrote. Directory bookkeeping (adding and dropping watches)
// is done for own and external events alike.
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
	"log"
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
	// Logger receives diagnostics (default: discard).
	Logger *log.Logger
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
	log *log.Logger

	mu        sync.Mutex
	dirs      map[string]bool // watched directories (rel)
	unwatched map[string]bool
	pending   map[string]Op
	timer     *time.Timer
	requeued  map[string]Op // paths whose own change was in flight at delivery

	ownMu     sync.Mutex
	own       map[string]*ownState
	lastPrune time.Time

	deliver chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup

	events, external, ownEvents, overflows, batches atomic.Uint64
	closed                                          atomic.Bool
}

// ownState is what the watcher knows of the daemon's own changes of one
// path. gen counts ended changes; recGen is the gen whose resulting lstat
// is recorded in st/exists (recGen < gen: a record is being taken).
type ownState struct {
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
		cfg.Logger = log.New(discard{}, "", 0)
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
	}
	if _, err := os.Stat(cfg.Root); err != nil {
		fsw.Close()
		return nil, err
	}
	n := w.addTree("", nil)
	if cfg.OnProgress != nil {
		cfg.OnProgress(n, true)
	}
	w.wg.Add(2)
	go w.drain()
	go w.deliverLoop()
	return w, nil
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

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

// drain reads fsnotify's channels (so its buffer never fills while a batch
// is delivered), keeps the watch set in step and queues events.
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
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.Overflow()
			} else {
				w.log.Printf("watcher: %v", err)
			}
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
			w.addTree(rel, func(child string) { w.queue(child, Create) })
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
		switch w.classify(rel) {
		case ownInFlight:
			w.queue(rel, op) // decide once the own change has ended
		case ownDone:
			w.ownEvents.Add(1)
		default:
			out = append(out, Event{Path: rel, Op: op})
		}
	}
	w.pruneOwn()
	if len(out) == 0 {
		return
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
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
// before and after the lstat: if any own change was in flight, ended or not
// yet recorded around it, the decision is put off to the next batch (the
// events are queued again, never dropped). Otherwise the path is the
// daemon's own exactly when its lstat is what the last own change left.
func (w *Watcher) classify(rel string) origin {
	w.ownMu.Lock()
	o := w.own[rel]
	var gen uint64
	busy := false
	if o != nil {
		gen, busy = o.gen, o.inflight > 0 || o.recGen != o.gen
	}
	w.ownMu.Unlock()
	if o == nil {
		return external
	}
	if busy {
		return ownInFlight
	}
	var st syscall.Stat_t
	err := syscall.Lstat(w.abs(rel), &st)
	w.ownMu.Lock()
	defer w.ownMu.Unlock()
	switch {
	case w.own[rel] != o || o.gen != gen || o.inflight > 0:
		return ownInFlight
	case o.exists == (err == nil) && (err != nil || sameStat(&o.st, &st)):
		return ownDone
	}
	return external
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
		o = &ownState{}
		w.own[rel] = o
	}
	o.inflight++
	w.ownMu.Unlock()
	return func() {
		w.ownMu.Lock()
		o.inflight--
		o.gen++
		gen, last := o.gen, o.inflight == 0
		w.ownMu.Unlock()
		if !last {
			return // the last concurrent change to end records the state
		}
		var st syscall.Stat_t
		err := syscall.Lstat(w.abs(rel), &st)
		w.ownMu.Lock()
		if o.gen == gen && o.inflight == 0 {
			o.recGen, o.exists, o.st, o.at = gen, err == nil, st, time.Now()
		}
		w.ownMu.Unlock()
	}
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
