// Package daemon assembles one rubinofs mount from its parts: the guard and
// its exemptions, the FUSE adapter, the session registry, the watcher, the
// task registry and the compaction store. The CLI (cmd/rubinofs) and the
// tests start mounts only through it, so both run the same assembly.
package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/fusefs"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/gitsafe"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/internal/invalidate"
	"github.com/rubinofs/rubinofs/internal/journalctl"
	"github.com/rubinofs/rubinofs/internal/observe"
	"github.com/rubinofs/rubinofs/internal/procfs"
	"github.com/rubinofs/rubinofs/internal/rewind"
	"github.com/rubinofs/rubinofs/internal/sessionctl"
	"github.com/rubinofs/rubinofs/journal"
	"github.com/rubinofs/rubinofs/sessions"
	"github.com/rubinofs/rubinofs/tasks"
	"github.com/rubinofs/rubinofs/watcher"
)

// Config is everything a mount is started with. The guard and cache
// settings are the config sections themselves (package config), embedded,
// so a setting is declared once and the CLI copies sections whole.
type Config struct {
	Workspace  string // backing directory
	Mountpoint string // where to mount; equal to Workspace with InPlace
	InPlace    bool   // mount over the workspace itself
	// Guard holds the guard's settings: mode, exemptions, unregistered
	// callers, unlink policy, errno, scanners (config.Guard).
	config.Guard
	// Cache holds the kernel cache timeouts, the watcher's settings and
	// PersistReads (config.Cache).
	config.Cache
	// Journal holds the change journal's settings (config.Journal): on
	// or off, ignored paths, the file size limit, budget and retention.
	Journal config.Journal
	// Sessions holds the automatic cgroup sessions' globs (config.Sessions).
	config.Sessions
	// Options are FUSE -o options.
	Options []string
	// AlsoAt are other names of the mountpoint that callers' paths to
	// control files may use: a branch daemon's workspace mountpoint and
	// backing path, where `run --branch` shows it
	// (docs/DESIGN.md#branch-ctl-paths).
	AlsoAt []string
	// StateDir holds logs, the read-state file and the compaction store.
	StateDir string
	// StateRoot is the mounting user's state root, whose state
	// directories of vanished workspaces unused for State.Retention are
	// removed in the background after mounting ("" or a zero Retention:
	// none; docs/DESIGN.md#state-retention). Close waits for it.
	StateRoot string
	// State holds the state retention (config.State).
	State config.State
	// SaveInterval is how often, with PersistReads, the read state is
	// checkpointed to StateDir/reads.json while mounted, when it changed
	// since the last save: a daemon killed with SIGKILL restarts with the
	// records of its last checkpoint (revalidated by hash like any other).
	// 0 means DefaultSaveInterval; negative saves only at unmount. A
	// failed save (a full or read-only state directory) is logged once per
	// distinct error and shown in .rubino/status under "state"; the guard
	// keeps deciding from memory.
	SaveInterval time.Duration
	// WatchProgress, if set, is the watcher's initial-walk progress
	// callback (watcher.Config.OnProgress): directories watched so far.
	WatchProgress func(dirs int, done bool)
	// Debug turns on go-fuse's per-request trace (at level debug of Slog).
	Debug bool
	// Version is shown in .rubino/status.
	Version string
	// Slog is the structured logger (the CLI's --log-format, --log-level)
	// of the daemon, fusefs, the watcher, compaction and the task runner
	// (tasks.Config.Logger); nil means text records on stderr. Levels:
	// error for what the operator must act on (the read state could not be
	// saved at unmount, the mount could not be detached); warn for degraded
	// but continuing (a guard refusal, with the fields session, pid, comm,
	// op, path and code; a checkpoint that failed and is retried, logged
	// once per distinct error; a lost-event full invalidation; a lazy
	// detach after a busy unmount; ignored persisted state); info for the
	// lifecycle (mounted, read state restored); debug for per-request
	// chatter (go-fuse's trace with Debug).
	Slog *slog.Logger

	// Agents configures .rubino/agents (package tasks): the caps
	// (max_depth 2, max_children_per_node 3, max_concurrent_total 8 by
	// default), the ask timeout and the subagent types (config.Config's
	// Agents); Mount, Logger and Sessions are set by Start.
	Agents tasks.Config

	// Compact is the compaction config (config.Config's Compact, through
	// WithDefaults and Validate). nil marks a Config built without
	// config.Load (tests, benchmarks, the demo): Start then takes the state
	// files' [agents] and [compact] keys (config.LoadStateFiles: agents.json
	// and compact.json in StateDir), under the Agents fields set here. Either
	// way tasks and compact get their configuration from here and read none
	// of their own (docs/DESIGN.md#options-table).
	Compact *compact.Config
}

