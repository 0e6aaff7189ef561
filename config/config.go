// Package config loads rubinofs' TOML configuration and merges it with the
// mount's flags into one effective Config that remembers, for every value,
// where it came from.
//
// Sources, strongest first:
//
//  1. flags of `rubinofs mount` that were given on the command line;
//  2. the workspace file, WORKSPACE/.rubino.toml;
//  3. the user file: --config PATH, else $XDG_CONFIG_HOME/rubinofs/config.toml,
//     else ~/.config/rubinofs/config.toml;
//  4. the state files of the older JSON configs, agents.json and
//     compact.json in the state directory ($RUBINOFS_AGENTS_CONFIG,
//     $RUBINOFS_COMPACT_CONFIG), for the [agents] and [compact] keys only;
//  5. the defaults.
//
// A key set in a stronger source replaces the weaker one's value (lists
// included: a list is one value). Subagent types are keyed per name
// (agents.subagents.NAME), so the types of several sources add up.
//
// Security: the workspace file is writable by the agent the guard confines,
// so it may only tighten the guard and set neutral tuning (see Rule and
// docs/config.md). A workspace file that would loosen the guard, name a
// program to run or raise a cap is refused as a whole, with an error naming
// the file, line and key.
//
// Every key is declared once, as a row of the options table (options.go,
// Option): the TOML schema, Config, `config show`, the CLI's mount flags
// (Keys) and docs/config.md's key table (DocTable) are made from it. Only
// this package reads configuration files and variables; the daemon hands
// the sections to tasks and compact (docs/DESIGN.md#options-table).
//
// Files are decoded with github.com/pelletier/go-toml/v2 with unknown keys
// disallowed; every error names the file and line ("config.toml:12: unknown
// key guard.mdoe"). Durations are TOML strings in time.ParseDuration's form
// ("1h", "500ms").
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/journal"
	"github.com/rubinofs/rubinofs/tasks"
)

// File names and limits.
const (
	// WorkspaceFileName is the workspace file, at the workspace's root.
	WorkspaceFileName = ".rubino.toml"
	// UserFileName is the user file under $XDG_CONFIG_HOME (or ~/.config).
	UserFileName = "rubinofs/config.toml"
	// MaxFileSize bounds a config file (1 MiB); larger files are refused.
	MaxFileSize = 1 << 20
)

// Kind names a source of values.
type Kind string

// The kinds of Source, weakest first.
const (
	KindDefault   Kind = "default"
	KindState     Kind = "state file"
	KindUser      Kind = "user file"
	KindWorkspace Kind = "workspace file"
	KindFlag      Kind = "flag"
)

// Source is where one value came from: a default, a file (with its line,
// 0 for the JSON state files, which have none) or a flag.
type Source struct {
	Kind Kind   `json:"kind"`
	Path string `json:"path,omitempty"`
	Line int    `json:"line,omitempty"`
	Flag string `json:"flag,omitempty"` // "--mode"
}

// String renders the source as `config show` prints it: "default",
// "user file /home/u/.config/rubinofs/config.toml:3", "flag --mode",
// "state file /var/lib/rubinofs/ws/agents.json".
func (s Source) String() string {
	switch {
	case s.Kind == KindFlag:
		return "flag " + s.Flag
	case s.Path != "" && s.Line > 0:
		return fmt.Sprintf("%s %s:%d", s.Kind, s.Path, s.Line)
	case s.Path != "":
		return fmt.Sprintf("%s %s", s.Kind, s.Path)
	}
	return string(s.Kind)
}

// Flag is one mount flag given on the command line, to override Key. Value
// has the key's Go type: string, []string, bool, int or time.Duration (see
// Option.Kind). The CLI passes only flags that were set (urfave/cli's IsSet).
type Flag struct {
	Key   string // "guard.mode"
	Name  string // "--mode", for the source
	Value any
}

// Options says where Load looks.
type Options struct {
	// UserFile is --config: an explicit user file, which must exist. ""
	// looks at $XDG_CONFIG_HOME/rubinofs/config.toml, else
	// $HOME/.config/rubinofs/config.toml, and a missing file there is no
	// error.
	UserFile string
	// Workspace is the workspace directory whose .rubino.toml is read (""
	// reads none). A missing file is no error; a symlink or other
	// non-regular file is refused.
	Workspace string
	// StateDir is where agents.json and compact.json are looked for (""
	// looks only at $RUBINOFS_AGENTS_CONFIG and $RUBINOFS_COMPACT_CONFIG).
	StateDir string
	// Flags are the flags given on the command line, strongest of all.
	Flags []Flag
	// Getenv reads the environment (default os.Getenv); tests set it.
	Getenv func(string) string
}

// Guard is the effective [guard] section. daemon.Config embeds it, so a
// guard setting is declared once: its field here, its key in the options
// table (options.go, docs/DESIGN.md#options-table).
type Guard struct {
	Mode guard.Mode // guard.mode, --mode
	// Exempt are extra doublestar globs, workspace-relative, exempt from
	// the guard (guard.exempt, --exempt).
	Exempt []string
	// ToolTrees are the markers of tool-owned trees (guard.tool_trees;
	// ignore.ParseToolMarker gives the forms, docs/DESIGN.md#tool-trees).
	// GuardIgnored guards them too.
	ToolTrees []string
	// GuardIgnored guards git-ignored files too (guard.guard_ignored,
	// --guard-ignored).
	GuardIgnored bool
	// AllowUnregistered leaves callers outside any session unguarded
	// (guard.unregistered = "allow", --unregistered allow).
	AllowUnregistered bool
	// Unlink is the guard's unlink policy (guard.unlink, --unlink; the
	// zero value is guard.UnlinkGuard). See guard.Config.
	Unlink guard.UnlinkPolicy
	// Errno is what a refused caller gets: EACCES or EPERM (guard.errno,
	// --errno; 0 means EACCES). See guard.Config.
	Errno syscall.Errno
	// Scanners are the programs whose reads count for their own process
	// only (guard.scanners; nil: guard.DefaultScanners; see
	// guard.Config.Scanners and docs/DESIGN.md#scanner-reads).
	Scanners []string
	// MaxHashSize is the size in bytes above which a file's stat stands
	// for its content hash (guard.max_hash_size; 0:
	// guard.DefaultMaxHashSize; docs/DESIGN.md#hash-bound).
	MaxHashSize int64
}

// GuardConfig returns the guard.Config of these settings (mode, unlink
// policy, errno, scanners, hash bound); the daemon adds what the mount
// decides itself (timestamp granularity, the denial logger, the git-safe
// checker).
func (g Guard) GuardConfig() guard.Config {
	return guard.Config{Mode: g.Mode, Unlink: g.Unlink, Errno: g.Errno, Scanners: g.Scanners, MaxHashSize: g.MaxHashSize}
}

// Sessions is the effective [sessions] section. daemon.Config embeds it.
type Sessions struct {
	// CgroupAuto are doublestar globs of cgroup v2 paths: a caller from a
	// cgroup matching one (or below it) belongs to an automatic session of
	// that cgroup, made on first contact (sessions.cgroup_auto,
	// --session-cgroups; docs/DESIGN.md#cgroup-sessions). Refused in the
	// workspace file.
	CgroupAuto []string
	// MaxLive bounds the live sessions, in sessions: a registration past
	// it (sessions/clone, `rubinofs run`, `rubinofs session new`) fails
	// with EAGAIN and a reason until one ends (sessions.max_live,
	// --max-live-sessions; per owner uid; default DefaultMaxLiveSessions, 1 to
	// MaxLiveSessions). Refused in the workspace file.
	MaxLive int
}

// Cache is the effective [cache] section. daemon.Config embeds it, so a
// cache setting is declared once: its field here, its key in the options
// table (options.go, docs/DESIGN.md#options-table). Load
// resolves CacheTimeout: a default or 0 becomes 1 h with Watch and 1 s
// without.
type Cache struct {
	// CacheTimeout is the kernel's entry, negative-entry and attribute
	// timeout for watched subtrees (with Watch), or for everything
	// (cache.cache_timeout, --cache-timeout).
	CacheTimeout time.Duration
	// ShortTimeout is the cache timeout of subtrees the watcher does not
	// watch (skipped, or out of inotify watches) (cache.short_timeout,
	// --short-timeout; Load's default 1 s, while a daemon.Config built by
	// hand passes 0 through as no caching).
	ShortTimeout time.Duration
	// Watch starts the fsnotify watcher: external changes invalidate the
	// guard's hashes and the kernel's caches, and the page cache is kept
	// across opens (cache.watch, --watch).
	Watch bool
	// WatchSkip are doublestar globs of directories not watched
	// (cache.watch_skip, --watch-skip; empty: watcher.DefaultSkip,
	// .git/objects).
	WatchSkip []string
	// MaxWatches limits the inotify watches (cache.max_watches,
	// --max-watches; 0: the kernel's limit).
	MaxWatches int
	// Shared: other mounts, on this host or others, share the backing
	// directory (docs/multihost.md): guarded reads are served and
	// registered by the daemon, close-to-open (cache.shared, --shared;
	// set by Load also for a network backing filesystem under
	// --watch=auto, and for --watch=poll).
	Shared bool
	// NoPeerDetect turns off the detection of other mounts of the backing
	// directory on this host (cache.peer_detect = false,
	// --peer-detect=false): the mount neither registers its backing root
	// in the host's registry nor looks for peers there, and is shared only
	// with Shared (docs/DESIGN.md#peer-mounts). The zero value detects.
	NoPeerDetect bool
	// WatchMode is how external changes are seen while Watch is on:
	// "inotify", "poll" (PollInterval apart; for a backing filesystem
	// whose remote changes inotify never reports), or "auto": poll on a
	// network or FUSE backing filesystem (statfs magic), inotify
	// elsewhere (cache.watch_mode; --watch=auto|inotify|poll|off sets it
	// with Watch).
	WatchMode string
	// PollInterval is the pause between two passes of the poller
	// (cache.poll_interval, --poll-interval; 100 ms to 1 h).
	PollInterval time.Duration
	// PagedReadMax is the size in bytes under which a read-only open of
	// a watched file keeps the kernel's page cache instead of kernel
	// passthrough (cache.paged_read_max, --paged-read-max; 0:
	// passthrough at every size, as a daemon.Config built by hand has it;
	// docs/DESIGN.md#paged-reads).
	PagedReadMax int
	// PersistReads keeps the guard's read state across restarts in
	// STATE_DIR/reads.json: saved at unmount, revalidated by hash at the
	// next mount (a record whose file changed is dropped). Sessions whose
	// root process is still alive are re-registered (cache.persist_reads,
	// --persist-reads).
	PersistReads bool
	// IOURing serves the mount's FUSE requests over io_uring when the
	// kernel offers it (cache.io_uring, --io-uring; off by default):
	// Linux 6.14 or later with the fuse module's enable_uring parameter
	// set. Otherwise requests come through read(2) and write(2) of
	// /dev/fuse (docs/DESIGN.md#fuse-io-uring).
	IOURing bool
}

