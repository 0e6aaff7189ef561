package fusefs

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
	"github.com/rubinofs/rubinofs/watcher"
)

// overflowLogEvery is the least time between two log records of full
// invalidations: under an event storm they can come many times a second,
// and the first record (with its reason) and a running count are enough.
const overflowLogEvery = time.Minute

// invalidator applies external changes to the guard, go-fuse's inode tree
// and the kernel's caches. It runs on its own goroutine: kernel
// notifications are never sent from inside a FUSE request handler (the
// kernel may be waiting on that handler: AgentFS deadlocked this way) and
// never while holding one of our locks.
type invalidator struct {
	fs    *FS
	queue chan []watcher.Event
	all   chan struct{}
	stop  chan struct{}
	done  chan struct{}

	mu        sync.Mutex
	unwatched []string // workspace-relative subtrees without watches

	batches   atomic.Uint64
	events    atomic.Uint64
	overflows atomic.Uint64
	// overflowLogged is when a full invalidation was last logged (Unix
	// ns), overflowsLogged the count then (overflowLog).
	overflowLogged  atomic.Int64
	overflowsLogged atomic.Uint64
	lastLatency     atomic.Int64 // ns from batch delivery to last notification
	hook            atomic.Pointer[func([]watcher.Event)]
	// moveTracker, when set (the watcher's BeginMove), brackets the
	// daemon's own renames (FS.ownMove).
	moveTracker atomic.Pointer[func(from, to string) (end func(moved bool))]
}

// WatchOptions tunes the caching policy that a watcher makes safe.
type WatchOptions struct {
	// ShortTimeout is the entry/attribute timeout for subtrees the watcher
	// could not watch (inotify exhausted), and for everything while the
	// watcher is down.
	ShortTimeout time.Duration
}