// DefaultSaveInterval is Config.SaveInterval's default.
const DefaultSaveInterval = 30 * time.Second

// Daemon is one running mount.
type Daemon struct {
	cfg   Config
	FS    *fusefs.FS
	Guard *guard.Guard
	// Obs is the mount's observability (internal/observe): the request
	// wrapper, .rubino/metrics and .rubino/accesslog.
	Obs *observe.Observer
	// Sessions maps callers to guard sessions (.rubino/sessions).
	Sessions *sessions.Registry
	// Watcher is the running watcher (nil without Config.Watch) and
	// Invalidation its feed into the mount.
	Watcher      *watcher.Watcher
	Poller       *watcher.Poller // with --watch=poll (watchmode.go)
	Invalidation *invalidate.Invalidation
	// Compact serves .rubino/compact over the compaction store
	// (StateDir/compact.db, a temporary store without a StateDir).
	Compact *compact.Service
	server  *fuse.Server
	rootFd  int            // in-place: the workspace directory opened before mounting
	policy  *ignore.Policy // the accepted exemption rules (policy.go)

	peers peerReg // peer detection: the host's registry and the mount table (peers.go)

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}

	// stopDetach ends the watch for a lazy detach (procfs.WatchDetach);
	// stopSaves ends the checkpoint loop and waits for it.
	stopDetach func()
	stopSaves  chan struct{}
	savesDone  chan struct{}
	state      stateHealth

	// Tasks runs background subagents and serves .rubino/agents; Close
	// stops every task (CancelAll) before unmounting.
	Tasks *tasks.Runner

	// retentionDone is closed when the retention at mount has run
	// (retention.go; nil: none started).
	retentionDone chan struct{}

	// stateLock holds the state directory's lock (statedir.go) until
	// Close has released everything in it.
	stateLock *os.File

	// Journal is the change journal (nil when off: Config.Journal);
	// stopGC ends its hourly collection and gcDone is closed when it has
	// (journal.go).
	Journal *journal.Journal
	stopGC  chan struct{}
	gcDone  chan struct{}
}

