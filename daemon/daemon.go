// Package daemon assembles one rubinofs mount from its parts: the guard and
// its exemptions, the FUSE adapter, the session registry, the watcher, the
// task registry and the compaction store. The CLI (cmd/rubinofs) and the
// tests start mounts only through it, so both run the same assembly.
package daemon

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/fusefs"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/tasks"
	"github.com/rubinofs/rubinofs/watcher"
)

// Config is everything a mount is started with. Durations are kernel cache
// timeouts.
type Config struct {
	Workspace  string // backing directory
	Mountpoint string // where to mount; equal to Workspace with InPlace
	InPlace    bool   // mount over the workspace itself
	Mode       guard.Mode
	// Exempt are extra doublestar globs exempt from the guard (--exempt).
	Exempt []string
	// GuardIgnored guards git-ignored files too (--guard-ignored).
	GuardIgnored bool
	// AllowUnregistered leaves callers outside any session unguarded.
	AllowUnregistered bool
	// Options are FUSE -o options.
	Options []string
	// StateDir holds logs, the read-state file and the compaction store.
	StateDir string
	// CacheTimeout is the kernel's entry, negative-entry and attribute
	// timeout for watched subtrees (with Watch), or for everything.
	CacheTimeout time.Duration
	// Watch starts the fsnotify watcher: external changes invalidate the
	// guard's hashes and the kernel's caches, and the page cache is kept
	// across opens.
	Watch bool
	// ShortTimeout is the cache timeout of subtrees the watcher does not
	// watch (skipped, or out of inotify watches); default 1 s.
	ShortTimeout time.Duration
	// WatchSkip are doublestar globs of directories not watched (default
	// watcher.DefaultSkip: .git/objects).
	WatchSkip []string
	// PersistReads keeps the guard's read state across restarts in
	// StateDir/reads.json: saved at unmount, revalidated by hash at the
	// next mount (a record whose file changed is dropped). Sessions whose
	// root process is still alive are re-registered.
	PersistReads bool
	// MaxWatches limits the inotify watches (0: the kernel's limit).
	MaxWatches int
	Debug      bool
	Version    string
	Logger     *log.Logger

	// Agents configures .rubino/agents (package tasks): the caps
	// (max_depth 2, max_children_per_node 3, max_concurrent_total 8 by
	// default), the ask timeout and the subagent types. Fields left zero
	// come from StateDir/agents.json ($RUBINOFS_AGENTS_CONFIG), then the
	// defaults; Mount, Logger and Sessions are set by Start.
	Agents tasks.Config
}

// Daemon is one running mount.
type Daemon struct {
	cfg   Config
	FS    *fusefs.FS
	Guard *guard.Guard
	// Sessions maps callers to guard sessions (.rubino/sessions).
	Sessions *guard.Sessions
	// Watcher is the running watcher (nil without Config.Watch) and
	// Invalidation its feed into the mount.
	Watcher      *watcher.Watcher
	Invalidation *fusefs.Invalidation
	// Compact serves .rubino/compact over the compaction store
	// (StateDir/compact.db, a temporary store without a StateDir).
	Compact *compact.Service
	server  *fuse.Server
	rootFd  int // in-place: the workspace directory opened before mounting

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}

	// Tasks runs background subagents and serves .rubino/agents; Close
	// stops every task (CancelAll) before unmounting.
	Tasks *tasks.Runner
}

