package config

import (
	"fmt"
	"time"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/journal"
	"github.com/rubinofs/rubinofs/tasks"
)

// to is the set of a key whose value goes into a field unchanged.
func to[T any](field func(c *Config) *T) func(*Config, any) error {
	return func(c *Config, v any) error { *field(c) = v.(T); return nil }
}

// toInt64 is the set of an int key whose field counts bytes (int64).
func toInt64(field func(c *Config) *int64) func(*Config, any) error {
	return func(c *Config, v any) error { *field(c) = int64(v.(int)); return nil }
}

// notBool is the set of a bool key whose field says the opposite
// (cache.peer_detect fills NoPeerDetect).
func notBool(field func(c *Config) *bool) func(*Config, any) error {
	return func(c *Config, v any) error { *field(c) = !v.(bool); return nil }
}

// newEntry, boolOff, allowWord and higherInt are loosens functions: they
// say when a workspace file's value is less strict than the weaker
// sources' (RuleTighten).
func newEntry(lo, v any) bool  { return !subset(v.([]string), lo.([]string)) } // an element added
func boolOff(lo, v any) bool   { return lo.(bool) && !v.(bool) }               // true turned false
func allowWord(lo, v any) bool { return v == "allow" && lo != "allow" }
func higherInt(lo, v any) bool { return v.(int) > lo.(int) }

// validTokenizer checks compact.tokenizer.
func validTokenizer(v any) error {
	if !compact.ValidTokenizer(v.(string)) {
		return fmt.Errorf("unknown tokenizer %q", v)
	}
	return nil
}

