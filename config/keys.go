package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/journal"
	"github.com/rubinofs/rubinofs/tasks"
)

// typ is the Go type of a key's value.
type typ int

const (
	tString typ = iota
	tStrings
	tBool
	tInt
	tFloat
	tDuration
	tSubagent // agents.subagents.NAME: tasks.SubagentType
)

// word names a type in error messages.
func (t typ) word() string {
	return [...]string{"a string", "an array of strings", "a boolean", "an integer", "a number", `a duration string with its unit, like "5s", "500ms" or "1h"`, "a table"}[t]
}

// bareNumber is a duration written without its unit ("5", "1.5").
var bareNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// DurationHint says how to write val as a duration, for the error about a
// value time.ParseDuration refuses: a bare number is shown with the unit s
// added ("5" → write it with a unit, like "5s" or "500ms"); anything else
// gets the general examples. Used for config files and the CLI's duration
// flags alike.
func DurationHint(val string) string {
	if bareNumber.MatchString(val) {
		return fmt.Sprintf(`write it with a unit, like "%ss" or "500ms"`, val)
	}
	return `write it like "5s", "500ms" or "1h" (units ns, us, ms, s, m, h)`
}

// Rule is what a workspace file may do with a key.
type Rule int

const (
	// RuleNeutral: the workspace file may set the key (within its bounds).
	RuleNeutral Rule = iota
	// RuleTighten: the workspace file may set the key only to a value at
	// least as strict as the one the weaker sources give.
	RuleTighten
	// RuleRefuse: the workspace file may not set the key at all (it would
	// loosen the guard, run a program or send data elsewhere).
	RuleRefuse
)

// spec describes one key.
type spec struct {
	key string
	typ typ
	def any
	// valid checks a value of the right type (nil: any).
	valid func(v any) error
	rule  Rule
	// loosens reports, for RuleTighten, whether v is less strict than the
	// weaker sources' lower.
	loosens func(lower, v any) bool
	// wsValid adds bounds for a workspace file's value (nil: none beyond
	// valid).
	wsValid func(v any) error
	// why explains a refusal of the key in a workspace file.
	why string
}

// check verifies v's type and value.
func (s spec) check(v any) error {
	ok := false
	switch s.typ {
	case tString:
		_, ok = v.(string)
	case tStrings:
		_, ok = v.([]string)
	case tBool:
		_, ok = v.(bool)
	case tInt:
		_, ok = v.(int)
	case tFloat:
		_, ok = v.(float64)
	case tDuration:
		_, ok = v.(time.Duration)
	case tSubagent:
		_, ok = v.(tasks.SubagentType)
	}
	if !ok {
		return fmt.Errorf("%s: want %s, got %T", s.key, s.typ.word(), v)
	}
	if s.valid != nil {
		if err := s.valid(v); err != nil {
			return fmt.Errorf("%s: %w", s.key, err)
		}
	}
	return nil
}

// Bounds of the tuning keys. The workspace file has tighter bounds on the
// cache timeouts: it may not make the kernel trust its caches for long.
const (
	MaxCacheTimeout            = 24 * time.Hour
	MaxShortTimeout            = time.Hour
	MaxWorkspaceCacheTimeout   = time.Hour
	MaxWorkspaceShortTimeout   = 10 * time.Second
	MaxWatchesLimit            = 1 << 24
	MaxAskTimeout              = 7 * 24 * time.Hour
	MaxStopGrace               = time.Minute
	MaxKeepFinished            = tasks.MaxKeepFinished
	MaxCap                     = 1000
	minTimeout                 = time.Millisecond
	refuseProgram              = "it names a program the daemon runs, or where transcripts are sent"
	refuseLoosen               = "it would loosen the guard"
	refuseAgents               = "only the user file and flags set how tasks run"
	refuseJournal              = "the journal is the user's record of the agent's changes"
	refuseCompactBounds        = "it bounds the daemon's transcript store, which every uid shares"
	defaultCacheTimeoutWatch   = time.Hour
	defaultCacheTimeoutNoWatch = time.Second
)

// Session defaults and bounds (docs/DESIGN.md#ctl-blocking-io).
const (
	// DefaultMaxLiveSessions is sessions.max_live's default, in live
	// sessions: a registration past it fails with EAGAIN and a reason.
	DefaultMaxLiveSessions = 1024
	// MaxLiveSessions bounds sessions.max_live, in live sessions (each
	// holds a pidfd and a goroutine in the daemon).
	MaxLiveSessions = 1 << 16
)

// Journal defaults and bounds (docs/DESIGN.md#journal-hook).
const (
	// DefaultJournalMaxFileSize is journal.max_file_size's default, in
	// bytes (64 MiB): larger files are recorded as unrecoverable.
	DefaultJournalMaxFileSize = 64 << 20
	// DefaultJournalBudget is journal.budget's default, in bytes (1 GiB).
	DefaultJournalBudget = 1 << 30
	// DefaultJournalRetention is journal.retention's default (7 days).
	DefaultJournalRetention = 7 * 24 * time.Hour
	// MaxJournalBytes bounds journal.max_file_size and journal.budget, in
	// bytes (1 PiB).
	MaxJournalBytes = 1 << 50
	// MaxJournalRetention bounds journal.retention and state.retention
	// (10 years).
	MaxJournalRetention = 10 * 365 * 24 * time.Hour
	// DefaultStateRetention is state.retention's default (30 days).
	DefaultStateRetention = 30 * 24 * time.Hour
)

var modeRank = map[string]int{"off": 0, "warn": 1, "enforce": 2}

