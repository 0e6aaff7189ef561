package watcher

// Invalidation by polling, for a backing filesystem whose changes made
// elsewhere inotify never reports (NFS, CephFS, FUSE-based filesystems
// such as JuiceFS, CIFS): docs/multihost.md.

import (
	"path"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// PollConfig configures a Poller.
type PollConfig struct {
	// Root is the directory polled (the backing directory).
	Root string
	// Interval is the pause between the end of one pass and the start of
	// the next (default 1 s).
	Interval time.Duration
	// Skip reports whether the subtree at a workspace-relative path is not
	// polled (as Config.Skip).
	Skip func(rel string) bool
	// Own reports whether a file's current stat is the one this mount's
	// own last change left (the change is the daemon's, not another
	// mount's); nil: never.
	Own func(st *unix.Stat_t) bool
	// OnEvents receives each pass's changes, one batch per pass that found
	// any, as the inotify watcher's (Config.OnEvents).
	OnEvents func([]Event)
}

// pstat is what a pass keeps of one name: enough to tell a change of the
// file (identity, size, mtime, ctime) or of its type.
type pstat struct {
	ino, size    uint64
	mtime, ctime int64
	mode         uint32
}

// Poller stats every name of a tree at each pass and reports the names
// created, removed or changed since the previous pass as Events: what the
// inotify watcher reports, without inotify. A pass costs one fstatat(2)
// per name and one getdents(2) per directory (docs/multihost.md gives the
// cost of a pass over 10,000 files). Concurrency: one goroutine runs the
// passes; Stats and Close are safe for concurrent use.
type Poller struct {
	cfg  PollConfig
	prev map[string]pstat

	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	running atomic.Bool

	passes, names, changes atomic.Uint64
	lastPassNs             atomic.Int64
}

// NewPoller returns a poller over cfg.Root and takes the first pass (the
// baseline, reported to no one). Start runs the later passes.
func NewPoller(cfg PollConfig) *Poller {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	p := &Poller{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	p.prev, _ = p.scan()
	return p
}

// Start runs a pass every Interval on its own goroutine until Close.
func (p *Poller) Start() {
	p.running.Store(true)
	go func() {
		defer close(p.done)
		t := time.NewTimer(p.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			if evs := p.Pass(); len(evs) > 0 && p.cfg.OnEvents != nil {
				p.cfg.OnEvents(evs)
			}
			t.Reset(p.cfg.Interval)
		}
	}()
}

// Done is closed once the passes Start runs have ended (after Close);
// never closed when Start was not called.
func (p *Poller) Done() <-chan struct{} { return p.done }

// Close stops the passes and waits for the running one. Idempotent.
func (p *Poller) Close() {
	p.once.Do(func() { close(p.stop) })
	if p.running.Load() {
		<-p.done
	}
}

// Pass takes one pass and returns the changes since the previous one.
// Not safe for concurrent use with itself (the poller's goroutine calls
// it; tests and benchmarks call it without Start).
func (p *Poller) Pass() []Event {
	start := time.Now()
	cur, own := p.scan()
	var evs []Event
	for rel, s := range cur {
		old, ok := p.prev[rel]
		switch {
		case !ok && own[rel]:
			// Created by the daemon itself.
		case !ok:
			evs = append(evs, Event{Path: rel, Op: Create})
		case old.ino != s.ino || old.mode&unix.S_IFMT != s.mode&unix.S_IFMT:
			evs = append(evs, Event{Path: rel, Op: Remove | Create})
		case old.size != s.size || old.mtime != s.mtime:
			evs = append(evs, Event{Path: rel, Op: Write})
		case old.ctime != s.ctime || old.mode != s.mode:
			evs = append(evs, Event{Path: rel, Op: Chmod})
		}
	}
	for rel := range p.prev {
		if _, ok := cur[rel]; !ok {
			evs = append(evs, Event{Path: rel, Op: Remove})
		}
	}
	p.prev = cur
	p.passes.Add(1)
	p.names.Add(uint64(len(cur)))
	p.changes.Add(uint64(len(evs)))
	p.lastPassNs.Store(int64(time.Since(start)))
	return evs
}

// PollStats are a poller's counters.
type PollStats struct {
	Passes, Names, Changes uint64 // passes taken, names stat'ed, changes reported
	LastPass               time.Duration
}

// Stats returns the poller's counters.
func (p *Poller) Stats() PollStats {
	return PollStats{Passes: p.passes.Load(), Names: p.names.Load(), Changes: p.changes.Load(),
		LastPass: time.Duration(p.lastPassNs.Load())}
}

// scan stats every name below the root, except skipped subtrees and
// names whose stat is the daemon's own last change (PollConfig.Own: the
// previous pass's entry is kept for them, so the daemon's own change is
// never reported, and another mount's later one still is); own lists
// those names.
func (p *Poller) scan() (map[string]pstat, map[string]bool) {
	out := make(map[string]pstat, len(p.prev))
	own := map[string]bool{}
	rootFd, err := unix.Open(p.cfg.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return p.prev, own
	}
	defer unix.Close(rootFd)
	var walk func(fd int, rel string)
	walk = func(fd int, rel string) {
		names, err := readNames(fd)
		if err != nil {
			return
		}
		for _, name := range names {
			child := name
			if rel != "" {
				child = path.Join(rel, name)
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			s := pstat{ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), mode: st.Mode}
			if p.cfg.Own != nil && st.Mode&unix.S_IFMT == unix.S_IFREG && p.cfg.Own(&st) {
				own[child] = true
				if old, ok := p.prev[child]; ok {
					s = old // the daemon's own change: not reported
				}
			}
			out[child] = s
			if st.Mode&unix.S_IFMT != unix.S_IFDIR || (p.cfg.Skip != nil && p.cfg.Skip(child)) {
				continue
			}
			dfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			walk(dfd, child)
			unix.Close(dfd)
		}
	}
	walk(rootFd, "")
	return out, own
}

// readNames lists the names of the directory fd (without . and ..).
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