// Start builds and mounts. The mount answers when Start returns.
func Start(cfg Config) (*Daemon, error) {
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr, "rubinofs: ", log.LstdFlags)
	}
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	cfg.Workspace = ws
	if cfg.Mountpoint, err = filepath.Abs(cfg.Mountpoint); err != nil {
		return nil, err
	}
	st, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", ws, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", ws)
	}
	if cfg.InPlace && cfg.Mountpoint != ws {
		return nil, errors.New("--in-place mounts over the workspace itself: give only the workspace")
	}
	if !cfg.InPlace && cfg.Mountpoint == ws {
		return nil, errors.New("the mountpoint is the workspace: use --in-place to mount over it")
	}
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	d := &Daemon{cfg: cfg, rootFd: -1, done: make(chan struct{})}
	backing := ws
	if cfg.InPlace {
		if err := fusefs.CheckMountpoint(ws, true); err != nil {
			return nil, err
		}
		fd, err := syscall.Open(ws, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("opening workspace: %w", err)
		}
		d.rootFd = fd
		backing = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	d.Guard = guard.New(guard.Config{Mode: cfg.Mode, Granularity: timestampGranularity(backing)})
	matcher, err := ignore.New(backing, cfg.Exempt, cfg.GuardIgnored)
	if err != nil {
		d.closeFd()
		return nil, fmt.Errorf("exemptions: %w", err)
	}
	d.FS, err = fusefs.New(fusefs.Config{
		Workspace:         ws,
		BackingPath:       backing,
		Guard:             d.Guard,
		Exempt:            matcher,
		AllowUnregistered: cfg.AllowUnregistered,
		Version:           cfg.Version,
		Owner:             uint32(os.Getuid()),
		Logger:            cfg.Logger,
		Passthrough:       os.Geteuid() == 0,
	})
	if err != nil {
		d.closeFd()
		return nil, err
	}
	// Sessions: callers resolve by process tree; an ended session's
	// tracker is dropped at once (no process can resolve to it again).
	d.Sessions = guard.NewSessions()
	d.Sessions.OnEnd = d.Guard.DropSession
	d.FS.AttachSessions(d.Sessions)
	if cfg.PersistReads && cfg.StateDir != "" {
		d.loadReads()
	}
	if cfg.ShortTimeout <= 0 {
		cfg.ShortTimeout = time.Second
	}
	if cfg.Watch {
		if err := d.startWatcher(backing, matcher); err != nil {
			d.closeFd()
			return nil, err
		}
	}
	if d.Compact, err = compact.Open(cfg.StateDir, cfg.Logger); err != nil {
		d.stopWatcher()
		d.closeFd()
		return nil, fmt.Errorf("compaction: %w", err)
	}
	d.FS.AddCtl(ctltree.Entry{Name: "compact", Node: d.Compact.Node()})
	agents := cfg.Agents
	agents.Mount, agents.Logger = cfg.Mountpoint, cfg.Logger
	agents.Sessions = d.Sessions // each task's process tree is session task-<id>
	if d.Tasks, err = tasks.Open(agents, cfg.StateDir); err != nil {
		d.stopWatcher()
		d.closeFd()
		d.Compact.Close()
		return nil, fmt.Errorf("agents: %w", err)
	}
	d.FS.AddCtl(ctltree.Entry{Name: "agents", Node: d.Tasks.Node()})
	d.FS.AddStatus(func() (string, any) { return "agents", d.Tasks.Stats() })
	timeout := cfg.CacheTimeout
	d.server, err = d.FS.Mount(cfg.Mountpoint, fusefs.MountOptions{
		Options:         cfg.Options,
		EntryTimeout:    timeout,
		AttrTimeout:     timeout,
		NegativeTimeout: timeout,
		KeepCache:       cfg.Watch,
		Debug:           cfg.Debug,
		AllowNonEmpty:   cfg.InPlace,
	})
	if err != nil {
		d.stopWatcher()
		d.closeFd()
		d.Compact.Close()
		d.Tasks.Close()
		return nil, err
	}
	go func() {
		d.server.Wait()
		d.Tasks.CancelAll() // unmounted from outside: no task outlives the mount
		close(d.done)
	}()
	return d, nil
}

// Done is closed when the server has stopped (unmounted by us or by
// `rubinofs unmount` / umount).
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Logger returns the daemon's logger.
func (d *Daemon) Logger() *log.Logger { return d.cfg.Logger }

// Mountpoint returns the absolute mountpoint.
func (d *Daemon) Mountpoint() string { return d.cfg.Mountpoint }

// Close unmounts (retrying a busy mount briefly, then detaching it lazily so
// the daemon never hangs) and releases everything. Idempotent.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		// Stop every task and kill its process group first, so none keeps
		// the mount busy or outlives it.
		d.Tasks.CancelAll()
		select {
		case <-d.done:
		default:
			var err error
			for i := 0; i < 20; i++ {
				if err = d.server.Unmount(); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				d.cfg.Logger.Printf("unmount %s: %v; detaching lazily", d.cfg.Mountpoint, err)
				if derr := syscall.Unmount(d.cfg.Mountpoint, syscall.MNT_DETACH); derr != nil {
					d.closeErr = err
				}
			}
			<-d.done
		}
		if d.cfg.PersistReads && d.cfg.StateDir != "" {
			d.saveReads()
		}
		d.stopWatcher()
		d.closeFd()
		if err := d.Compact.Close(); err != nil && d.closeErr == nil {
			d.closeErr = err
		}
		if err := d.Tasks.Close(); err != nil && d.closeErr == nil {
			d.closeErr = err
		}
	})
	return d.closeErr
}

// readsFile is where PersistReads keeps the read state.
func (d *Daemon) readsFile() string { return filepath.Join(d.cfg.StateDir, "reads.json") }