// Start builds and mounts. The mount answers when Start returns. On failure
// everything Start acquired so far is released, in reverse order, the state
// directory's lock last. The releases see d as it was built: d is not a
// named result, which every `return nil, err` would set to nil before they
// run.
func Start(cfg Config) (*Daemon, error) {
	setupLoggers(&cfg) // observe.go
	var d *Daemon
	var undo []func() // releases, run in reverse when Start fails
	started := false
	defer func() {
		if !started {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	cfg.Workspace = ws
	if cfg.Mountpoint, err = filepath.Abs(cfg.Mountpoint); err != nil {
		return nil, err
	}
	if err := Check(cfg); err != nil { // statedir.go: before anything is created
		return nil, err
	}
	startUmask := zeroUmask() // umask.go: before anything is created
	var lock *os.File
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("--state-dir %s: %w", cfg.StateDir, err)
		}
		if lock, err = lockState(cfg.StateDir, cfg.Mountpoint); err != nil {
			return nil, err
		}
		undo = append(undo, func() { lock.Close() }) // the state directory is free again
		if err := writeMarker(cfg.StateDir, ws, cfg.Mountpoint); err != nil {
			// Without it the directory is never pruned: only kept longer.
			cfg.Slog.Warn("state directory: its workspace record was not written", "dir", cfg.StateDir, "err", err)
		}
	}
	d = &Daemon{cfg: cfg, rootFd: -1, done: make(chan struct{}), stateLock: lock}
	undo = append(undo, d.closeFd) // the backing root descriptor and the FS, once made
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
	gc := cfg.GuardConfig()
	gc.Granularity, gc.OnDenial, gc.Git = timestampGranularity(backing), denialLogger(cfg.Slog, time.Now), gitsafe.New(backing, ws)
	remote := backingKind(backing)  // watchmode.go: "" on a local filesystem
	gc.UntrustedStat = remote != "" // docs/DESIGN.md#uncached-view
	gc.FineCtime = !gc.UntrustedStat && fineCtime(backing, cfg.StateDir)
	d.Guard = guard.New(gc)
	matcher, err := ignore.New(backing, cfg.Exempt, cfg.GuardIgnored)
	if err != nil {
		return nil, fmt.Errorf("exemptions: %w", err)
	}
	jr, jmatcher, err := d.openJournal(backing, matcher) // journal.go
	if err != nil {
		return nil, err
	}
	policy, err := d.openPolicy(backing, matcher, jmatcher) // policy.go
	if err != nil {
		return nil, err
	}
	d.policy = policy
	undo = append(undo, func() { policy.Close() })
	if jr != nil {
		d.Journal = jr
		undo = append(undo, func() { d.closeJournal() })
		d.collectJournal() // journal.go: at start, then hourly
	}
	mode, kind := watchMode(&cfg, backing) // watchmode.go
	// A remote backing is shared whatever the watch mode: other hosts
	// write it through their own clients (docs/DESIGN.md#uncached-view).
	shared := cfg.Shared || mode == watchPoll || kind != ""
	fcfg := fusefs.Config{
		Workspace:         ws,
		BackingPath:       backing,
		Guard:             d.Guard,
		Exempt:            matcher,
		AllowUnregistered: cfg.AllowUnregistered,
		Version:           cfg.Version,
		Owner:             uint32(os.Getuid()),
		Logger:            cfg.Slog,
		Passthrough:       os.Geteuid() == 0,
		PagedReadMax:      int64(cfg.PagedReadMax),
		Shared:            shared,
		Uncached:          remote != "",
		Peers:             d.registerPeers(ws), // peers.go: before serving
	}
	fcfg.Policy = d.policy
	d.Obs = observe.New(d.Guard)
	fcfg.Observe = d.Obs // observability wraps the raw file system (docs/DESIGN.md#observe-room)
	if !cfg.GuardIgnored && cfg.Guard.Mode != guard.ModeOff {
		if fcfg.Tools, err = ignore.NewTools(backing, cfg.ToolTrees, d.policy); err != nil {
			return nil, fmt.Errorf("tool trees: %w", err)
		}
	}
	if jr != nil {
		fcfg.Journal = jr
		if jmatcher != nil {
			fcfg.JournalExempt = jmatcher
		}
	}
	// Sessions: callers resolve by process tree; an ended session's
	// tracker is dropped at once (no process can resolve to it again).
	d.Sessions = sessions.NewRegistry()
	d.Sessions.MountOwner = uint32(os.Getuid()) // owns what is registered without an owner (docs/DESIGN.md#sessions)
	d.Sessions.MaxPerOwner = cfg.MaxLive        // sessions.max_live, per uid (0: the default)
	d.Sessions.OnEnd = func(name string) {
		d.Guard.DropSession(name)
		d.endJournalSession(name) // journal.go
	}
	d.Sessions.NameHeld = d.journalNameHeld                   // journal.go: docs/DESIGN.md#session-names
	d.Sessions.KeptOwner = d.journalLogOwner                  // journal.go
	d.Sessions.OnRegister = func(name string, at time.Time) { // a new session of a name starts with no denials or errors
		d.Guard.ForgetDenials(name, at)
		if d.FS != nil {
			d.FS.ForgetErrors(name, at)
		}
	}
	if err := d.Sessions.SetAutoCgroups(cfg.CgroupAuto); err != nil {
		return nil, err
	}
	d.Guard.SetHarnessRoots(d.Sessions)
	d.Guard.SetSessionOwners(d.sessionOwner) // the record budget's uid of a session
	fcfg.Sessions = d.Sessions               // callers resolve through it, and it knows sessions' owners
	d.FS, err = fusefs.New(fcfg)
	if err != nil {
		return nil, err
	}
	d.Obs.SetHost(d.FS.CtlHost())
	d.FS.Plug(journalctl.New(d.Journal, d.FS.CtlHost(), rewind.New(d.Journal, d.FS.RewindMount(), d.Guard))) // per-session journal files; off: EOPNOTSUPP
	// .rubino/sessions and .rubino/self (docs/DESIGN.md#sessions).
	d.FS.Plug(sessionctl.New(sessionctl.Config{
		Registry: d.Sessions, Guard: d.Guard, AllowUnregistered: cfg.AllowUnregistered,
	}, d.FS.CtlHost()))
	if cfg.PersistReads && cfg.StateDir != "" {
		d.loadReads()
	}
	switch mode {
	case watchInotify:
		if err := d.startWatcher(backing, matcher, jmatcher); err != nil {
			return nil, err
		}
		undo = append(undo, d.stopWatcher)
	case watchPoll:
		if err := d.startPoller(backing, matcher, jmatcher); err != nil {
			return nil, err
		}
		undo = append(undo, d.stopPoller)
	}
	if cfg.Compact == nil { // built without config.Load: the state files count
		st, err := config.LoadStateFiles(cfg.StateDir, nil)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		cfg.Agents = cfg.Agents.Over(st.Agents)
		cfg.Compact = &st.Compact
	}
	if d.Compact, err = compact.Open(cfg.StateDir, *cfg.Compact, cfg.Slog); err != nil {
		return nil, fmt.Errorf("compaction: %w", err)
	}
	undo = append(undo, func() { d.Compact.Close() })
	d.FS.Plug(d.Compact)
	agents := cfg.Agents
	agents.Mount, agents.Logger = cfg.Mountpoint, cfg.Slog
	agents.Sessions = d.Sessions // each task's process tree is session task-<id>
	agents.MountOwner = uint32(os.Getuid())
	if agents.Umask == "" {
		agents.Umask = taskUmask(startUmask) // not the daemon's 0 (umask.go)
	}
	if d.Tasks, err = tasks.Open(agents, cfg.StateDir); err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}
	undo = append(undo, func() { d.Tasks.Close() })
	d.Tasks.Registry().SkipIDs(d.journaledTaskIDs()) // journal.go
	d.FS.Plug(d.Tasks)
	d.registerMetrics() // observe.go: watcher, tasks, compactions in .rubino/metrics
	timeout := cfg.CacheTimeout
	if mode == watchPoll {
		timeout = pollTimeout(&cfg) // nothing tells the kernel of another host's change at once
	}
	d.awaitPeers() // peers.go
	d.server, err = d.FS.Mount(cfg.Mountpoint, fusefs.MountOptions{
		Options:         cfg.Options,
		EntryTimeout:    timeout,
		AttrTimeout:     timeout,
		NegativeTimeout: timeout,
		KeepCache:       mode == watchInotify && !shared,
		Debug:           cfg.Debug,
		AllowNonEmpty:   cfg.InPlace,
		AlsoAt:          cfg.AlsoAt,
		IOURing:         cfg.IOURing,
	})
	if err != nil {
		return nil, err
	}
	d.logTransport(cfg.IOURing)
	go func() {
		<-d.FS.Ended()      // /dev/fuse closed too, not just the loops (Server.Wait)
		d.Tasks.CancelAll() // unmounted from outside: no task outlives the mount
		close(d.done)
	}()
	d.watchPeerTable() // peers.go: other users' mounts of the backing directory
	// A lazy unmount (`rubinofs unmount --lazy`, umount -l) takes the mount
	// out of the namespace but the server runs on while anything still
	// holds it: stop the tasks at once, since their working directories
	// are in the mount and would keep it (and this daemon) alive; files
	// held by other processes are served until they are closed.
	if stop, err := procfs.WatchDetach(cfg.Mountpoint, func() {
		// A plain unmount also leaves the mount table before the server
		// ends, so this fires for it too: the message names both.
		cfg.Slog.Info("mount left the mount table (unmounted, or detached by a lazy unmount): stopping tasks; open files are served until they are closed",
			"mountpoint", cfg.Mountpoint)
		d.Tasks.CancelAll()
		d.Obs.CloseStreams()
	}); err != nil {
		// Degraded: after a lazy unmount the tasks run on (and keep the
		// daemon alive) until they end by themselves.
		cfg.Slog.Warn("not watching for a lazy unmount: tasks are not stopped by one",
			"mountpoint", cfg.Mountpoint, "err", err)
	} else {
		d.stopDetach = stop
	}
	if cfg.StateDir != "" {
		d.state.dir = cfg.StateDir
		d.FS.AddStatus(func() (string, any) { return "state", d.state.snapshot() })
	}
	d.startJournalGC() // journal.go
	if cfg.PersistReads && cfg.StateDir != "" && cfg.SaveInterval >= 0 {
		interval := cfg.SaveInterval
		if interval == 0 {
			interval = DefaultSaveInterval
		}
		d.stopSaves, d.savesDone = make(chan struct{}), make(chan struct{})
		go d.checkpoints(interval)
	}
	d.startStateRetention() // retention.go
	cfg.Slog.Info("mounted", "workspace", cfg.Workspace, "mountpoint", cfg.Mountpoint,
		"mode", cfg.Mode.String(), "watch", mode, "backing_fs", kind, "shared", d.FS.CrossMount().SharedMode(), "uncached", remote != "", "state_dir", cfg.StateDir)
	d.awaitPeerTable() // peers.go
	started = true
	return d, nil
}