// Journal is the effective [journal] section: the per-session change
// journal under STATE_DIR/journal (docs/DESIGN.md#journal-hook).
// daemon.Config embeds it, so a journal setting is declared once: here,
// with its key in the options table (options.go).
type Journal struct {
	// Enabled records every change a session makes through the mount
	// (journal.enabled, --journal; false: no journal call at all).
	Enabled bool
	// Ignored journals git-ignored paths too (journal.ignored,
	// --journal-ignored); .git/ and .rubino never are.
	Ignored bool
	// MaxFileSize is the largest file, in bytes, whose bytes a pre-image
	// keeps; a larger one is recorded as unrecoverable
	// (journal.max_file_size, --journal-max-file-size).
	MaxFileSize int64
	// Budget bounds the journal, blobs and session logs together, in
	// bytes (0: no budget; docs/DESIGN.md#journal-budget)
	// (journal.budget, --journal-budget).
	Budget int64
	// BudgetPerUID bounds what the sessions of one uid other than the
	// mount's owner and root hold in the journal, in bytes (0: Budget
	// alone; docs/DESIGN.md#journal-share) (journal.budget_per_uid,
	// --journal-budget-per-uid).
	BudgetPerUID int64
	// BudgetOtherUIDs bounds what the sessions of all uids other than
	// the mount's owner and root hold in the journal together, in bytes
	// (0: no such bound; docs/DESIGN.md#journal-share)
	// (journal.budget_other_uids, --journal-budget-other-uids).
	BudgetOtherUIDs int64
	// Retention is how long an ended session's log is kept
	// (journal.retention, --journal-retention; 0: forever).
	Retention time.Duration
	// Sync says when a record and its pre-image's blob become durable
	// (journal.sync, --journal-sync): journal.SyncWrite ("write", the zero
	// value and default: written before the change is acknowledged,
	// fsync'ed by a background flusher within 1 s, a linked pre-image's
	// bytes left to the kernel's writeback) or journal.SyncFsync
	// ("fsync": fsync'ed before the change is acknowledged)
	// (docs/DESIGN.md#journal-sync).
	Sync journal.SyncMode
}

// State is the effective [state] section: the state directories that
// mounts leave under the user's state root (docs/DESIGN.md#state-retention).
type State struct {
	// Retention: at mount, the state directories of workspaces that are
	// gone, unused for this long, are removed (state.retention,
	// --state-retention; 0: never at mount).
	Retention time.Duration
}

// Entry is one effective value and its source, in `config show` order.
// Value is a string, []string, bool, int, float64, time.Duration or (for
// agents.subagents.NAME) tasks.SubagentType.
type Entry struct {
	Key    string
	Value  any
	Source Source
}

// Config is the effective configuration. Agents has every JSON field set
// (defaults included); Compact is through WithDefaults and Validate. The
// daemon hands Agents to tasks.Open and Compact to compact.Open, which read
// no configuration of their own (docs/DESIGN.md#options-table).
type Config struct {
	Guard    Guard
	Sessions Sessions
	Cache    Cache
	Journal  Journal
	State    State
	Agents   tasks.Config
	Compact  compact.Config
	// Files are the files that were read, weakest first, as sources.
	Files []Source

	entries []Entry
	index   map[string]int
}

// Entries returns every effective value with its source, in the order
// `config show` prints them.
func (c *Config) Entries() []Entry { return append([]Entry(nil), c.entries...) }

// Lookup returns the effective value of key ("guard.mode") and its source.
func (c *Config) Lookup(key string) (Entry, bool) {
	i, ok := c.index[key]
	if !ok {
		return Entry{}, false
	}
	return c.entries[i], true
}

// UserFilePath returns the user file Load reads without --config:
// $XDG_CONFIG_HOME/rubinofs/config.toml, else
// $HOME/.config/rubinofs/config.toml ("" when neither variable is set).
func UserFilePath(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, UserFileName)
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", UserFileName)
	}
	return ""
}