// loadReads restores the saved read state, revalidating every record.
func (d *Daemon) loadReads() {
	f, err := os.Open(d.readsFile())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.cfg.Logger.Printf("read state: %v", err)
		}
		return
	}
	defer f.Close()
	roots, kept, dropped, err := d.Guard.Load(f, d.FS.LookupTarget)
	if err != nil {
		d.cfg.Logger.Printf("%v (ignored: every session reads again)", err)
		return
	}
	restored := 0
	for _, r := range roots {
		if d.Sessions.Restore(r) == nil {
			restored++
		}
	}
	d.cfg.Logger.Printf("read state: kept %d records, dropped %d changed or gone; %d of %d sessions still live", kept, dropped, restored, len(roots))
}

// saveReads writes the read state atomically (temp file, rename).
func (d *Daemon) saveReads() {
	tmp := d.readsFile() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err == nil {
		err = d.Guard.Save(f, d.Sessions.Live())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, d.readsFile())
	}
	if err != nil {
		os.Remove(tmp)
		d.cfg.Logger.Printf("saving read state: %v", err)
	}
}

// timestampGranularity returns the timestamp granularity the hash cache's
// racy rule assumes for the backing filesystem: 10 ms (a coarse-clock tick
// at HZ=100, the worst case) for local filesystems with nanosecond
// timestamps, 2 s for anything else (FAT's resolution; network filesystems
// whose server clock rounds).
func timestampGranularity(backing string) time.Duration {
	var st syscall.Statfs_t
	if err := syscall.Statfs(backing, &st); err != nil {
		return 2 * time.Second
	}
	switch uint32(st.Type) {
	case 0xEF53, // ext2/3/4
		0x58465342, // xfs
		0x9123683E, // btrfs
		0x01021994, // tmpfs
		0x794c7630, // overlayfs
		0xF2F52010, // f2fs
		0x2FC12FC1: // zfs
		return 10 * time.Millisecond
	}
	return 2 * time.Second
}

// startWatcher attaches the invalidation feed to the FS and starts the
// watcher over the backing directory.
func (d *Daemon) startWatcher(backing string, matcher *ignore.Matcher) error {
	cfg := d.cfg
	skip := watcher.DefaultSkip
	if len(cfg.WatchSkip) > 0 {
		for _, g := range cfg.WatchSkip {
			if !doublestar.ValidatePattern(g) {
				return fmt.Errorf("malformed --watch-skip glob %q", g)
			}
		}
		skip = func(rel string) bool {
			for _, g := range cfg.WatchSkip {
				if ok, _ := doublestar.Match(g, rel); ok {
					return true
				}
			}
			return false
		}
	}
	inv := d.FS.AttachWatcher(fusefs.WatchOptions{ShortTimeout: cfg.ShortTimeout})
	w, err := watcher.Start(watcher.Config{
		Root:        backing,
		Skip:        skip,
		MaxWatches:  cfg.MaxWatches,
		OnEvents:    func(evs []watcher.Event) { invalidateIgnores(matcher, evs); inv.Events(evs) },
		OnOverflow:  func() { matcher.Invalidate(""); inv.Overflow() },
		OnUnwatched: inv.Unwatched,
		Logger:      cfg.Logger,
	})
	if err != nil {
		inv.Close()
		return fmt.Errorf("watcher: %w", err)
	}
	inv.SetOwnTracker(w.Begin)
	d.FS.AddStatus(func() (string, any) {
		st, ws := inv.Stats(), w.Stats()
		st["watches"], st["events"], st["external_events"] = ws.Watches, ws.Events, ws.External
		st["own_events"], st["batches"], st["overflows"], st["unwatched"] = ws.Own, ws.Batches, ws.Overflows, ws.Unwatched
		return "watcher", st
	})
	d.Watcher, d.Invalidation = w, inv
	return nil
}

// invalidateIgnores reloads the ignore rules of directories whose
// .gitignore changed outside the mount.
func invalidateIgnores(m *ignore.Matcher, evs []watcher.Event) {
	for _, ev := range evs {
		if path.Base(ev.Path) == ".gitignore" {
			m.Invalidate(path.Dir(ev.Path))
		} else if ev.Path == ".git/info/exclude" {
			m.Invalidate(".git/info")
		}
	}
}

func (d *Daemon) stopWatcher() {
	if d.Watcher != nil {
		d.Watcher.Close()
		d.Invalidation.Close()
	}
}

func (d *Daemon) closeFd() {
	if d.rootFd >= 0 {
		syscall.Close(d.rootFd)
		d.rootFd = -1
	}
}