// options is the table: every configuration key once, in `config show`
// order (docs/DESIGN.md#options-table). A new key is one row here; the
// TOML schema, Config, `config show`, the mount flag and docs/config.md's
// table follow from it (config's TestDocTable fails, printing the text,
// until docs/config.md has the new row).
var options = []Option{
	{Key: "guard.mode", typ: tString, Default: "enforce", valid: oneOf("enforce", "warn", "off"), rule: RuleTighten,
		loosens: func(lo, v any) bool { return modeRank[v.(string)] < modeRank[lo.(string)] },
		Flag:    "mode", Usage: "guard mode: enforce, warn (allow and log) or off",
		Doc: "`enforce`, `warn` (allow and log what enforce would refuse) or `off`",
		set: func(c *Config, v any) (err error) { c.Guard.Mode, err = guard.ParseMode(v.(string)); return err }},
	{Key: "guard.exempt", typ: tStrings, Default: []string{}, valid: globs, rule: RuleTighten, loosens: newEntry, // a new exemption
		Flag: "exempt", Usage: "exempt paths matching `GLOB` (doublestar, workspace-relative) from the guard; repeatable",
		Doc: "doublestar globs (workspace-relative) exempt from the guard",
		set: to(func(c *Config) *[]string { return &c.Guard.Exempt })},
	// Another marker exempts more: a workspace file may only remove some.
	{Key: "guard.tool_trees", typ: tStrings, Default: append([]string(nil), ignore.DefaultToolMarkers...), valid: toolMarkers,
		rule: RuleTighten, loosens: newEntry, // a new marker
		Doc: "markers of tool-owned trees, exempt from refusals without a `.gitignore`: `NAME/` (a directory of that name), `FILE` (a directory holding that file), `FILE:PREFIX` (the file must start with PREFIX: the Cache Directory Tagging Specification's signature, which Cargo's `target/` carries; the Go build cache's README). A tree whose marker predates the mount (or `rubinofs policy reload`) is exempt for everyone; one a session made exempts only files born after the marker, owned by the marker's uid, for callers of that uid. `[]` recognises none; `guard_ignored = true` guards them too: docs/DESIGN.md#tool-trees",
		set: to(func(c *Config) *[]string { return &c.Guard.ToolTrees })},
	{Key: "guard.guard_ignored", typ: tBool, Default: false, rule: RuleTighten, loosens: boolOff,
		Flag: "guard-ignored", Usage: "guard git-ignored files too (only .git/ and --exempt stay exempt)",
		Doc: "guard git-ignored files too",
		set: to(func(c *Config) *bool { return &c.Guard.GuardIgnored })},
	{Key: "guard.unregistered", typ: tString, Default: "guard", valid: oneOf("guard", "allow"), rule: RuleTighten, loosens: allowWord,
		Flag: "unregistered", Usage: "callers outside any session: guard or allow",
		Doc: "callers outside any session: `guard` or `allow`",
		set: func(c *Config, v any) error { c.Guard.AllowUnregistered = v == "allow"; return nil }},
	{Key: "guard.unlink", typ: tString, Default: "guard", valid: oneOf("guard", "allow"), rule: RuleTighten, loosens: allowWord,
		Flag: "unlink", Usage: "unlinking a file the session never read (or that changed since): guard (refuse) or allow",
		Doc: "`guard`: unlinking a file the session never read (or that changed since) is refused like any overwrite; `allow`: unlink is never refused (delete-and-recreate then bypasses read-before-write)",
		set: func(c *Config, v any) (err error) {
			c.Guard.Unlink, err = guard.ParseUnlinkPolicy(v.(string))
			return err
		}},
	{Key: "guard.errno", typ: tString, Default: "EACCES", valid: oneOf("EACCES", "EPERM"),
		Flag: "errno", Usage: "the errno a refused caller gets: EACCES or EPERM",
		Doc: "the errno a refused caller gets: `EACCES` (\"Permission denied\") or `EPERM` (\"Operation not permitted\")",
		set: func(c *Config, v any) (err error) { c.Guard.Errno, err = guard.ParseErrno(v.(string)); return err }},
	// A smaller bound fingerprints more files by their stat alone.
	{Key: "guard.max_hash_size", typ: tInt, Default: guard.DefaultMaxHashSize, valid: intRange(1<<20, MaxJournalBytes), rule: RuleTighten,
		loosens:    func(lo, v any) bool { return v.(int) < lo.(int) },
		Doc:        "bytes, 1 MiB to 1 PiB: the content of a larger file is never read for its hash, its stat (identity, size, mtime, ctime) stands for it (docs/DESIGN.md#hash-bound)",
		DocDefault: "`1073741824` (1 GiB)",
		set:        toInt64(func(c *Config) *int64 { return &c.Guard.MaxHashSize })},
	// A scanner's reads count for its own process only, so a scanner
	// removed from the list would make its reads count for the session:
	// a workspace file may only add names.
	{Key: "guard.scanners", typ: tStrings, Default: append([]string(nil), guard.DefaultScanners...), valid: programNames, rule: RuleTighten,
		loosens: func(lo, v any) bool { return !subset(lo.([]string), v.([]string)) }, // a scanner removed
		Doc:     "programs whose reads count for their own process only, by `comm` checked against the exe (`vet` is `go vet`'s; names are clipped to 15 bytes, as the kernel clips `comm`): docs/DESIGN.md#scanner-reads",
		set:     to(func(c *Config) *[]string { return &c.Guard.Scanners })},

	// Which processes share a session decides whose reads count for whom.
	{Key: "sessions.cgroup_auto", typ: tStrings, Default: []string{}, valid: cgroupGlobs, rule: RuleRefuse,
		why:  "it decides which processes share a session, and so whose reads count for whom",
		Flag: "session-cgroups", Usage: "callers from a cgroup matching `GLOB` (doublestar, cgroup v2 paths such as /system.slice/docker-*.scope) get a session of that cgroup; repeatable",
		Doc: "doublestar globs of cgroup v2 paths (absolute, as `/proc/PID/cgroup` shows them on the host): a caller whose cgroup, or an ancestor of it, matches belongs to a session of the deepest matching cgroup, made on first contact and named after the container id (Docker `/system.slice/docker-*.scope` or `/docker/*`, Podman `/machine.slice/libpod-*.scope`, Kubernetes `/kubepods*/**`): docs/DESIGN.md#cgroup-sessions, docs/containers.md",
		set: to(func(c *Config) *[]string { return &c.Sessions.CgroupAuto })},
	// Refused, not "only lower": a small cap lets the confined agent keep
	// the user from registering sessions at all.
	{Key: "sessions.max_live", typ: tInt, Default: DefaultMaxLiveSessions, valid: intRange(1, MaxLiveSessions), rule: RuleRefuse,
		why:  "it bounds the sessions every user of the mount may register",
		Flag: "max-live-sessions", Usage: "at most `N` live sessions: registering one more fails with EAGAIN until one ends",
		Doc: "live sessions of one uid at most (1 to 65536; another uid's never count): one more registration through `sessions/clone` (`rubinofs run`, `rubinofs session new`) fails with EAGAIN and the reason until a session ends; the CLI prints the reason and exits 1 (docs/DESIGN.md#ctl-blocking-io)",
		set: to(func(c *Config) *int { return &c.Sessions.MaxLive })},

	{Key: "cache.cache_timeout", typ: tDuration, Default: time.Duration(0), valid: durRange(0, MaxCacheTimeout),
		wsValid: durRange(0, MaxWorkspaceCacheTimeout),
		Flag:    "cache-timeout", Usage: "kernel entry/attribute/negative cache timeout (default 1h with --watch, 1s without)",
		Doc: "kernel entry, attribute and negative-entry timeout (`\"0s\"`: the default); at most 24 h", DocDefault: "1 h with the watcher, 1 s without",
		set: to(func(c *Config) *time.Duration { return &c.Cache.CacheTimeout })},
	{Key: "cache.short_timeout", typ: tDuration, Default: time.Second, valid: durRange(minTimeout, MaxShortTimeout),
		wsValid: durRange(minTimeout, MaxWorkspaceShortTimeout),
		Flag:    "short-timeout", Usage: "cache timeout of subtrees the watcher does not watch",
		Doc: "timeout of subtrees the watcher does not watch; 1 ms to 1 h",
		set: to(func(c *Config) *time.Duration { return &c.Cache.ShortTimeout })},
	{Key: "cache.watch", typ: tBool, Default: true,
		Flag: "watch", Usage: "see external changes: --watch=auto (default: poll on NFS, CephFS, FUSE, CIFS; inotify elsewhere), inotify, poll or off (false); the kernel may cache long with inotify",
		Doc: "see external changes at all (`--watch=off`: short timeouts only); how: `cache.watch_mode`",
		set: to(func(c *Config) *bool { return &c.Cache.Watch })},
	{Key: "cache.watch_skip", typ: tStrings, Default: []string{".git/objects", "**/.git/objects"}, valid: globs,
		Flag: "watch-skip", Usage: "do not watch directories matching `GLOB` (doublestar; default .git/objects); they get --short-timeout",
		Doc: "directories not watched (`[]`: the default)",
		set: to(func(c *Config) *[]string { return &c.Cache.WatchSkip })},
	{Key: "cache.max_watches", typ: tInt, Default: 0, valid: intRange(0, MaxWatchesLimit),
		Flag: "max-watches", Usage: "at most `N` inotify watches (0: the kernel's fs.inotify.max_user_watches)",
		Doc: "inotify watches at most (0: the kernel's limit)",
		set: to(func(c *Config) *int { return &c.Cache.MaxWatches })},
	{Key: "cache.paged_read_max", typ: tInt, Default: DefaultPagedReadMax, valid: intRange(0, MaxPagedReadMax),
		Flag: "paged-read-max", Usage: "a read-only open of a watched file under `BYTES` keeps the kernel's page cache instead of kernel passthrough (0: passthrough for every size)",
		Doc: "a read-only open of a watched file smaller than this (bytes) reads through the kernel's kept page cache, larger ones by kernel passthrough; 0: passthrough at every size (docs/DESIGN.md#paged-reads)",
		set: to(func(c *Config) *int { return &c.Cache.PagedReadMax })},
	{Key: "cache.persist_reads", typ: tBool, Default: true,
		Flag: "persist-reads", Usage: "keep read state across restarts in the state directory (revalidated by hash)",
		Doc: "keep read state across restarts",
		set: to(func(c *Config) *bool { return &c.Cache.PersistReads })},
	{Key: "cache.io_uring", typ: tBool, Default: false,
		Flag: "io-uring", Usage: "serve FUSE requests over io_uring when the kernel offers it (Linux 6.14+, /sys/module/fuse/parameters/enable_uring set to Y); while the daemon is stopped, a caller whose request reached a ring entry cannot be killed",
		Doc: "serve the mount's FUSE requests over io_uring, one queue per CPU, when the kernel offers it: Linux 6.14 or later with the fuse module's `enable_uring` parameter on (`echo Y > /sys/module/fuse/parameters/enable_uring`, as root); elsewhere, and by default, through read(2) and write(2) of `/dev/fuse`. Off by default: while the daemon is stopped (SIGSTOP, a debugger, a frozen cgroup) a caller whose request the kernel already handed to a ring entry cannot be killed until the daemon runs again (docs/DESIGN.md#fuse-io-uring)",
		set: to(func(c *Config) *bool { return &c.Cache.IOURing })},
	{Key: "cache.watch_mode", typ: tString, Default: "auto", valid: oneOf("auto", "inotify", "poll"),
		Flag: "watch-mode", Usage: "how external changes are seen while --watch is on: auto, inotify or poll (also written --watch=MODE)",
		Doc: "`inotify`, `poll` (stat every name each `poll_interval`: a backing filesystem whose remote changes inotify never sees), or `auto`: `poll` on NFS, CephFS, a FUSE filesystem (JuiceFS) or CIFS/SMB (statfs magic), `inotify` elsewhere. Also written `--watch=MODE`; `--watch=off` (or `false`) is `cache.watch = false`, `--watch=true` is `auto`. docs/multihost.md",
		set: to(func(c *Config) *string { return &c.Cache.WatchMode })},
	{Key: "cache.shared", typ: tBool, Default: false,
		Flag: "shared", Usage: "other mounts (hosts) share the backing directory: reads are served and registered by the daemon, close-to-open (on with poll, or once another mount on this host is detected: --peer-detect)",
		Doc: "other mounts (hosts) share the backing directory: guarded reads are served by the daemon and registered at their first read, close-to-open (docs/DESIGN.md#close-to-open); on whenever the mode is `poll`, and on a network or FUSE backing (NFS, CephFS, CIFS, GlusterFS, JuiceFS), where the mount is also uncached: decisions hash through `O_DIRECT` (docs/DESIGN.md#uncached-view; the GlusterFS volume options it needs: docs/multihost.md#glusterfs)",
		set: to(func(c *Config) *bool { return &c.Cache.Shared })},
	// Without detection two mounts of one directory lose updates: a
	// workspace file may turn it on, never off.
	{Key: "cache.peer_detect", typ: tBool, Default: true, rule: RuleTighten, loosens: boolOff,
		Flag: "peer-detect", Usage: "detect other mounts of the backing directory on this host and turn shared mode on when one appears (--peer-detect=false: only --shared)",
		Doc: "detect other rubinofs mounts of the backing directory on this host (the same directory, one inside it, or one above it) through a host-wide registry of backing roots, and turn shared mode on at the first decision that sees one, until unmount; `false`: neither register nor look (docs/DESIGN.md#peer-mounts). A workspace file may turn it on, never off",
		set: notBool(func(c *Config) *bool { return &c.Cache.NoPeerDetect })},
	{Key: "cache.poll_interval", typ: tDuration, Default: time.Second, valid: durRange(100*time.Millisecond, time.Hour),
		Flag: "poll-interval", Usage: "pause between two passes of the poller",
		Doc: "pause between two passes of the poller; 100 ms to 1 h",
		set: to(func(c *Config) *time.Duration { return &c.Cache.PollInterval })},

	// The journal is the user's record of what the confined agent
	// changed: a workspace file (writable by that agent) may not turn it
	// off, shrink it or shorten its retention.
	{Key: "journal.enabled", typ: tBool, Default: true, rule: RuleRefuse, why: refuseJournal,
		Flag: "journal", Usage: "journal every change a session makes, for changes, diff and rewind (--journal=false: off)",
		Doc: "record every change each session makes through the mount (pre-images in the state directory) for `rubinofs changes`, `diff` and `rewind` (docs/DESIGN.md#journal-store); `false`: no journal at all",
		set: to(func(c *Config) *bool { return &c.Journal.Enabled })},
	{Key: "journal.ignored", typ: tBool, Default: false, rule: RuleRefuse, why: refuseJournal,
		Flag: "journal-ignored", Usage: "journal git-ignored paths too (.git/ never is)",
		Doc: "journal git-ignored paths too (`.git/` and `.rubino` never are)",
		set: to(func(c *Config) *bool { return &c.Journal.Ignored })},
	{Key: "journal.max_file_size", typ: tInt, Default: DefaultJournalMaxFileSize, valid: intRange(1, MaxJournalBytes), rule: RuleRefuse, why: refuseJournal,
		Flag: "journal-max-file-size", Usage: "keep the pre-image bytes of files up to `BYTES`; larger ones are recorded as unrecoverable",
		Doc: "bytes: larger files are recorded as unrecoverable, and a rewind reports them", DocDefault: "`67108864` (64 MiB)",
		set: toInt64(func(c *Config) *int64 { return &c.Journal.MaxFileSize })},
	{Key: "journal.budget", typ: tInt, Default: DefaultJournalBudget, valid: intRange(0, MaxJournalBytes), rule: RuleRefuse, why: refuseJournal,
		Flag: "journal-budget", Usage: "bound the journal (blobs and session logs together) to `BYTES` (0: no budget); a session whose change would pass it has its journal stopped",
		Doc: "bytes, the bound on the journal, blobs and session logs together (0: none); past it pre-images are recorded as unrecoverable, and a session whose change would grow the journal further has its journal stopped (docs/DESIGN.md#journal-budget)", DocDefault: "`1073741824` (1 GiB)",
		set: toInt64(func(c *Config) *int64 { return &c.Journal.Budget })},
	{Key: "journal.budget_per_uid", typ: tInt, Default: DefaultJournalBudgetPerUID, valid: intRange(0, MaxJournalBytes), rule: RuleRefuse, why: refuseJournal,
		Flag: "journal-budget-per-uid", Usage: "bound what the sessions of one uid other than the mount's owner and root hold in the journal to `BYTES` (0: the budget alone); past it that uid's sessions have their journals stopped",
		Doc: "bytes, the bound on what the sessions of one uid other than the mount's owner and root hold in the journal together, their logs and the blobs those name (0: `journal.budget` alone bounds them); past it their pre-images are recorded as unrecoverable and their journals stopped, while other uids' journals go on, and GC removes that uid's ended sessions first (docs/DESIGN.md#journal-share)", DocDefault: "`268435456` (256 MiB)",
		set: toInt64(func(c *Config) *int64 { return &c.Journal.BudgetPerUID })},
	{Key: "journal.budget_other_uids", typ: tInt, Default: DefaultJournalBudgetOtherUIDs, valid: intRange(0, MaxJournalBytes), rule: RuleRefuse, why: refuseJournal,
		Flag: "journal-budget-other-uids", Usage: "bound what the sessions of all uids other than the mount's owner and root hold in the journal together to `BYTES` (0: no such bound), so they cannot spend the owner's part of the budget",
		Doc: "bytes, the bound on what the sessions of all uids other than the mount's owner and root hold in the journal together (0: none); past it their pre-images are recorded as unrecoverable and their journals stopped, the owner's go on, and GC removes their ended sessions first (docs/DESIGN.md#journal-share)", DocDefault: "`536870912` (512 MiB)",
		set: toInt64(func(c *Config) *int64 { return &c.Journal.BudgetOtherUIDs })},
	{Key: "journal.retention", typ: tDuration, Default: DefaultJournalRetention, valid: durRange(0, MaxJournalRetention), rule: RuleRefuse, why: refuseJournal,
		Flag: "journal-retention", Usage: "keep an ended session's journal this long (0: forever)",
		Doc: "how long an ended session's journal is kept (`\"0s\"`: forever); collected at mount and hourly", DocDefault: "`\"168h\"` (7 days)",
		set: to(func(c *Config) *time.Duration { return &c.Journal.Retention })},
	{Key: "journal.sync", typ: tString, Default: "write", valid: oneOf("write", "fsync"), rule: RuleRefuse, why: refuseJournal,
		Flag: "journal-sync", Usage: "when a change's record becomes durable: write (before the change, survives a daemon crash; fsync'ed within 1 s) or fsync (fsync'ed before the change)",
		Doc: "when a change's record and pre-image become durable: `write` (written before the change is acknowledged, so they survive any crash of the daemon; fsync'ed by a background flusher within 1 s, so an OS crash or power loss may lose the last second's, which a rewind reports as `unrecoverable: blob lost`; a removed or replaced file kept by linking its inode is written back by the kernel, as the file itself would have been) or `fsync` (fsync'ed before the change is acknowledged, at about 0.2 to 0.6 ms per change on ext4); may not be set in a workspace file: docs/DESIGN.md#journal-sync",
		set: func(c *Config, v any) (err error) {
			c.Journal.Sync, err = journal.ParseSyncMode(v.(string))
			return err
		}},
	{Key: "state.retention", typ: tDuration, Default: DefaultStateRetention, valid: durRange(0, MaxJournalRetention), rule: RuleRefuse, why: refuseJournal,
		Flag: "state-retention", Usage: "at mount, remove the state directories of vanished workspaces unused this long (0: never at mount)",
		Doc: "at mount, state directories under the user's state root whose recorded workspace no longer exists, that no mount holds and that were unused this long are removed in the background (`\"0s\"`: never at mount); directories made before rubinofs recorded workspaces are never removed at mount (`rubinofs state prune --legacy`): docs/DESIGN.md#state-retention", DocDefault: "`\"720h\"` (30 days)",
		set: to(func(c *Config) *time.Duration { return &c.State.Retention })},

	{Key: "agents.max_depth", typ: tInt, Default: tasks.DefaultCaps().MaxDepth, valid: intRange(1, MaxCap), rule: RuleTighten, loosens: higherInt,
		Doc: "a task deeper than this is refused (`depth`)",
		set: to(func(c *Config) *int { return &c.Agents.MaxDepth })},
	{Key: "agents.max_children_per_node", typ: tInt, Default: tasks.DefaultCaps().MaxChildrenPerNode, valid: intRange(1, MaxCap), rule: RuleTighten, loosens: higherInt,
		Doc: "live children per owner (`per_owner`)",
		set: to(func(c *Config) *int { return &c.Agents.MaxChildrenPerNode })},
	{Key: "agents.max_concurrent_total", typ: tInt, Default: tasks.DefaultCaps().MaxConcurrentTotal, valid: intRange(1, MaxCap), rule: RuleTighten, loosens: higherInt,
		Doc: "live tasks in all (`global`)",
		set: to(func(c *Config) *int { return &c.Agents.MaxConcurrentTotal })},
	// The built-in sh type runs any command a spawner writes (as that
	// spawner): a workspace file may switch it off, never on.
	{Key: "agents.shell", typ: tBool, Default: true, rule: RuleTighten,
		loosens: func(lo, v any) bool { return !lo.(bool) && v.(bool) },
		Flag:    "agents-shell", Usage: "offer the built-in subagent sh, which runs the prompt as a shell command as its spawner (--agents-shell=false: refuse it)",
		Doc: "offer the built-in subagent `sh` (the prompt is a shell command, run as its spawner: docs/DESIGN.md#task-credentials); `false`: spawning it is refused with EPERM and the reason",
		set: notBool(func(c *Config) *bool { return &c.Agents.NoShell })},
	{Key: "agents.ask_timeout", typ: tDuration, Default: tasks.DefaultAskTimeout, valid: durRange(time.Second, MaxAskTimeout), rule: RuleRefuse, why: refuseAgents,
		Doc: "bound of a blocking ask and a pending approval",
		set: func(c *Config, v any) error { c.Agents.AskTimeout = tasks.Duration(v.(time.Duration)); return nil }},
	{Key: "agents.stop_grace", typ: tDuration, Default: tasks.DefaultStopGrace, valid: durRange(minTimeout, MaxStopGrace), rule: RuleRefuse, why: refuseAgents,
		Doc: "SIGTERM to SIGKILL of a stopped task",
		set: func(c *Config, v any) error { c.Agents.StopGrace = tasks.Duration(v.(time.Duration)); return nil }},
	// Refused, not "only lower": fewer kept finished tasks would let the
	// confined agent have the record of its own tasks (and their logs)
	// deleted sooner.
	{Key: "agents.keep_finished", typ: tInt, Default: tasks.DefaultKeepFinished, valid: intRange(1, MaxKeepFinished), rule: RuleRefuse,
		why: "it decides how long the record of the agent's own tasks is kept",
		Doc: "finished (done, failed, stopped) tasks kept, in tasks, 1 to 10000: beyond it the ones that finished first are removed from `.rubino/agents` with their log file (a finished task with a live descendant stays until that one finishes); also the number of earlier mounts' task logs kept in the state directory",
		set: to(func(c *Config) *int { return &c.Agents.KeepFinished })},
	// One row for every agents.subagents.NAME table (subagentOption).
	{Key: "agents.subagents.NAME", typ: tSubagent, rule: RuleRefuse, why: refuseProgram,
		Doc: "`command` (argv with `{prompt}`, `{id}`, `{mount}`), `stdin`, `env`: as in `agents.json`",
		set: func(c *Config, v any) error {
			n := v.(named)
			if c.Agents.Subagents == nil {
				c.Agents.Subagents = map[string]tasks.SubagentType{}
			}
			c.Agents.Subagents[n.name] = n.v.(tasks.SubagentType)
			return nil
		}},

	{Key: "compact.context_window", typ: tInt, Default: compact.DefaultContextWindow, valid: intRange(1000, 100_000_000),
		Doc: "tokens: the context window of a transcript that names none",
		set: to(func(c *Config) *int { return &c.Compact.ContextWindow })},
	{Key: "compact.threshold", typ: tFloat, Default: compact.DefaultThreshold, valid: floatRange(0, 1, true),
		Doc: "the fraction of the window (0 < t <= 1) at which a transcript needs compaction",
		set: to(func(c *Config) *float64 { return &c.Compact.Threshold })},
	{Key: "compact.minimum_messages", typ: tInt, Default: compact.DefaultMinimumMessages, valid: intRange(1, 1_000_000),
		Doc: "a transcript with fewer messages is never compacted; at least `head_messages + 2`",
		set: to(func(c *Config) *int { return &c.Compact.MinimumMessages })},
	{Key: "compact.head_messages", typ: tInt, Default: compact.DefaultHeadMessages, valid: intRange(0, 1000),
		Doc: "first messages kept verbatim (system prompt, first request, first answer)",
		set: to(func(c *Config) *int { return &c.Compact.HeadMessages })},
	{Key: "compact.tail_ratio", typ: tFloat, Default: compact.DefaultTailRatio, valid: floatRange(0, 0.999999, true),
		Doc: "the verbatim tail's token budget, as a fraction (0 < r < 1) of the threshold in tokens",
		set: to(func(c *Config) *float64 { return &c.Compact.TailRatio })},
	{Key: "compact.preserve_tool_pairs", typ: tBool, Default: true,
		Doc: "run the tool-pair sanitiser on the summarised middle (docs/DESIGN.md#compact-split)",
		set: func(c *Config, v any) error { b := v.(bool); c.Compact.PreserveToolPairs = &b; return nil }},
	{Key: "compact.max_summary_tokens", typ: tInt, Default: compact.DefaultMaxSummaryTokens, valid: intRange(100, 10_000_000),
		Doc: "the summary's budget, in tokens",
		set: to(func(c *Config) *int { return &c.Compact.MaxSummaryTokens })},
	{Key: "compact.prune_min_tokens", typ: tInt, Default: compact.DefaultPruneMinTokens, valid: intRange(1, 10_000_000),
		Doc: "older tool outputs above this many tokens are stubbed by the pre-pass (docs/DESIGN.md#compact-prune-pass)",
		set: to(func(c *Config) *int { return &c.Compact.PruneMinTokens })},
	{Key: "compact.prune_keep_recent", typ: tInt, Default: compact.DefaultPruneKeepRecent, valid: intRange(1, 1_000_000),
		Doc: "the pre-pass never stubs this many newest tool outputs of the middle",
		set: to(func(c *Config) *int { return &c.Compact.PruneKeepRecent })},
	{Key: "compact.model", typ: tString, Default: "",
		Doc: "the model of a transcript that names none (`\"\"`: unknown, counted with `cl100k_base`)",
		set: to(func(c *Config) *string { return &c.Compact.Model })},
	{Key: "compact.tokenizer", typ: tString, Default: "", valid: validTokenizer,
		Doc: "the tokenizer of a transcript that names none (`\"\"`: by model)",
		set: to(func(c *Config) *string { return &c.Compact.Tokenizer })},
	// Transcript bounds (docs/DESIGN.md#compact-bounds): they bound the
	// daemon's state, which every uid shares, so a workspace file may not
	// set them.
	{Key: "compact.max_transcript_bytes", typ: tInt, Default: compact.DefaultMaxTranscriptBytes,
		valid: intRange(compact.MinTranscriptBytes, compact.MaxTranscriptBytesLimit), rule: RuleRefuse, why: refuseCompactBounds,
		Flag: "compact-max-transcript-bytes", Usage: "bound one compaction transcript to `BYTES`; an append past it fails with EFBIG",
		Doc: "a transcript's stored size, 1 MiB to 1 TiB; an append past it fails with EFBIG and stores nothing (docs/DESIGN.md#compact-bounds)", DocDefault: "`67108864` (64 MiB)",
		set: toInt64(func(c *Config) *int64 { return &c.Compact.MaxTranscriptBytes })},
	{Key: "compact.max_transcripts_per_uid", typ: tInt, Default: compact.DefaultMaxTranscriptsPerUID,
		valid: intRange(1, compact.MaxTranscriptsPerUIDLimit), rule: RuleRefuse, why: refuseCompactBounds,
		Flag: "compact-max-transcripts", Usage: "at most `N` compaction transcripts per uid; creating one past it fails with EAGAIN",
		Doc: "transcripts one uid owns, compacted children included, 1 to 1000000; past it EAGAIN",
		set: to(func(c *Config) *int { return &c.Compact.MaxTranscriptsPerUID })},
	{Key: "compact.max_bytes_per_uid", typ: tInt, Default: compact.DefaultMaxBytesPerUID,
		valid: intRange(compact.MinTranscriptBytes, compact.MaxTranscriptBytesLimit), rule: RuleRefuse, why: refuseCompactBounds,
		Flag: "compact-max-bytes-per-uid", Usage: "bound the compaction transcripts one uid owns to `BYTES` together; an append or a compaction past it fails with EFBIG",
		Doc: "the stored size of the transcripts one uid owns together, compacted children included, 1 MiB to 1 TiB; an append or a compaction past it fails with EFBIG and stores nothing (docs/DESIGN.md#compact-bounds)", DocDefault: "`1073741824` (1 GiB)",
		set: toInt64(func(c *Config) *int64 { return &c.Compact.MaxBytesPerUID })},
	{Key: "compact.summarizer.backend", typ: tString, Default: "builtin", valid: oneOf("builtin", "command", "openai"), rule: RuleRefuse, why: refuseProgram,
		Doc: "who writes the summary: `builtin` (extractive, no model), `command` (a program: the prompt on stdin, the summary on stdout) or `openai` (an OpenAI-compatible chat completions API)",
		set: to(func(c *Config) *string { return &c.Compact.Summarizer.Backend })},
	{Key: "compact.summarizer.command", typ: tStrings, Default: []string{}, rule: RuleRefuse, why: refuseProgram,
		Doc: "the argv of the `command` backend (no shell)",
		set: to(func(c *Config) *[]string { return &c.Compact.Summarizer.Command })},
	{Key: "compact.summarizer.timeout_seconds", typ: tInt, Default: 0, valid: notNegative, rule: RuleRefuse, why: refuseProgram,
		Doc: "bound of one summary call of the `command` and `openai` backends, in seconds (0: 120)",
		set: to(func(c *Config) *int { return &c.Compact.Summarizer.TimeoutSeconds })},
	{Key: "compact.summarizer.base_url", typ: tString, Default: "", rule: RuleRefuse, why: refuseProgram,
		Doc: "the `openai` backend's API, up to and including the version (`\"http://localhost:11434/v1\"`)",
		set: to(func(c *Config) *string { return &c.Compact.Summarizer.BaseURL })},
	{Key: "compact.summarizer.model", typ: tString, Default: "", rule: RuleRefuse, why: refuseProgram,
		Doc: "the model the `openai` backend asks for",
		set: to(func(c *Config) *string { return &c.Compact.Summarizer.Model })},
	{Key: "compact.summarizer.api_key_env", typ: tString, Default: "", rule: RuleRefuse, why: refuseProgram,
		Doc: "the environment variable holding the `openai` backend's API key (`\"\"`: `OPENAI_API_KEY`); the key itself is never in a file",
		set: to(func(c *Config) *string { return &c.Compact.Summarizer.APIKeyEnv })},
}