// AttachWatcher starts the invalidation goroutine and returns the callbacks
// to give the watcher (watcher.Config's OnEvents, OnOverflow, OnUnwatched)
// and the function to tell it of own changes. Call once, before mounting.
func (f *FS) AttachWatcher(o WatchOptions) *Invalidation {
	inv := &invalidator{
		fs:    f,
		queue: make(chan []watcher.Event, 1024),
		all:   make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	f.inv = inv
	f.shortTimeout = o.ShortTimeout
	go inv.run()
	return &Invalidation{inv: inv}
}

// Invalidation is the watcher-facing side of an attached invalidator. Its
// methods are safe for concurrent use and never block on the kernel.
type Invalidation struct{ inv *invalidator }

// Events queues a batch of external changes.
func (i *Invalidation) Events(evs []watcher.Event) {
	i.inv.events.Add(uint64(len(evs)))
	select {
	case i.inv.queue <- evs:
	default:
		// The queue is full: the kernel is slower than the events. Fall
		// back to invalidating everything, which subsumes the batch.
		i.overflow("the invalidation queue is full")
	}
}

// Overflow invalidates everything cached (fsnotify lost events).
func (i *Invalidation) Overflow() { i.overflow("the watcher lost events (inotify queue overflow)") }

func (i *Invalidation) overflow(reason string) {
	n := i.inv.overflows.Add(1)
	select {
	case i.inv.all <- struct{}{}:
	default:
	}
	i.inv.overflowLog(n, reason)
}

// overflowLog logs the n-th full invalidation at level warn (degraded: the
// kernel's caches are dropped and refilled, nothing is lost), at most once
// per overflowLogEvery, with the number since the last record.
func (inv *invalidator) overflowLog(n uint64, reason string) {
	now := time.Now().UnixNano()
	last := inv.overflowLogged.Load()
	if last != 0 && now-last < int64(overflowLogEvery) || !inv.overflowLogged.CompareAndSwap(last, now) {
		return
	}
	prev := inv.overflowsLogged.Swap(n)
	inv.fs.log.Warn("invalidating everything cached: "+reason,
		"full_invalidations", n, "since_last_record", n-prev)
}

// Unwatched records a subtree without watches: it gets short cache timeouts
// from now on, and its cached entries are dropped once.
func (i *Invalidation) Unwatched(rel string, err error) {
	i.inv.mu.Lock()
	i.inv.unwatched = append(i.inv.unwatched, rel)
	i.inv.mu.Unlock()
	// Skipped by configuration (--watch-skip, .git/objects by default) is
	// expected: info. Out of inotify watches, or a failed watch: warn,
	// since external edits there are seen only after the short timeout.
	level := slog.LevelWarn
	if errors.Is(err, watcher.ErrSkipped) {
		level = slog.LevelInfo
	}
	i.inv.fs.log.Log(context.Background(), level, "subtree not watched: it gets short cache timeouts",
		"path", rel, "err", err, "timeout", i.inv.fs.shortTimeout)
}

// SetOwnTracker installs the function that brackets every change the
// daemon makes itself (the watcher's Begin): it is called once per change
// with every name the change touches.
func (i *Invalidation) SetOwnTracker(begin func(rels ...string) (end func())) {
	i.inv.fs.ownTracker.Store(&begin)
}

// SetMoveTracker installs the function that brackets every rename the
// daemon makes itself (the watcher's BeginMove): its end, told whether the
// rename succeeded, lets the watcher follow a moved directory's own changes
// to their new paths (watcher.Watcher.BeginMove).
func (i *Invalidation) SetMoveTracker(begin func(from, to string) (end func(moved bool))) {
	i.inv.moveTracker.Store(&begin)
}

// ownMove brackets an own rename of from to to for the watcher, like
// ownChange(from, to); the returned end must be called once, after the
// rename, with moved set when it succeeded (RENAME_EXCHANGE included).
// Without a move tracker it is ownChange.
func (f *FS) ownMove(from, to string) (end func(moved bool)) {
	moved := func(ok bool) {
		// Rule files below an exempt name are never read: a package
		// manager's renames inside node_modules/ need no record.
		if ok && f.cfg.Policy != nil && !(f.exempt(to, true) && f.exempt(from, true)) {
			f.cfg.Policy.Moved(from, to) // docs/DESIGN.md#exempt-widening
		}
	}
	if f.inv != nil {
		if tr := f.inv.moveTracker.Load(); tr != nil {
			f.pinRules(from, to)
			endMove := (*tr)(from, to)
			return func(ok bool) {
				endMove(ok)
				moved(ok)
				// As ownChange's end: a moved rule file changes the rules.
				f.invalidateRules(from, to)
			}
		}
	}
	e := f.ownChange(from, to)
	return func(ok bool) {
		moved(ok)
		e()
	}
}

// SetBatchHook installs a test hook called after each batch (or full
// invalidation, with nil) has been applied.
func (i *Invalidation) SetBatchHook(fn func([]watcher.Event)) { i.inv.hook.Store(&fn) }

// Close stops the invalidation goroutine; pending batches are dropped.
func (i *Invalidation) Close() {
	select {
	case <-i.inv.stop:
	default:
		close(i.inv.stop)
	}
	<-i.inv.done
}

// Stats reports the invalidator's counters for .rubino/status.
func (i *Invalidation) Stats() map[string]any {
	return map[string]any{
		"batches_applied":      i.inv.batches.Load(),
		"events_applied":       i.inv.events.Load(),
		"full_invalidations":   i.inv.overflows.Load(),
		"last_invalidation_ns": i.inv.lastLatency.Load(),
		"short_timeout_ns":     i.inv.fs.shortTimeout.Nanoseconds(),
	}
}

func (inv *invalidator) run() {
	defer close(inv.done)
	// The watcher starts before the mount: events queued meanwhile wait
	// until the node bridge has initialised the root inode, whose children
	// go-fuse writes without a lock while it does.
	select {
	case <-inv.stop:
		return
	case <-inv.fs.bridged:
	}
	for {
		select {
		case <-inv.stop:
			return
		case <-inv.all:
			inv.invalidateAll()
			if h := inv.hook.Load(); h != nil {
				(*h)(nil)
			}
		case evs := <-inv.queue:
			start := time.Now()
			for _, ev := range evs {
				inv.apply(ev)
			}
			inv.batches.Add(1)
			inv.lastLatency.Store(int64(time.Since(start)))
			if h := inv.hook.Load(); h != nil {
				(*h)(evs)
			}
		}
	}
}

// lookupInode walks go-fuse's in-memory tree to rel; it returns the deepest
// known inode and whether it is rel itself.
func (f *FS) lookupInode(rel string) (*fs.Inode, bool) {
	cur := f.root.EmbeddedInode()
	if rel == "" {
		return cur, true
	}
	for _, name := range strings.Split(rel, "/") {
		next := cur.GetChild(name)
		if next == nil {
			return cur, false
		}
		cur = next
	}
	return cur, true
}

// apply handles one external change.
func (inv *invalidator) apply(ev watcher.Event) {
	f := inv.fs
	dir, name := path.Split(ev.Path)
	dir = strings.TrimSuffix(dir, "/")
	parent, ok := f.lookupInode(dir)
	if !ok {
		// The kernel knows nothing below an unknown directory: nothing is
		// cached there to invalidate. The guard still learns of it.
		inv.invalidateGuard(ev.Path, nil, ev.Op)
		return
	}
	child := parent.GetChild(name)
	inv.invalidateGuard(ev.Path, child, ev.Op)
	gone := ev.Op&(watcher.Remove|watcher.Rename) != 0
	if child != nil {
		// Drop data and attributes of the inode itself.
		child.NotifyContent(0, 0)
		if gone {
			if _, err := syscallLstat(f.backing(ev.Path)); err != nil {
				// The name is gone from the backing directory: update the
				// loopback's tree, which builds backing paths.
				parent.RmChild(name)
			}
		}
	}
	// Drop the dentry (positive or negative) so the next lookup sees the
	// backing directory; and the parent's attributes (mtime, nlink) and
	// its cached listing (docs/DESIGN.md#dir-cache: the kernel resets a
	// readdir cache whose pages are gone; NotifyEntry alone does nothing
	// for a name the kernel has no dentry of). A directory still at its
	// name keeps its dentry (docs/DESIGN.md#poll-keeps-cwd).
	if gone || child == nil || !f.sameDirAt(ev.Path, child) {
		parent.NotifyEntry(name)
	}
	parent.NotifyContent(0, 0)
}

// sameDirAt reports whether in, a known inode, is a directory and the
// backing name rel is still that directory (same inode number). Its
// dentry then stays: the kernel unhashes an invalidated dentry even when
// it is a process's working directory, whose getcwd(2) fails with ENOENT
// until the name is looked up again, and a directory whose listing or
// times changed needs only its inode dropped (NotifyContent).
func (f *FS) sameDirAt(rel string, in *fs.Inode) bool {
	if !in.IsDir() {
		return false
	}
	st, err := syscallLstat(f.backing(rel))
	if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return false
	}
	return f.stableAttr(st, 0).Ino == in.StableAttr().Ino
}

