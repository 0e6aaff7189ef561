package benchkit

import (
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/mounttest"
	"github.com/rubinofs/rubinofs/journal"
)

// Target is one place a workload runs: a native directory or a mount.
type Target struct {
	Name   string
	Dir    string         // where the workload runs (the mountpoint of a mount)
	Back   string         // the backing directory of a mount; Dir for native
	State  string         // the state directory of a rubinofs mount; "" for others
	Daemon *daemon.Daemon // the in-process rubinofs daemon, nil for other targets
	Pid    int            // the daemon process of a Binary target, 0 for others
	// journal: a Binary target's build journals (it has
	// .rubino/self/journal and was not mounted with --journal=false).
	journal bool
	close   func()
}

// Journaled reports whether the target is a rubinofs mount with its change
// journal on (one that takes checkpoints).
func (t *Target) Journaled() bool {
	return t.journal || t.Daemon != nil && t.Daemon.Journal != nil
}

// Close unmounts a mount (a no-op for native). Idempotent: it is also
// registered with AtExit when the target is made.
func (t *Target) Close() {
	if t.close != nil {
		c := t.close
		t.close = nil
		c()
	}
}

// Native makes the directory tmp/name and returns it as a target.
func Native(tmp, name string) (*Target, error) {
	dir := filepath.Join(tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Target{Name: name, Dir: dir, Back: dir}, nil
}

// dirs makes tmp/name-back and tmp/name.
func dirs(tmp, name string) (back, mnt string, err error) {
	back, mnt = filepath.Join(tmp, name+"-back"), filepath.Join(tmp, name)
	for _, d := range []string{back, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", "", err
		}
	}
	return back, mnt, nil
}

// Loopback mounts a bare go-fuse loopback of tmp/name-back at tmp/name.
// timeout is the kernel entry, attribute and negative timeout; nil turns
// kernel caching off. As root it mounts directly (and go-fuse's loopback
// uses kernel passthrough).
func Loopback(tmp, name string, timeout *time.Duration) (*Target, error) {
	return loopback(tmp, name, timeout, false)
}

// LoopbackPerms is Loopback mounted with default_permissions, as rubinofs
// is: the kernel checks each access against the attributes it holds, so
// after each change to a directory (create, unlink, link, rename, mkdir,
// rmdir) the next access in it first sends a GETATTR of the directory,
// which the bare loopback, checking nothing, never needs.
func LoopbackPerms(tmp, name string, timeout *time.Duration) (*Target, error) {
	return loopback(tmp, name, timeout, true)
}

// loopback is Loopback, with default_permissions when perms.
func loopback(tmp, name string, timeout *time.Duration, perms bool) (*Target, error) {
	back, mnt, err := dirs(tmp, name)
	if err != nil {
		return nil, err
	}
	root, err := fs.NewLoopbackRoot(back)
	if err != nil {
		return nil, err
	}
	// A non-nil Options with nil timeouts turns kernel caching off.
	opts := &fs.Options{EntryTimeout: timeout, AttrTimeout: timeout, NegativeTimeout: timeout,
		MountOptions: fuse.MountOptions{DirectMount: os.Geteuid() == 0, FsName: back, Name: "loopback"}}
	if perms {
		opts.MountOptions.Options = []string{"default_permissions"}
	}
	srv, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &Target{Name: name, Dir: mnt, Back: back, close: func() {
		if err := srv.Unmount(); err != nil {
			log.Printf("%s: unmount: %v; detaching", name, err)
			lazyUnmount(mnt)
		}
	}}
	AtExit(t.Close)
	return t, nil
}

// Rubinofs mounts rubinofs over tmp/name-back at tmp/name, in-process
// through daemon.Start as the CLI does, with the guard in mode, the
// watcher on (one-hour kernel caches: the shipped defaults with --watch)
// and the change journal as shipped (JournalDefaults) unless adjust
// changes the config. The state directory is tmp/name-state. A caught
// signal or Teardown unmounts it.
func Rubinofs(tmp, name string, mode guard.Mode, adjust ...func(*daemon.Config)) (*Target, error) {
	back, mnt, err := dirs(tmp, name)
	if err != nil {
		return nil, err
	}
	return RubinofsAt(name, back, mnt, filepath.Join(tmp, name+"-state"), mode, nil, adjust...)
}

// JournalDefaults is the change journal as a mount has it by default (the
// defaults of the journal.* keys: on, 64 MiB files, 1 GiB store, 7 days,
// sync write).
func JournalDefaults() config.Journal {
	sync, _ := journal.ParseSyncMode(config.Default("journal.sync").(string))
	return config.Journal{
		Sync:        sync,
		Enabled:     config.Default("journal.enabled").(bool),
		Ignored:     config.Default("journal.ignored").(bool),
		MaxFileSize: int64(config.Default("journal.max_file_size").(int)),
		Budget:      int64(config.Default("journal.budget").(int)),
		Retention:   config.Default("journal.retention").(time.Duration),
	}
}

// NoJournal turns the change journal off (--journal=false), for a target
// that measures what the journal costs.
func NoJournal(c *daemon.Config) { c.Journal.Enabled = false }

// RubinofsAt is Rubinofs over an existing backing directory back at mnt;
// progress, if set, is the watcher's initial-walk progress callback.
func RubinofsAt(name, back, mnt, state string, mode guard.Mode, progress func(dirs int, done bool), adjust ...func(*daemon.Config)) (*Target, error) {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	cfg := daemon.Config{Workspace: back, Mountpoint: mnt, StateDir: state,
		Guard: config.Guard{Mode: mode}, Cache: config.Cache{Watch: true, CacheTimeout: time.Hour, PagedReadMax: config.DefaultPagedReadMax},
		Journal: JournalDefaults(), WatchProgress: progress, Version: "bench", Slog: DaemonLog()}
	for _, a := range adjust {
		a(&cfg)
	}
	m, err := mounttest.Start(cfg, filepath.Dir(mnt)) // the mount the real-mount tests use
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	d := m.D
	t := &Target{Name: name, Dir: mnt, Back: back, State: state, Daemon: d}
	t.close = func() {
		if n := len(d.Guard.Denials("")); n > 0 {
			log.Printf("%s: %d denials during the workload, the first: %v", name, n, d.Guard.Denials("")[0])
		}
		leaked, err := m.Close()
		if err != nil {
			log.Printf("%s: close: %v", name, err)
		}
		if len(leaked) > 0 {
			log.Printf("%s: descriptors leaked by the mount: %v", name, leaked)
		}
	}
	AtExit(t.Close)
	return t, nil
}

// Denials is the number of refusals the rubinofs target's guard logged,
// in-process or a Binary's (0 for other targets).
func (t *Target) Denials() int {
	if t.Pid != 0 {
		return binaryDenials(t.Dir)
	}
	if t.Daemon == nil {
		return 0
	}
	return len(t.Daemon.Guard.Denials(""))
}

// DaemonLog is the daemons' logger: discarded unless RUBINOFS_DEBUG_EVENTS
// is set, then text records on stderr.
func DaemonLog() *slog.Logger {
	if os.Getenv("RUBINOFS_DEBUG_EVENTS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

const modeOff, modeEnforce = guard.ModeOff, guard.ModeEnforce

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }
