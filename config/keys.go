package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/sessions"
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

// Option is one configuration key, declared once: its name, type, default,
// bounds, what a workspace file may do with it, the mount flag that sets
// it, the help of that flag and of docs/config.md, and the field of Config
// it fills. The table (options, in options.go) generates the TOML schema
// (file.go), Config (build), `config show`'s order, the mount flags of the
// CLI (Keys) and the key table of docs/config.md (DocTable); rclone's
// OptionsInfo is the model (docs/DESIGN.md#options-table).
type Option struct {
	// Key is the dotted key: "guard.mode". A per-name key ends in ".NAME"
	// (agents.subagents.NAME): every TOML table under it is one value.
	Key string
	// Default is the value of no source, of the key's Go type (Kind).
	Default any
	// Flag is the mount flag's name without dashes ("mode"; "" when the
	// key has none), and Usage its help line (urfave/cli's: a `WORD` in
	// back quotes names the value).
	Flag, Usage string
	// Doc is the key's meaning in docs/config.md; DocDefault replaces the
	// rendered Default there when that alone would mislead.
	Doc, DocDefault string

	typ typ
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
	// set puts a checked value into c's field; errors only from parsing a
	// string the key's valid already accepted.
	set func(c *Config, v any) error
}

// Kind returns the Go type of the key's value, as a Flag's Value and
// Entry's Value carry it: "string", "[]string", "bool", "int", "float64",
// "time.Duration" or "tasks.SubagentType".
func (o Option) Kind() string {
	return [...]string{"string", "[]string", "bool", "int", "float64", "time.Duration", "tasks.SubagentType"}[o.typ]
}

// named is what set gets for a per-name key: the NAME and the value.
type named struct {
	name string
	v    any
}

// perName reports whether o stands for a family of keys (".NAME").
func (o Option) perName() bool { return strings.HasSuffix(o.Key, ".NAME") }

// Keys returns the options table, in `config show` order: every key once
// (agents.subagents.NAME standing for each NAME). The CLI makes the mount
// flags from the rows with a Flag.
func Keys() []Option { return append([]Option(nil), options...) }

// check verifies v's type and value.
func (s Option) check(v any) error {
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
		return fmt.Errorf("%s: want %s, got %T", s.Key, s.typ.word(), v)
	}
	if s.valid != nil {
		if err := s.valid(v); err != nil {
			return fmt.Errorf("%s: %w", s.Key, err)
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
	DefaultPagedReadMax        = 1 << 20
	MaxPagedReadMax            = 1 << 30
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
	// DefaultJournalBudgetPerUID is journal.budget_per_uid's default, in
	// bytes (256 MiB, a quarter of the default budget).
	DefaultJournalBudgetPerUID = 256 << 20
	// DefaultJournalBudgetOtherUIDs is journal.budget_other_uids'
	// default, in bytes (512 MiB, half the default budget).
	DefaultJournalBudgetOtherUIDs = 512 << 20
	// DefaultJournalRetention is journal.retention's default (7 days).
	DefaultJournalRetention = 7 * 24 * time.Hour
	// MaxJournalBytes bounds journal.max_file_size, journal.budget,
	// journal.budget_per_uid and journal.budget_other_uids, in bytes
	// (1 PiB).
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
// cgroup paths (sessions.ValidCgroupGlob).
func cgroupGlobs(v any) error {
	for _, g := range v.([]string) {
		if err := sessions.ValidCgroupGlob(g); err != nil {
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

const subagentPrefix = "agents.subagents."

func isSubagentKey(k string) bool { return strings.HasPrefix(k, subagentPrefix) }

// subagentOption is the Option of agents.subagents.NAME for one NAME: the
// table's agents.subagents.NAME row, checked with tasks' own validation
// (name and template).
func subagentOption(key string) Option {
	o := options[optionIndex[subagentPrefix+"NAME"]]
	name := strings.TrimPrefix(key, subagentPrefix)
	o.Key = key
	o.valid = func(v any) error {
		return tasks.Config{Subagents: map[string]tasks.SubagentType{name: v.(tasks.SubagentType)}}.Validate()
	}
	return o
}

var optionIndex = func() map[string]int {
	m := map[string]int{}
	for i, o := range options {
		if _, dup := m[o.Key]; dup {
			panic("config: key " + o.Key + " declared twice")
		}
		m[o.Key] = i
	}
	return m
}()

// lookup returns key's Option.
func lookup(key string) (Option, bool) {
	if isSubagentKey(key) && len(key) > len(subagentPrefix) {
		return subagentOption(key), true
	}
	i, ok := optionIndex[key]
	if !ok || options[i].perName() {
		return Option{}, false
	}
	return options[i], true
}

// Default returns the default value of key (nil for an unknown key).
func Default(key string) any {
	o, ok := lookup(key)
	if !ok {
		return nil
	}
	return o.Default
}

// defaults is the layer of every default.
func defaults() layer {
	l := layer{}
	for _, o := range options {
		if !o.perName() {
			l[o.Key] = value{v: o.Default, src: Source{Kind: KindDefault}}
		}
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
		s, _ := lookup(k)
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

// build turns a merged layer into a Config: each Option's set fills its
// field, in table order; then the values that depend on others (the cache
// timeout's default follows cache.watch) and the sections' own checks.
func build(m layer) (*Config, error) {
	c := &Config{index: map[string]int{}}
	add := func(k string) {
		v := m[k]
		c.index[k] = len(c.entries)
		c.entries = append(c.entries, Entry{Key: k, Value: v.v, Source: v.src})
	}
	for _, o := range options {
		keys := []string{o.Key}
		if o.perName() {
			keys = m.sortedSubagents()
		}
		for _, k := range keys {
			add(k)
			v := m[k].v
			if s, ok := v.([]string); ok {
				v = append([]string(nil), s...) // the table's defaults stay its own
			}
			if o.perName() {
				v = named{name: strings.TrimPrefix(k, subagentPrefix), v: v}
			}
			if err := o.set(c, v); err != nil {
				return nil, err
			}
		}
	}
	if ca := &c.Cache; ca.CacheTimeout == 0 {
		ca.CacheTimeout = defaultCacheTimeoutNoWatch
		if ca.Watch {
			ca.CacheTimeout = defaultCacheTimeoutWatch
		}
		c.entries[c.index["cache.cache_timeout"]].Value = ca.CacheTimeout
	}
	if err := c.Agents.Validate(); err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}
	if len(c.Compact.Summarizer.Command) == 0 {
		c.Compact.Summarizer.Command = nil
	}
	c.Compact = c.Compact.WithDefaults()
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