// invalidateGuard drops hash-cache state of the file at rel (known by its
// inode when go-fuse has one, or by a fresh lstat) and revokes the write
// rights of handles on it (an external mutation, guard.NoteMutation).
//
// An attribute-only change (op is just watcher.Chmod: chmod, chown, touch,
// a link count change) revokes nothing: it changes no byte, and the hash is
// authoritative (an external touch keeps a read fresh), so a handle whose
// session's view of the content still holds keeps its right, and its own
// writes since its read still count as its own. Any write, truncate,
// create, remove or rename in the same batch window sets another bit, and
// a write is never reported as Chmod alone (inotify raises IN_MODIFY for
// every write(2) and truncate).
func (inv *invalidator) invalidateGuard(rel string, child *fs.Inode, op watcher.Op) {
	f := inv.fs
	var ids []guard.FileID
	if st, err := syscallLstat(f.backing(rel)); err == nil {
		ids = append(ids, guard.StatOf(st).ID)
	}
	if child != nil {
		if id, ok := f.inodeID(child); ok && (len(ids) == 0 || ids[0] != id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		f.cfg.Guard.Invalidate(id)
		if op != watcher.Chmod {
			f.cfg.Guard.NoteMutation(id, sessions.External)
		}
	}
}

// inodeID maps a go-fuse inode of the loopback back to the backing file
// identity. The loopback numbers inodes as ino XOR a device mix that is zero
// on the workspace's own device.
func (f *FS) inodeID(in *fs.Inode) (guard.FileID, bool) {
	sa := in.StableAttr()
	if sa.Ino == 0 || sa.Ino&(1<<62) != 0 {
		return guard.FileID{}, false
	}
	return guard.FileID{Dev: f.rootDev, Ino: sa.Ino}, true
}

// invalidateAll drops every cached entry, attribute and page the kernel may
// hold, and every hash-cache entry: the answer to lost events.
func (inv *invalidator) invalidateAll() {
	f := inv.fs
	f.cfg.Guard.Hashes().Reset()
	var walk func(in *fs.Inode)
	walk = func(in *fs.Inode) {
		for name, ch := range in.Children() {
			if name == ctltree.DirName && in == f.root.EmbeddedInode() {
				continue
			}
			walk(ch)
			ch.NotifyContent(0, 0)
			if id, ok := f.inodeID(ch); ok {
				f.cfg.Guard.NoteMutation(id, sessions.External)
			}
			in.NotifyEntry(name)
		}
	}
	walk(f.root.EmbeddedInode())
	f.root.EmbeddedInode().NotifyContent(0, 0)
}

// shortTimeouts reports whether rel lies in a subtree that must not be
// cached long: no watcher attached, or an unwatched subtree.
func (f *FS) shortTimeouts(rel string) bool {
	if f.inv == nil {
		return false // the mount-wide timeouts are already short
	}
	f.inv.mu.Lock()
	defer f.inv.mu.Unlock()
	for _, u := range f.inv.unwatched {
		if u == "" || rel == u || strings.HasPrefix(rel, u+"/") {
			return true
		}
	}
	return false
}

func syscallLstat(p string) (*syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
