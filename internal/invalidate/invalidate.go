// Package invalidate applies external changes of the backing directory,
// reported by the watcher (inotify or the poller), to the guard and to the
// kernel's caches of the mount (docs/DESIGN.md#invalidate-room): the
// guard forgets the hashes of a changed file and revokes the write rights
// of its handles, and the kernel drops the entries, attributes, pages and
// listings it may hold. It runs on its own goroutine: kernel notifications
// are never sent from inside a FUSE request handler (the kernel may be
// waiting on that handler: AgentFS deadlocked this way) and never while
// holding one of the mount's locks.
//
// It reaches the mount's inode tree only through Tree and Node, which the
// FUSE adapter (package fusefs) implements over go-fuse's inodes; it
// imports no FUSE package and never fusefs.
package invalidate

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/watcher"
)

// overflowLogEvery is the least time between two log records of full
// invalidations: under an event storm they can come many times a second,
// and the first record (with its reason) and a running count are enough.
const overflowLogEvery = time.Minute

// Tree is the mount's kernel-facing inode tree as the invalidator sees it.
// Its methods are called from the invalidation goroutine only, never from
// a request handler.
type Tree interface {
	// Bridged is closed once the tree may be walked (the FUSE node
	// bridge has initialised the root inode, whose children it writes
	// without a lock while it does).
	Bridged() <-chan struct{}
	// Root is the mount's root inode.
	Root() Node
	// Lstat stats the backing file at the workspace-relative path rel
	// without following a symlink at the end. Errors: lstat(2)'s.
	Lstat(rel string) (*syscall.Stat_t, error)
	// Ino is the inode number the mount gives the backing file of stat
	// st (Node.Ino of its inode).
	Ino(st *syscall.Stat_t) uint64
	// ControlDir is the name of the root's control directory, which is
	// never invalidated (it is no backing file).
	ControlDir() string
}

// Node is one inode the kernel may hold in its caches. Notifications go
// to the kernel without waiting on a request.
type Node interface {
	// Child is the known child name, or nil.
	Child(name string) Node
	// Children are the known children by name.
	Children() map[string]Node
	// IsDir reports whether the node is a directory.
	IsDir() bool
	// Ino is the node's stable inode number.
	Ino() uint64
	// ID is the backing file identity of the node; false for a node that
	// is no workspace file (the control tree, another device's inode).
	ID() (guard.FileID, bool)
	// NotifyContent drops the node's cached attributes and pages.
	NotifyContent()
	// NotifyEntry drops the dentry name (positive or negative) below
	// the node and its cached listing.
	NotifyEntry(name string)
	// RmChild forgets the child name in the mount's own tree.
	RmChild(name string)
}

// Options configures an Invalidation.
type Options struct {
	// ShortTimeout is the entry/attribute timeout for subtrees the
	// watcher could not watch (inotify exhausted), and for everything
	// while the watcher is down; shown in Stats and the log.
	ShortTimeout time.Duration
	// Guard is told of every external change. Required.
	Guard *guard.Guard
	// Logger receives subtrees not watched and full invalidations.
	// Required.
	Logger *slog.Logger
}

// Invalidation is the invalidator of one mount: the watcher's feed in
// (Events, Overflow, Unwatched), the own-change brackets the watcher
// installs (SetOwnTracker, SetMoveTracker), and the mount's question of
// which subtrees must not be cached long (Short). Its methods are safe for
// concurrent use and never block on the kernel.
type Invalidation struct {
	tree  Tree
	o     Options
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
	// ownTracker, moveTracker, when set (the watcher's Begin and
	// BeginMove), bracket the daemon's own changes and renames.
	ownTracker  atomic.Pointer[func(rels ...string) (end func())]
	moveTracker atomic.Pointer[func(from, to string) (end func(moved bool))]
}

