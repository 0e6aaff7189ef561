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
// Own changes: the daemon brackets every change it makes with Begin (and
// renames with BeginMove); the watcher matches the events of those changes
// by file identity (device, inode), not by path, so a change made through
// one name of a file (a hard link, a name since renamed or exchanged) is own
// under every name (own.go). Own directory moves and exchanges are followed:
// events naming an old path are matched where the file is now, and the scan
// of a moved directory reports an entry only when its ctime is not before
// the move began (moves.go). Directory bookkeeping (adding and dropping
// watches) is done for own and external events alike.
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
//
// Files by concern:
//
//	watcher.go   Config, Start, Close, Stats; the watch set (add, drop, unwatched subtrees)
//	events.go    the event loop: fsnotify events and errors, overflow, coalescing, delivery
//	own.go       own changes: Begin, the identity and path records, classification
//	moves.go     own directory moves and exchanges: BeginMove, paths they moved
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
	dirs      map[string]fileID // watched directories (rel) and their identity
	dirAt     map[fileID]string // the inverse of dirs
	below     map[string]int    // per path: the keys of dirs strictly below it (setDir)
	unwatched map[string]bool
	pending   map[string]Op
	timer     *time.Timer

	own ownTable // the daemon's own changes (own.go)
	// classifyHook, when set (tests), runs in classify right before its
	// lstats (lstated false) and right after them (true): the windows in
	// which an own change may end unseen by its first look at the records
	// or by the lstats.
	classifyHook atomic.Pointer[func(rel string, lstated bool)]

	deliver    chan struct{}
	overflowed chan struct{} // errLoop to drain: events were lost
	stop       chan struct{}
	wg         sync.WaitGroup

	events, external, ownEvents, overflows, batches atomic.Uint64
	closed                                          atomic.Bool
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
		dirs: map[string]fileID{}, dirAt: map[fileID]string{}, below: map[string]int{}, unwatched: map[string]bool{},
		pending: map[string]Op{},
		own:     newOwnTable(),
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
	w.spawn(w.drain, w.errLoop, w.deliverLoop)
	return w, nil
}

// spawn runs each loop on a goroutine of its own; Close waits for them.
func (w *Watcher) spawn(loops ...func()) {
	w.wg.Add(len(loops))
	for _, loop := range loops {
		go func() {
			defer w.wg.Done()
			loop()
		}()
	}
}

// abs returns the backing path of rel.
func (w *Watcher) abs(rel string) string {
	if rel == "" {
		return w.cfg.Root
	}
	return w.cfg.Root + "/" + rel
}

// lstat stats the workspace-relative path rel without following a final
// symlink, except the root itself (rel ""), which is followed: an in-place
// mount's root is the magic link /proc/self/fd/N, whose own lstat is a
// symlink's, not the directory's it leads to.
func (w *Watcher) lstat(rel string, st *syscall.Stat_t) error {
	if rel == "" {
		return syscall.Stat(w.cfg.Root, st)
	}
	return syscall.Lstat(w.abs(rel), st)
}

// rel returns the workspace-relative path of a backing path fsnotify reported.
func (w *Watcher) rel(p string) (string, bool) {
	if p == w.cfg.Root {
		return "", true
	}
	if !below(p, w.cfg.Root) {
		return "", false
	}
	return p[len(w.cfg.Root)+1:], true
}

// addTree watches dir rel and every directory below it that is not skipped,
// and returns how many it watched. found, if set, receives every entry seen
// below rel (for the scan of a directory created before its watch), except
// the entries the scan rule already clears (scanUnchanged).
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
		// The directory is closed before its subdirectories are walked:
		// one descriptor at a time, whatever the depth.
		for _, child := range w.readDir(rel, found) {
			walk(child)
		}
	}
	walk(rel)
	return count
}

// readDir reads directory rel and returns its subdirectories, in name
// order (as os.ReadDir gives them: the watches a limit leaves out do not
// depend on the directory's layout on disk). found, if set, receives each
// entry the scan rule does not clear (scanUnchanged, taken relative to
// the open directory). The directory is closed before it returns.
func (w *Watcher) readDir(rel string, found func(rel string)) []string {
	fd, err := syscall.Open(w.abs(rel), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil // removed meanwhile: its Remove event follows
	}
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return nil
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	var ref *syscall.Timespec
	if found != nil {
		ref = w.own.dirScanRef(rel)
	}
	var subdirs []string
	for _, e := range ents {
		child := path.Join(rel, e.Name())
		if found != nil {
			if ref != nil && scanUnchanged(fd, e.Name(), ref) {
				w.ownEvents.Add(1)
			} else {
				found(child)
			}
		}
		if e.Type()&fs.ModeDir != 0 {
			subdirs = append(subdirs, child)
		}
	}
	return subdirs
}