// Load reads the sources opts names and merges them (see the package
// comment). Errors name the file and line: a syntax error, an unknown key,
// a value of the wrong type or out of range, a workspace file that would
// loosen the guard, a missing --config file, an unreadable or over-large
// file; and the state files' own errors.
func Load(opts Options) (*Config, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	m := defaults()
	var files []Source

	// The older JSON state files, for [agents] and [compact].
	st, stFiles, err := loadStateFiles(opts)
	if err != nil {
		return nil, err
	}
	m.overlay(st)
	files = append(files, stFiles...)

	// The user file.
	userPath, mustExist := opts.UserFile, true
	if userPath == "" {
		userPath, mustExist = UserFilePath(opts.Getenv), false
	} else if abs, err := filepath.Abs(userPath); err == nil {
		userPath = abs
	}
	if userPath != "" {
		src := Source{Kind: KindUser, Path: userPath}
		l, ok, err := loadFile(src, !mustExist)
		if err != nil {
			return nil, err
		}
		if ok {
			m.overlay(l)
			files = append(files, src)
		}
	}

	// The workspace file: may only tighten the guard.
	if opts.Workspace != "" {
		ws, err := filepath.Abs(opts.Workspace)
		if err != nil {
			return nil, err
		}
		src := Source{Kind: KindWorkspace, Path: filepath.Join(ws, WorkspaceFileName)}
		l, ok, err := loadFile(src, true)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := checkWorkspace(m, l); err != nil {
				return nil, err
			}
			m.overlay(l)
			files = append(files, src)
		}
	}

	// Flags.
	fl := layer{}
	for _, f := range opts.Flags {
		src := Source{Kind: KindFlag, Flag: f.Name}
		o, ok := lookup(f.Key)
		if !ok {
			return nil, fmt.Errorf("flag %s: no config key %s", f.Name, f.Key)
		}
		if err := o.check(f.Value); err != nil {
			return nil, fmt.Errorf("flag %s: %w", f.Name, err)
		}
		fl[f.Key] = value{v: f.Value, src: src}
	}
	m.overlay(fl)

	c, err := build(m)
	if err != nil {
		return nil, err
	}
	c.Files = files
	return c, nil
}

// LoadStateFiles is Load with the state files of stateDir (agents.json,
// compact.json, or the files AgentsConfigEnv and CompactConfigEnv name)
// and the defaults only: no user file, no workspace file, no flag. The
// daemon uses its Agents and Compact for a daemon.Config built without Load
// (tests, benchmarks, the demo), so that tasks and compact read no
// configuration of their own (docs/DESIGN.md#options-table). getenv nil is
// os.Getenv. Errors: the state files' (see Load).
func LoadStateFiles(stateDir string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	m := defaults()
	st, files, err := loadStateFiles(Options{StateDir: stateDir, Getenv: getenv})
	if err != nil {
		return nil, err
	}
	m.overlay(st)
	c, err := build(m)
	if err != nil {
		return nil, err
	}
	c.Files = files
	return c, nil
}

// loadFile reads and parses the config file src names (src.Kind is
// KindUser or KindWorkspace; the workspace file may not be a symlink, see
// readFile). ok is false, with no error, for a missing file when optional.
// A read error is prefixed with the kind ("user file: ...").
func loadFile(src Source, optional bool) (l layer, ok bool, err error) {
	data, err := readFile(src.Path, src.Kind == KindWorkspace)
	switch {
	case errors.Is(err, fs.ErrNotExist) && optional:
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("%s: %w", src.Kind, err)
	}
	if l, err = parseFile(data, src); err != nil {
		return nil, false, err
	}
	return l, true, nil
}

// readFile reads a config file of at most MaxFileSize bytes. With
// noSymlink (the workspace file) the file must be a regular file, not a
// symlink: an agent could otherwise point it anywhere the daemon may read.
func readFile(path string, noSymlink bool) ([]byte, error) {
	if noSymlink {
		fi, err := os.Lstat(path)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file (a symlink is refused: the workspace is the agent's)", path)
		}
	}
	flags := os.O_RDONLY
	if noSymlink {
		flags |= syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileSize)
	}
	return data, nil
}

// value is one value of a layer and where it came from.
type value struct {
	v   any
	src Source
}

// layer maps dotted keys ("guard.mode", "agents.subagents.claude") to
// values. A merged layer holds every key.
type layer map[string]value

// overlay puts every value of o over l's.
func (l layer) overlay(o layer) {
	for k, v := range o {
		l[k] = v
	}
}

// sortedSubagents returns the agents.subagents.NAME keys of l, sorted.
func (l layer) sortedSubagents() []string {
	var out []string
	for k := range l {
		if isSubagentKey(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