// Start starts the invalidation goroutine over tree; it applies nothing
// before tree.Bridged is closed. Stop it with Close.
func Start(tree Tree, o Options) *Invalidation {
	inv := &Invalidation{
		tree:  tree,
		o:     o,
		queue: make(chan []watcher.Event, 1024),
		all:   make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go inv.run()
	return inv
}

// Events queues a batch of external changes.
func (inv *Invalidation) Events(evs []watcher.Event) {
	inv.events.Add(uint64(len(evs)))
	select {
	case inv.queue <- evs:
	default:
		// The queue is full: the kernel is slower than the events. Fall
		// back to invalidating everything, which subsumes the batch.
		inv.overflow("the invalidation queue is full")
	}
}

// Overflow invalidates everything cached (fsnotify lost events).
func (inv *Invalidation) Overflow() {
	inv.overflow("the watcher lost events (inotify queue overflow)")
}

func (inv *Invalidation) overflow(reason string) {
	n := inv.overflows.Add(1)
	select {
	case inv.all <- struct{}{}:
	default:
	}
	inv.overflowLog(n, reason)
}

// overflowLog logs the n-th full invalidation at level warn (degraded: the
// kernel's caches are dropped and refilled, nothing is lost), at most once
// per overflowLogEvery, with the number since the last record.
func (inv *Invalidation) overflowLog(n uint64, reason string) {
	now := time.Now().UnixNano()
	last := inv.overflowLogged.Load()
	if last != 0 && now-last < int64(overflowLogEvery) || !inv.overflowLogged.CompareAndSwap(last, now) {
		return
	}
	prev := inv.overflowsLogged.Swap(n)
	inv.o.Logger.Warn("invalidating everything cached: "+reason,
		"full_invalidations", n, "since_last_record", n-prev)
}

// Unwatched records a subtree without watches: it gets short cache timeouts
// from now on, and its cached entries are dropped once.
func (inv *Invalidation) Unwatched(rel string, err error) {
	inv.mu.Lock()
	inv.unwatched = append(inv.unwatched, rel)
	inv.mu.Unlock()
	// Skipped by configuration (--watch-skip, .git/objects by default) is
	// expected: info. Out of inotify watches, or a failed watch: warn,
	// since external edits there are seen only after the short timeout.
	level := slog.LevelWarn
	if errors.Is(err, watcher.ErrSkipped) {
		level = slog.LevelInfo
	}
	inv.o.Logger.Log(context.Background(), level, "subtree not watched: it gets short cache timeouts",
		"path", rel, "err", err, "timeout", inv.o.ShortTimeout)
}

// Short reports whether rel lies in a subtree that must not be cached
// long: an unwatched subtree. A nil Invalidation (no watcher attached)
// answers false: the mount-wide timeouts are already short.
func (inv *Invalidation) Short(rel string) bool {
	if inv == nil {
		return false
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, u := range inv.unwatched {
		if u == "" || rel == u || strings.HasPrefix(rel, u+"/") {
			return true
		}
	}
	return false
}

// SetOwnTracker installs the function that brackets every change the
// daemon makes itself (the watcher's Begin): it is called once per change
// with every name the change touches (OwnTracker). Install it before the
// mount: the mount takes it once (fusefs.FS.Mount).
func (inv *Invalidation) SetOwnTracker(begin func(rels ...string) (end func())) {
	inv.ownTracker.Store(&begin)
}

// OwnTracker is the function SetOwnTracker installed, or nil (also for a
// nil Invalidation).
func (inv *Invalidation) OwnTracker() func(rels ...string) (end func()) {
	if inv == nil {
		return nil
	}
	if tr := inv.ownTracker.Load(); tr != nil {
		return *tr
	}
	return nil
}

// SetMoveTracker installs the function that brackets every rename the
// daemon makes itself (the watcher's BeginMove): its end, told whether the
// rename succeeded, lets the watcher follow a moved directory's own changes
// to their new paths (watcher.Watcher.BeginMove). Install it before the
// mount, as SetOwnTracker.
func (inv *Invalidation) SetMoveTracker(begin func(from, to string) (end func(moved bool))) {
	inv.moveTracker.Store(&begin)
}

// MoveTracker is the function SetMoveTracker installed, or nil (also for
// a nil Invalidation).
func (inv *Invalidation) MoveTracker() func(from, to string) (end func(moved bool)) {
	if inv == nil {
		return nil
	}
	if tr := inv.moveTracker.Load(); tr != nil {
		return *tr
	}
	return nil
}

// SetBatchHook installs a test hook called after each batch (or full
// invalidation, with nil) has been applied.
func (inv *Invalidation) SetBatchHook(fn func([]watcher.Event)) { inv.hook.Store(&fn) }

// Close stops the invalidation goroutine; pending batches are dropped.
func (inv *Invalidation) Close() {
	select {
	case <-inv.stop:
	default:
		close(inv.stop)
	}
	<-inv.done
}

// Stats reports the invalidator's counters for .rubino/status.
func (inv *Invalidation) Stats() map[string]any {
	return map[string]any{
		"batches_applied":      inv.batches.Load(),
		"events_applied":       inv.events.Load(),
		"full_invalidations":   inv.overflows.Load(),
		"last_invalidation_ns": inv.lastLatency.Load(),
		"short_timeout_ns":     inv.o.ShortTimeout.Nanoseconds(),
	}
}

func (inv *Invalidation) run() {
	defer close(inv.done)
	// The watcher starts before the mount: events queued meanwhile wait
	// until the node bridge has initialised the root inode, whose children
	// go-fuse writes without a lock while it does.
	select {
	case <-inv.stop:
		return
	case <-inv.tree.Bridged():
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