// scanUnchanged reports whether the entry name of the directory open at
// dirfd has a ctime before ref: the scan rule of classify, taken while
// the scan reads the directory instead of for each queued entry. ref is
// the reference time of the latest own move that put a watched directory
// above the entry (ownTable.dirScanRef); an entry that passes was last
// changed before that move began, so the daemon's move is all that
// happened to it. Its watch is in place before the directory is read, so
// a change after this look raises an event of its own. An entry that
// cannot be stat'ed (removed meanwhile) is queued as before.
func scanUnchanged(dirfd int, name string, ref *syscall.Timespec) bool {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return tsBefore(syscall.Timespec{Sec: st.Ctim.Sec, Nsec: st.Ctim.Nsec}, *ref)
}

// addDir adds one watch; false when rel is not watched (skipped, limit,
// error). The watch set is kept by directory identity: inotify has one
// watch per inode, and fsnotify names a watch's events by the path it was
// added under, so a directory watched under another path (it moved there:
// a rename, or RENAME_EXCHANGE, whose events may come in either order) has
// that old watch dropped first, with the watches below it, and a path
// watched for another directory (the one that left it) likewise.
func (w *Watcher) addDir(rel string) bool {
	if rel != "" && w.cfg.Skip(rel) {
		w.reportUnwatched(rel, ErrSkipped)
		return false
	}
	var st syscall.Stat_t
	if err := w.lstat(rel, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return false // removed meanwhile: its Remove event follows
	}
	id := idOf(&st)
	w.mu.Lock()
	have, ok := w.dirs[rel]
	if ok && have == id {
		w.mu.Unlock()
		return true
	}
	var stale []string
	if ok {
		stale = append(stale, rel)
	}
	if old, moved := w.dirAt[id]; moved {
		stale = append(stale, old)
	}
	w.mu.Unlock()
	for _, d := range stale {
		w.dropTree(d)
	}
	w.mu.Lock()
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
	w.setDir(rel, id)
	w.mu.Unlock()
	return true
}

// setDir records rel as a watched directory of identity id, and
// unsetDir forgets it; both keep below, so that dropTree of a path
// with no watch at or below it (every removed file) costs two map
// lookups, not a walk of every watch. Called with mu held.
func (w *Watcher) setDir(rel string, id fileID) {
	if _, had := w.dirs[rel]; !had {
		w.countBelow(rel, 1)
	}
	w.dirs[rel] = id
	w.dirAt[id] = rel
}

func (w *Watcher) unsetDir(rel string) {
	id, had := w.dirs[rel]
	if !had {
		return
	}
	delete(w.dirs, rel)
	if w.dirAt[id] == rel {
		delete(w.dirAt, id)
	}
	w.countBelow(rel, -1)
}

// countBelow adds delta to below of every directory above rel (the root
// "" included). Called with mu held.
func (w *Watcher) countBelow(rel string, delta int) {
	for rel != "" {
		rel = parentOf(rel)
		if w.below[rel] += delta; w.below[rel] == 0 {
			delete(w.below, rel)
		}
	}
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
	if _, ok := w.dirs[rel]; ok {
		gone = append(gone, rel)
	}
	if rel != "" && w.below[rel] > 0 {
		for d := range w.dirs {
			if below(d, rel) {
				gone = append(gone, d)
			}
		}
	}
	for _, d := range gone {
		w.unsetDir(d)
	}
	w.mu.Unlock()
	for _, d := range gone {
		w.fsw.Remove(w.abs(d)) // ErrNonExistentWatch for ones already gone
	}
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
	// OwnBytes estimates what the own-change records hold (bytes);
	// OwnDropped counts records dropped before their TTL because the
	// records passed their bound (docs/DESIGN.md#own-records-bound).
	OwnBytes   int64  `json:"own_records_bytes"`
	OwnDropped uint64 `json:"own_records_dropped"`
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
	w.own.mu.Lock()
	s.OwnBytes, s.OwnDropped = w.own.bytes, w.own.dropped
	w.own.mu.Unlock()
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
