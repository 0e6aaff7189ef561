package watcher

import (
	"errors"
	"sort"
	"strings"
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

// drain reads fsnotify's events (so its buffer never fills while a batch
// is delivered), keeps the watch set in step and queues events; it handles
// the overflows errLoop reports.
func (w *Watcher) drain() {
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

// Overflow handles lost events (the kernel queue overflowed; tests call it
// to simulate that): it counts the overflow, calls Config.OnOverflow (the
// mount invalidates everything cached) and walks the tree again to watch
// the directories created meanwhile. The watcher calls it on the goroutine
// that reads fsnotify's events (drain); other callers may call it from any
// goroutine before Close.
func (w *Watcher) Overflow() {
	w.overflows.Add(1)
	w.cfg.OnOverflow()
	w.addTree("", nil)
}

// errLoop reads fsnotify's errors until fsnotify closes the channel (at
// Close), and never calls into fsnotify itself: fsnotify sends some errors
// while holding the lock that Add and Remove take (a failed removal of a
// moved directory's watch, backend_inotify.go handleEvent), so a reader of
// Errors that is itself waiting in Remove (drain's dropTree) deadlocks the
// watcher and its Close. Overflows are handed to drain.
func (w *Watcher) errLoop() {
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
	if op&(Create|Rename) != 0 {
		// A directory that is there after a move away came later
		// (RENAME_EXCHANGE moves one in as it moves the other out, and
		// the events of both halves may come in either order): it is
		// watched like a created one. After a removal alone no look is
		// taken: a directory made at the name since raises its own
		// create (or moved-to) event, which takes it, and inotify never
		// merges a create into the removal before it.
		var st syscall.Stat_t
		if w.lstat(rel, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
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