// Done is closed when the server has stopped (unmounted by us or by
// `rubinofs unmount` / umount) and its /dev/fuse descriptor is closed.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Slog returns the daemon's structured logger (Config.Slog).
func (d *Daemon) Slog() *slog.Logger { return d.cfg.Slog }

// Mountpoint returns the absolute mountpoint.
func (d *Daemon) Mountpoint() string { return d.cfg.Mountpoint }

// Close unmounts (retrying a busy mount briefly, then detaching it lazily so
// the daemon never hangs) and releases everything. Idempotent.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		// Stop every task and kill its process group first, so none keeps
		// the mount busy or outlives it.
		d.Tasks.CancelAll()
		d.Obs.CloseStreams() // access-log readers get end-of-file and release the mount
		if d.stopDetach != nil {
			d.stopDetach()
		}
		if d.stopSaves != nil {
			close(d.stopSaves)
			<-d.savesDone
		}
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
				d.cfg.Slog.Warn("unmount failed: detaching lazily; open files are served until they are closed",
					"mountpoint", d.cfg.Mountpoint, "err", err)
				if derr := syscall.Unmount(d.cfg.Mountpoint, syscall.MNT_DETACH); derr != nil {
					d.cfg.Slog.Error("detaching the mount failed", "mountpoint", d.cfg.Mountpoint, "err", derr)
					d.closeErr = err
				}
			}
			<-d.done
		}
		// No deferred read hash keeps a backing file open past the unmount.
		d.Guard.WaitDeferred()
		if d.cfg.PersistReads && d.cfg.StateDir != "" {
			d.saveReads(true)
		}
		d.stopWatcher()
		d.stopPoller() // its passes open the backing tree: none may run past Close
		if err := d.closeJournal(); err != nil && d.closeErr == nil {
			d.closeErr = err
		}
		if err := d.closePolicy(); err != nil && d.closeErr == nil {
			d.closeErr = err
		}
		d.closeFd()
		if err := d.Compact.Close(); err != nil && d.closeErr == nil {
			d.closeErr = err
		}
		if err := d.Tasks.Close(); err != nil && d.closeErr == nil {
			d.closeErr = err
		}
		d.waitStateRetention()
		if d.stateLock != nil {
			touchLock(d.stateLock) // its last use: now
			d.stateLock.Close()    // the state directory is free for the next mount
		}
	})
	return d.closeErr
}

func (d *Daemon) closeFd() {
	if d.FS != nil {
		d.FS.Close() // the backing root descriptor; the server has stopped
	}
	if d.rootFd >= 0 {
		syscall.Close(d.rootFd)
		d.rootFd = -1
	}
	d.closePeers() // peers.go
}