func oneOf(vals ...string) func(any) error {
	return func(v any) error {
		for _, a := range vals {
			if v.(string) == a {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(vals, ", "))
	}
}

func durRange(lo, hi time.Duration) func(any) error {
	return func(v any) error {
		if d := v.(time.Duration); d < lo || d > hi {
			return fmt.Errorf("%v out of range (%v to %v)", d, lo, hi)
		}
		return nil
	}
}

func intRange(lo, hi int) func(any) error {
	return func(v any) error {
		if n := v.(int); n < lo || n > hi {
			return fmt.Errorf("%d out of range (%d to %d)", n, lo, hi)
		}
		return nil
	}
}

func floatRange(lo, hi float64, loOpen bool) func(any) error {
	return func(v any) error {
		f := v.(float64)
		if f > hi || f < lo || (loOpen && f == lo) {
			return fmt.Errorf("%v out of range (%v to %v)", f, lo, hi)
		}
		return nil
	}
}

func globs(v any) error {
	for _, g := range v.([]string) {
		if g == "" || !doublestar.ValidatePattern(g) {
			return fmt.Errorf("malformed glob %q", g)
		}
	}
	return nil
}

// programNames checks a list of program names (guard.scanners): each a
// non-empty base name, without '/', NUL or white space.
func programNames(v any) error {
	for _, n := range v.([]string) {
		if n == "" || strings.ContainsAny(n, "/\x00 \t\n") {
			return fmt.Errorf("malformed program name %q: want a base name like \"grep\"", n)
		}
	}
	return nil
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	have := map[string]bool{}
	for _, x := range b {
		have[x] = true
	}
	for _, x := range a {
		if !have[x] {
			return false
		}
	}
	return true
}

// cgroupGlobs checks sessions.cgroup_auto: absolute doublestar globs of
// cgroup paths (guard.ValidCgroupGlob).
func cgroupGlobs(v any) error {
	for _, g := range v.([]string) {
		if err := guard.ValidCgroupGlob(g); err != nil {
			return err
		}
	}
	return nil
}

// toolMarkers checks guard.tool_trees (ignore.ParseToolMarker).
func toolMarkers(v any) error {
	for _, s := range v.([]string) {
		if err := ignore.ParseToolMarker(s); err != nil {
			return err
		}
	}
	return nil
}

func notNegative(v any) error {
	if v.(int) < 0 {
		return fmt.Errorf("%d is negative", v)
	}
	return nil
}

// specs are the keys in `config show` order. agents.subagents.NAME keys
// follow the [agents] keys; see subagentSpec.
var specs = []spec{
	{key: "guard.mode", typ: tString, def: "enforce", valid: oneOf("enforce", "warn", "off"), rule: RuleTighten,
		loosens: func(lo, v any) bool { return modeRank[v.(string)] < modeRank[lo.(string)] }},
	{key: "guard.exempt", typ: tStrings, def: []string{}, valid: globs, rule: RuleTighten,
		loosens: func(lo, v any) bool { return !subset(v.([]string), lo.([]string)) }}, // a new exemption
	// Another marker exempts more: a workspace file may only remove some.
	{key: "guard.tool_trees", typ: tStrings, def: append([]string(nil), ignore.DefaultToolMarkers...), valid: toolMarkers, rule: RuleTighten,
		loosens: func(lo, v any) bool { return !subset(v.([]string), lo.([]string)) }}, // a new marker
	{key: "guard.guard_ignored", typ: tBool, def: false, rule: RuleTighten,
		loosens: func(lo, v any) bool { return lo.(bool) && !v.(bool) }},
	{key: "guard.unregistered", typ: tString, def: "guard", valid: oneOf("guard", "allow"), rule: RuleTighten,
		loosens: func(lo, v any) bool { return v == "allow" && lo != "allow" }},
	{key: "guard.unlink", typ: tString, def: "guard", valid: oneOf("guard", "allow"), rule: RuleTighten,
		loosens: func(lo, v any) bool { return v == "allow" && lo != "allow" }},
	{key: "guard.errno", typ: tString, def: "EACCES", valid: oneOf("EACCES", "EPERM")},
	// A scanner's reads count for its own process only, so a scanner
	// removed from the list would make its reads count for the session:
	// a workspace file may only add names.
	{key: "guard.scanners", typ: tStrings, def: append([]string(nil), guard.DefaultScanners...), valid: programNames, rule: RuleTighten,
		loosens: func(lo, v any) bool { return !subset(lo.([]string), v.([]string)) }}, // a scanner removed

	// Which processes share a session decides whose reads count for whom.
	{key: "sessions.cgroup_auto", typ: tStrings, def: []string{}, valid: cgroupGlobs, rule: RuleRefuse,
		why: "it decides which processes share a session, and so whose reads count for whom"},
	// Refused, not "only lower": a small cap lets the confined agent keep
	// the user from registering sessions at all.
	{key: "sessions.max_live", typ: tInt, def: DefaultMaxLiveSessions, valid: intRange(1, MaxLiveSessions), rule: RuleRefuse,
		why: "it bounds the sessions every user of the mount may register"},

	{key: "cache.cache_timeout", typ: tDuration, def: time.Duration(0), valid: durRange(0, MaxCacheTimeout),
		wsValid: durRange(0, MaxWorkspaceCacheTimeout)},
	{key: "cache.short_timeout", typ: tDuration, def: time.Second, valid: durRange(minTimeout, MaxShortTimeout),
		wsValid: durRange(minTimeout, MaxWorkspaceShortTimeout)},
	{key: "cache.watch", typ: tBool, def: true},
	{key: "cache.watch_skip", typ: tStrings, def: []string{".git/objects", "**/.git/objects"}, valid: globs},
	{key: "cache.max_watches", typ: tInt, def: 0, valid: intRange(0, MaxWatchesLimit)},
	{key: "cache.persist_reads", typ: tBool, def: true},
	{key: "cache.watch_mode", typ: tString, def: "auto", valid: oneOf("auto", "inotify", "poll")},
	{key: "cache.shared", typ: tBool, def: false},
	// Without detection two mounts of one directory lose updates: a
	// workspace file may turn it on, never off.
	{key: "cache.peer_detect", typ: tBool, def: true, rule: RuleTighten,
		loosens: func(lo, v any) bool { return lo.(bool) && !v.(bool) }},
	{key: "cache.poll_interval", typ: tDuration, def: time.Second, valid: durRange(100*time.Millisecond, time.Hour)},

	// The journal is the user's record of what the confined agent
	// changed: a workspace file (writable by that agent) may not turn it
	// off, shrink it or shorten its retention.
	{key: "journal.enabled", typ: tBool, def: true, rule: RuleRefuse, why: refuseJournal},
	{key: "journal.ignored", typ: tBool, def: false, rule: RuleRefuse, why: refuseJournal},
	{key: "journal.max_file_size", typ: tInt, def: DefaultJournalMaxFileSize, valid: intRange(1, MaxJournalBytes), rule: RuleRefuse, why: refuseJournal},
	{key: "journal.budget", typ: tInt, def: DefaultJournalBudget, valid: intRange(0, MaxJournalBytes), rule: RuleRefuse, why: refuseJournal},
	{key: "journal.retention", typ: tDuration, def: DefaultJournalRetention, valid: durRange(0, MaxJournalRetention), rule: RuleRefuse, why: refuseJournal},
	{key: "journal.sync", typ: tString, def: "write", valid: oneOf("write", "fsync"), rule: RuleRefuse, why: refuseJournal},
	{key: "state.retention", typ: tDuration, def: DefaultStateRetention, valid: durRange(0, MaxJournalRetention), rule: RuleRefuse, why: refuseJournal},

	{key: "agents.max_depth", typ: tInt, def: tasks.DefaultCaps().MaxDepth, valid: intRange(1, MaxCap), rule: RuleTighten,
		loosens: func(lo, v any) bool { return v.(int) > lo.(int) }},
	{key: "agents.max_children_per_node", typ: tInt, def: tasks.DefaultCaps().MaxChildrenPerNode, valid: intRange(1, MaxCap), rule: RuleTighten,
		loosens: func(lo, v any) bool { return v.(int) > lo.(int) }},
	{key: "agents.max_concurrent_total", typ: tInt, def: tasks.DefaultCaps().MaxConcurrentTotal, valid: intRange(1, MaxCap), rule: RuleTighten,
		loosens: func(lo, v any) bool { return v.(int) > lo.(int) }},
	// The built-in sh type runs any command a spawner writes (as that
	// spawner): a workspace file may switch it off, never on.
	{key: "agents.shell", typ: tBool, def: true, rule: RuleTighten,
		loosens: func(lo, v any) bool { return !lo.(bool) && v.(bool) }},
	{key: "agents.ask_timeout", typ: tDuration, def: tasks.DefaultAskTimeout, valid: durRange(time.Second, MaxAskTimeout), rule: RuleRefuse, why: refuseAgents},
	{key: "agents.stop_grace", typ: tDuration, def: tasks.DefaultStopGrace, valid: durRange(minTimeout, MaxStopGrace), rule: RuleRefuse, why: refuseAgents},
	// Refused, not "only lower": fewer kept finished tasks would let the
	// confined agent have the record of its own tasks (and their logs)
	// deleted sooner.
	{key: "agents.keep_finished", typ: tInt, def: tasks.DefaultKeepFinished, valid: intRange(1, MaxKeepFinished), rule: RuleRefuse,
		why: "it decides how long the record of the agent's own tasks is kept"},

	{key: "compact.context_window", typ: tInt, def: compact.DefaultContextWindow, valid: intRange(1000, 100_000_000)},
	{key: "compact.threshold", typ: tFloat, def: compact.DefaultThreshold, valid: floatRange(0, 1, true)},
	{key: "compact.minimum_messages", typ: tInt, def: compact.DefaultMinimumMessages, valid: intRange(1, 1_000_000)},
	{key: "compact.head_messages", typ: tInt, def: compact.DefaultHeadMessages, valid: intRange(0, 1000)},
	{key: "compact.tail_ratio", typ: tFloat, def: compact.DefaultTailRatio, valid: floatRange(0, 0.999999, true)},
	{key: "compact.preserve_tool_pairs", typ: tBool, def: true},
	{key: "compact.max_summary_tokens", typ: tInt, def: compact.DefaultMaxSummaryTokens, valid: intRange(100, 10_000_000)},
	{key: "compact.prune_min_tokens", typ: tInt, def: compact.DefaultPruneMinTokens, valid: intRange(1, 10_000_000)},
	{key: "compact.prune_keep_recent", typ: tInt, def: compact.DefaultPruneKeepRecent, valid: intRange(1, 1_000_000)},
	{key: "compact.model", typ: tString, def: ""},
	{key: "compact.tokenizer", typ: tString, def: "", valid: func(v any) error {
		if !compact.ValidTokenizer(v.(string)) {
			return fmt.Errorf("unknown tokenizer %q", v)
		}
		return nil
	}},
	// Transcript bounds (docs/DESIGN.md#compact-bounds): they bound the
	// daemon's state, which every uid shares, so a workspace file may not
	// set them.
	{key: "compact.max_transcript_bytes", typ: tInt, def: compact.DefaultMaxTranscriptBytes,
		valid: intRange(compact.MinTranscriptBytes, compact.MaxTranscriptBytesLimit), rule: RuleRefuse, why: refuseCompactBounds},
	{key: "compact.max_transcripts_per_uid", typ: tInt, def: compact.DefaultMaxTranscriptsPerUID,
		valid: intRange(1, compact.MaxTranscriptsPerUIDLimit), rule: RuleRefuse, why: refuseCompactBounds},
	{key: "compact.summarizer.backend", typ: tString, def: "builtin", valid: oneOf("builtin", "command", "openai"), rule: RuleRefuse, why: refuseProgram},
	{key: "compact.summarizer.command", typ: tStrings, def: []string{}, rule: RuleRefuse, why: refuseProgram},
	{key: "compact.summarizer.timeout_seconds", typ: tInt, def: 0, valid: notNegative, rule: RuleRefuse, why: refuseProgram},
	{key: "compact.summarizer.base_url", typ: tString, def: "", rule: RuleRefuse, why: refuseProgram},
	{key: "compact.summarizer.model", typ: tString, def: "", rule: RuleRefuse, why: refuseProgram},
	{key: "compact.summarizer.api_key_env", typ: tString, def: "", rule: RuleRefuse, why: refuseProgram},
}

const subagentPrefix = "agents.subagents."

func isSubagentKey(k string) bool { return strings.HasPrefix(k, subagentPrefix) }

// subagentSpec is the spec of agents.subagents.NAME: tasks' own validation
// (name and template), refused in a workspace file (it is a command the
// daemon runs as its user).
func subagentSpec(key string) spec {
	name := strings.TrimPrefix(key, subagentPrefix)
	return spec{key: key, typ: tSubagent, rule: RuleRefuse, why: refuseProgram, valid: func(v any) error {
		return tasks.Config{Subagents: map[string]tasks.SubagentType{name: v.(tasks.SubagentType)}}.Validate()
	}}
}

var specIndex = func() map[string]int {
	m := map[string]int{}
	for i, s := range specs {
		m[s.key] = i
	}
	return m
}()

// lookupSpec returns key's spec.
func lookupSpec(key string) (spec, bool) {
	if isSubagentKey(key) && len(key) > len(subagentPrefix) {
		return subagentSpec(key), true
	}
	i, ok := specIndex[key]
	if !ok {
		return spec{}, false
	}
	return specs[i], true
}

// KeyKind returns the Go type of key's value as the CLI passes it in a
// Flag: "string", "[]string", "bool", "int", "float64" or "time.Duration"
// ("" for an unknown key).
func KeyKind(key string) string {
	s, ok := lookupSpec(key)
	if !ok {
		return ""
	}
	return [...]string{"string", "[]string", "bool", "int", "float64", "time.Duration", "tasks.SubagentType"}[s.typ]
}

// Default returns the default value of key (nil for an unknown key), for
// flags' help text.
func Default(key string) any {
	s, ok := lookupSpec(key)
	if !ok {
		return nil
	}
	return s.def
}

// defaults is the layer of every default.
func defaults() layer {
	l := layer{}
	for _, s := range specs {
		l[s.key] = value{v: s.def, src: Source{Kind: KindDefault}}
	}
	return l
}

// checkWorkspace refuses a workspace layer ws that would loosen the guard
// below merged (the defaults, state and user files), set a refused key, or
// exceed the workspace bounds. All offending keys are reported, each with
// its line.
func checkWorkspace(merged, ws layer) error {
	var errs []string
	keys := sortedKeys(ws)
	sort.SliceStable(keys, func(i, j int) bool { return ws[keys[i]].src.Line < ws[keys[j]].src.Line })
	for _, k := range keys {
		v := ws[k]
		s, _ := lookupSpec(k)
		where := v.src.String()
		switch s.rule {
		case RuleRefuse:
			errs = append(errs, fmt.Sprintf("%s: %s may not be set in a workspace file: %s", where, k, s.why))
			continue
		case RuleTighten:
			lo := merged[k]
			if s.loosens(lo.v, v.v) {
				errs = append(errs, fmt.Sprintf("%s: %s = %s would loosen the guard (%s from %s); a workspace file may only tighten it",
					where, k, formatValue(v.v), formatValue(lo.v), lo.src))
				continue
			}
		}
		if s.wsValid != nil {
			if err := s.wsValid(v.v); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %s: %v in a workspace file", where, k, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("refusing the workspace file (it is writable by the confined agent):\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// build turns a merged layer into a Config.
func build(m layer) (*Config, error) {
	c := &Config{index: map[string]int{}}
	add := func(k string) {
		v := m[k]
		c.index[k] = len(c.entries)
		c.entries = append(c.entries, Entry{Key: k, Value: v.v, Source: v.src})
	}
	for _, s := range specs {
		add(s.key)
		if s.key == "agents.keep_finished" {
			for _, k := range m.sortedSubagents() {
				add(k)
			}
		}
	}
	str := func(k string) string { return m[k].v.(string) }
	strs := func(k string) []string { return append([]string(nil), m[k].v.([]string)...) }
	bl := func(k string) bool { return m[k].v.(bool) }
	num := func(k string) int { return m[k].v.(int) }
	flt := func(k string) float64 { return m[k].v.(float64) }
	dur := func(k string) time.Duration { return m[k].v.(time.Duration) }

	var err error
	g := &c.Guard
	if g.Mode, err = guard.ParseMode(str("guard.mode")); err != nil {
		return nil, err
	}
	g.Exempt = strs("guard.exempt")
	g.GuardIgnored = bl("guard.guard_ignored")
	g.ToolTrees = strs("guard.tool_trees")
	g.AllowUnregistered = str("guard.unregistered") == "allow"
	if g.Unlink, err = guard.ParseUnlinkPolicy(str("guard.unlink")); err != nil {
		return nil, err
	}
	if g.Errno, err = guard.ParseErrno(str("guard.errno")); err != nil {
		return nil, err
	}
	g.Scanners = strs("guard.scanners")
	c.Sessions.CgroupAuto = strs("sessions.cgroup_auto")
	c.Sessions.MaxLive = num("sessions.max_live")

	ca := &c.Cache
	ca.Watch = bl("cache.watch")
	ca.CacheTimeout = dur("cache.cache_timeout")
	if ca.CacheTimeout == 0 {
		ca.CacheTimeout = defaultCacheTimeoutNoWatch
		if ca.Watch {
			ca.CacheTimeout = defaultCacheTimeoutWatch
		}
		i := c.index["cache.cache_timeout"]
		c.entries[i].Value = ca.CacheTimeout
	}
	ca.ShortTimeout = dur("cache.short_timeout")
	ca.WatchSkip = strs("cache.watch_skip")
	ca.MaxWatches = num("cache.max_watches")
	ca.PersistReads = bl("cache.persist_reads")
	ca.WatchMode = str("cache.watch_mode")
	ca.Shared = bl("cache.shared")
	ca.NoPeerDetect = !bl("cache.peer_detect")
	ca.PollInterval = dur("cache.poll_interval")

	c.Journal = Journal{
		Enabled:     bl("journal.enabled"),
		Ignored:     bl("journal.ignored"),
		MaxFileSize: int64(num("journal.max_file_size")),
		Budget:      int64(num("journal.budget")),
		Retention:   dur("journal.retention"),
	}
	if c.Journal.Sync, err = journal.ParseSyncMode(str("journal.sync")); err != nil {
		return nil, err
	}
	c.State.Retention = dur("state.retention")

	a := &c.Agents
	a.MaxDepth = num("agents.max_depth")
	a.MaxChildrenPerNode = num("agents.max_children_per_node")
	a.MaxConcurrentTotal = num("agents.max_concurrent_total")
	a.AskTimeout = tasks.Duration(dur("agents.ask_timeout"))
	a.StopGrace = tasks.Duration(dur("agents.stop_grace"))
	a.KeepFinished = num("agents.keep_finished")
	a.NoShell = !bl("agents.shell")
	for _, k := range m.sortedSubagents() {
		if a.Subagents == nil {
			a.Subagents = map[string]tasks.SubagentType{}
		}
		a.Subagents[strings.TrimPrefix(k, subagentPrefix)] = m[k].v.(tasks.SubagentType)
	}
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}

	ptp := bl("compact.preserve_tool_pairs")
	cc := compact.Config{
		ContextWindow:        num("compact.context_window"),
		Threshold:            flt("compact.threshold"),
		MinimumMessages:      num("compact.minimum_messages"),
		HeadMessages:         num("compact.head_messages"),
		TailRatio:            flt("compact.tail_ratio"),
		PreserveToolPairs:    &ptp,
		MaxSummaryTokens:     num("compact.max_summary_tokens"),
		PruneMinTokens:       num("compact.prune_min_tokens"),
		PruneKeepRecent:      num("compact.prune_keep_recent"),
		Model:                str("compact.model"),
		Tokenizer:            str("compact.tokenizer"),
		MaxTranscriptBytes:   int64(num("compact.max_transcript_bytes")),
		MaxTranscriptsPerUID: num("compact.max_transcripts_per_uid"),
		Summarizer: compact.SummarizerConfig{
			Backend:        str("compact.summarizer.backend"),
			Command:        strs("compact.summarizer.command"),
			TimeoutSeconds: num("compact.summarizer.timeout_seconds"),
			BaseURL:        str("compact.summarizer.base_url"),
			Model:          str("compact.summarizer.model"),
			APIKeyEnv:      str("compact.summarizer.api_key_env"),
		},
	}
	if len(cc.Summarizer.Command) == 0 {
		cc.Summarizer.Command = nil
	}
	c.Compact = cc.WithDefaults()
	if err := c.Compact.Validate(); err != nil {
		return nil, fmt.Errorf("compact: %w (sources: %s)", err, compactSources(m))
	}
	return c, nil
}

// compactSources lists the non-default sources of [compact] keys, for an
// error of the combined compaction config.
func compactSources(m layer) string {
	seen := map[string]bool{}
	var out []string
	for _, k := range sortedKeys(m) {
		if !strings.HasPrefix(k, "compact.") || m[k].src.Kind == KindDefault {
			continue
		}
		s := k + " from " + m[k].src.String()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "defaults"
	}
	return strings.Join(out, "; ")
}
