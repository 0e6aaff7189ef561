package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/tasks"
)

// env is a fake environment: XDG_CONFIG_HOME under a temp dir, no HOME,
// no RUBINOFS_* overrides.
type env struct {
	t     *testing.T
	dir   string
	xdg   string
	ws    string
	state string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	d := t.TempDir()
	e := &env{t: t, dir: d, xdg: filepath.Join(d, "xdg"), ws: filepath.Join(d, "ws"), state: filepath.Join(d, "state")}
	for _, p := range []string{filepath.Join(e.xdg, "rubinofs"), e.ws, e.state} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) getenv(k string) string {
	if k == "XDG_CONFIG_HOME" {
		return e.xdg
	}
	return ""
}

func (e *env) userFile() string { return filepath.Join(e.xdg, "rubinofs", "config.toml") }
func (e *env) wsFile() string   { return filepath.Join(e.ws, WorkspaceFileName) }

func (e *env) write(p, s string) {
	e.t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) load(flags ...Flag) (*Config, error) {
	return Load(Options{Workspace: e.ws, StateDir: e.state, Flags: flags, Getenv: e.getenv})
}

func (e *env) mustLoad(flags ...Flag) *Config {
	e.t.Helper()
	c, err := e.load(flags...)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func mustErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q lacks %q", err, w)
		}
	}
}

// TestDefaults: with no file and no flag, every value is the default and
// says so; the typed sections match the packages' defaults.
func TestDefaults(t *testing.T) {
	e := newEnv(t)
	c := e.mustLoad()
	for _, en := range c.Entries() {
		if en.Source.Kind != KindDefault {
			t.Errorf("%s from %s, want default", en.Key, en.Source)
		}
	}
	g := c.Guard
	if g.Mode != guard.ModeEnforce || g.AllowUnregistered || g.GuardIgnored || len(g.Exempt) != 0 ||
		g.Unlink != guard.UnlinkGuard || g.Errno != syscall.EACCES {
		t.Errorf("guard defaults: %+v", g)
	}
	ca := c.Cache
	if !ca.Watch || ca.CacheTimeout != time.Hour || ca.ShortTimeout != time.Second || !ca.PersistReads || ca.MaxWatches != 0 {
		t.Errorf("cache defaults: %+v", ca)
	}
	want := tasks.Config{}.WithDefaults()
	if c.Agents.Caps != want.Caps || c.Agents.AskTimeout != want.AskTimeout || c.Agents.StopGrace != want.StopGrace || c.Agents.KeepFinished != want.KeepFinished {
		t.Errorf("agents defaults: %+v, want %+v", c.Agents, want)
	}
	if c.Compact.Threshold != 0.5 || c.Compact.Summarizer.Backend != "builtin" {
		t.Errorf("compact defaults: %+v", c.Compact)
	}
	// Without the watcher the automatic cache timeout is 1 s.
	c = e.mustLoad(Flag{Key: "cache.watch", Name: "--watch", Value: false})
	if c.Cache.CacheTimeout != time.Second {
		t.Errorf("cache timeout without watch: %v", c.Cache.CacheTimeout)
	}
}

// TestPrecedence is the precedence table: for each combination of
// sources, the strongest one's value wins and is named as the source.
func TestPrecedence(t *testing.T) {
	// guard.errno is neutral, so every source may set it.
	for _, c := range []struct {
		name            string
		user, ws, flag  string // "" = not set
		want, wantKind  string
		wantLine        int
		wantFlagNameSet bool
	}{
		{"defaults", "", "", "", "EACCES", "default", 0, false},
		{"user", "EPERM", "", "", "EPERM", "user file", 3, false},
		{"workspace over default", "", "EPERM", "", "EPERM", "workspace file", 2, false},
		{"workspace over user", "EPERM", "EACCES", "", "EACCES", "workspace file", 2, false},
		{"flag over user", "EPERM", "", "EACCES", "EACCES", "flag", 0, true},
		{"flag over workspace and user", "EACCES", "EPERM", "EACCES", "EACCES", "flag", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if c.user != "" {
				e.write(e.userFile(), "# user\n[guard]\nerrno = \""+c.user+"\"\n")
			}
			if c.ws != "" {
				e.write(e.wsFile(), "[guard]\nerrno = \""+c.ws+"\"\n")
			}
			var flags []Flag
			if c.flag != "" {
				flags = append(flags, Flag{Key: "guard.errno", Name: "--errno", Value: c.flag})
			}
			cfg := e.mustLoad(flags...)
			en, ok := cfg.Lookup("guard.errno")
			if !ok || en.Value != c.want || string(en.Source.Kind) != c.wantKind || en.Source.Line != c.wantLine {
				t.Fatalf("guard.errno = %v from %+v, want %s from %s line %d", en.Value, en.Source, c.want, c.wantKind, c.wantLine)
			}
			if guard.ErrnoName(cfg.Guard.Errno) != c.want {
				t.Fatalf("Guard.Errno = %v, want %s", cfg.Guard.Errno, c.want)
			}
			if c.wantFlagNameSet && en.Source.String() != "flag --errno" {
				t.Fatalf("source %q, want flag --errno", en.Source)
			}
		})
	}
}

// TestModePrecedence: the user file loosens to warn, the workspace file
// tightens back to enforce, a flag loosens again (the human decides).
func TestModePrecedence(t *testing.T) {
	e := newEnv(t)
	e.write(e.userFile(), "[guard]\nmode = \"warn\"\n")
	c := e.mustLoad()
	if c.Guard.Mode != guard.ModeWarn {
		t.Fatalf("user warn: %v", c.Guard.Mode)
	}
	e.write(e.wsFile(), "[guard]\nmode = \"enforce\"\n")
	c = e.mustLoad()
	if en, _ := c.Lookup("guard.mode"); c.Guard.Mode != guard.ModeEnforce || en.Source.Kind != KindWorkspace {
		t.Fatalf("workspace enforce over user warn: %v from %v", c.Guard.Mode, en.Source)
	}
	c = e.mustLoad(Flag{Key: "guard.mode", Name: "--mode", Value: "off"})
	if en, _ := c.Lookup("guard.mode"); c.Guard.Mode != guard.ModeOff || en.Source.String() != "flag --mode" {
		t.Fatalf("flag off: %v from %v", c.Guard.Mode, en.Source)
	}
}

// TestProvenance: each value names its file and the line that set it,
// including keys in inline tables, dotted keys and subagent tables, and
// the explicit --config file replaces the XDG one.
func TestProvenance(t *testing.T) {
	e := newEnv(t)
	e.write(e.userFile(), `# line 1
[guard]
mode = "warn"          # line 3
exempt = ["tmp/**"]    # line 4

[cache]
cache_timeout = "2h"   # line 7
watch_skip = ["node_modules"]

[agents]
max_depth = 3          # line 11

[agents.subagents.claude]  # line 13
command = ["claude", "-p", "{prompt}"]

[compact]
threshold = 0.75       # line 17
summarizer = { backend = "command", command = ["cat"] }  # line 18
`)
	c := e.mustLoad()
	u := e.userFile()
	for key, line := range map[string]int{
		"guard.mode": 3, "guard.exempt": 4, "cache.cache_timeout": 7, "cache.watch_skip": 8,
		"agents.max_depth": 11, "agents.subagents.claude": 13, "compact.threshold": 17,
		"compact.summarizer.backend": 18, "compact.summarizer.command": 18,
	} {
		en, ok := c.Lookup(key)
		if !ok || en.Source.Kind != KindUser || en.Source.Path != u || en.Source.Line != line {
			t.Errorf("%s: %+v, want user file line %d", key, en.Source, line)
		}
	}
	if c.Cache.CacheTimeout != 2*time.Hour || c.Agents.MaxDepth != 3 || c.Compact.Threshold != 0.75 ||
		c.Compact.Summarizer.Backend != "command" || len(c.Agents.Subagents["claude"].Command) != 3 {
		t.Errorf("values: %+v %+v %+v", c.Cache, c.Agents, c.Compact)
	}
	if en, _ := c.Lookup("guard.mode"); en.Source.String() != "user file "+u+":3" {
		t.Errorf("String() = %q", en.Source)
	}

	// --config replaces the XDG file; a missing --config file is an error.
	other := filepath.Join(e.dir, "other.toml")
	e.write(other, "guard.errno = \"EPERM\"\n")
	c, err := Load(Options{UserFile: other, Getenv: e.getenv})
	if err != nil {
		t.Fatal(err)
	}
	if en, _ := c.Lookup("guard.mode"); en.Source.Kind != KindDefault {
		t.Errorf("--config still read the XDG file: guard.mode from %v", en.Source)
	}
	if en, _ := c.Lookup("guard.errno"); en.Source.Path != other || en.Source.Line != 1 {
		t.Errorf("dotted key: %+v", en.Source)
	}
	_, err = Load(Options{UserFile: filepath.Join(e.dir, "missing.toml"), Getenv: e.getenv})
	mustErr(t, err, "missing.toml")
}

// TestUnknownKey: unknown keys and tables are errors naming file, line and
// the dotted key, every one of them.
func TestUnknownKey(t *testing.T) {
	e := newEnv(t)
	e.write(e.userFile(), "[guard]\nmode = \"warn\"\n\nmdoe = \"enforce\"\n[cahce]\nwatch = true\n[agents.subagents.x]\ncommand = [\"{prompt}\"]\nstdn = true\n")
	_, err := e.load()
	mustErr(t, err, e.userFile()+":4: unknown key guard.mdoe", ":5: unknown key cahce", ":9: unknown key agents.subagents.x.stdn")
}

// TestTypeErrors: a value of the wrong type is an error naming the file,
// line, key and the expected type; so is a malformed duration, an out of
// range value and a TOML syntax error.
func TestTypeErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"[guard]\n\nmode = 3\n", ":3: guard.mode: want a string, got a TOML integer"},
		{"[cache]\nwatch = \"yes\"\n", ":2: cache.watch: want a boolean, got a TOML string"},
		{"[cache]\ncache_timeout = 5\n", ":2: cache.cache_timeout: want a duration string"},
		{"[cache]\n\ncache_timeout = \"5 minutes\"\n", `:3: cache.cache_timeout: "5 minutes" is not a duration`},
		{"[guard]\nexempt = \"a\"\n", ":2: guard.exempt: want an array of strings"},
		{"[agents]\nmax_depth = \"2\"\n", ":2: agents.max_depth: want an integer"},
		{"[guard]\nmode = \"strict\"\n", `:2: guard.mode: "strict" is not one of enforce, warn, off`},
		{"[guard]\nerrno = \"EBUSY\"\n", `:2: guard.errno: "EBUSY" is not one of EACCES, EPERM`},
		{"[cache]\ncache_timeout = \"48h\"\n", ":2: cache.cache_timeout: 48h0m0s out of range"},
		{"[compact]\nthreshold = 1.5\n", ":2: compact.threshold: 1.5 out of range"},
		{"[agents.subagents.bad]\ncommand = [\"x\"]\n", ":1: agents.subagents.bad: subagent bad: the prompt goes nowhere"},
		{"[guard]\nmode = \n", ":2:"},
		{"[guard]\nmode = \"a\"\nmode = \"b\"\n", ":3:"},
	} {
		e := newEnv(t)
		e.write(e.userFile(), c.file)
		_, err := e.load()
		mustErr(t, err, e.userFile()+c.want)
	}
	// A combined compaction config that does not validate names its sources.
	e := newEnv(t)
	e.write(e.userFile(), "[compact]\nhead_messages = 10\nminimum_messages = 4\n")
	_, err := e.load()
	mustErr(t, err, "minimum_messages 4 must be at least head_messages + 2", "compact.head_messages from user file")
}

// TestWorkspaceMayOnlyTighten: a workspace file that loosens the guard,
// adds exemptions, names a program, raises a cap or exceeds the cache
// bounds is refused with the file, line and key; tightening and neutral
// keys are accepted.
func TestWorkspaceMayOnlyTighten(t *testing.T) {
	refused := []struct{ user, ws, want string }{
		{"", "[guard]\nmode = \"warn\"\n", ":2: guard.mode = \"warn\" would loosen the guard (\"enforce\" from default)"},
		{"[guard]\nmode = \"warn\"\n", "[guard]\nmode = \"off\"\n", "guard.mode = \"off\" would loosen the guard (\"warn\" from user file"},
		{"", "[guard]\nexempt = [\"secrets/**\"]\n", ":2: guard.exempt = [\"secrets/**\"] would loosen the guard"},
		{"[guard]\nexempt = [\"a\"]\n", "[guard]\nexempt = [\"a\", \"b\"]\n", "guard.exempt"},
		{"[guard]\nguard_ignored = true\n", "[guard]\nguard_ignored = false\n", "guard.guard_ignored = false would loosen"},
		{"", "[guard]\nunregistered = \"allow\"\n", "guard.unregistered = \"allow\" would loosen"},
		{"", "[guard]\nunlink = \"allow\"\n", "guard.unlink = \"allow\" would loosen"},
		{"", "[agents]\nmax_depth = 5\n", "agents.max_depth = 5 would loosen"},
		{"", "[agents]\nkeep_finished = 16\n", "agents.keep_finished may not be set in a workspace file"},
		{"", "[agents]\nask_timeout = \"1h\"\n", "agents.ask_timeout may not be set in a workspace file"},
		{"", "[agents.subagents.evil]\ncommand = [\"sh\", \"-c\", \"{prompt}\"]\n", ":1: agents.subagents.evil may not be set in a workspace file: it names a program"},
		{"", "[compact.summarizer]\nbackend = \"command\"\ncommand = [\"curl\"]\n", "compact.summarizer.backend may not be set"},
		{"", "[cache]\ncache_timeout = \"2h\"\n", "cache.cache_timeout: 2h0m0s out of range (0s to 1h0m0s) in a workspace file"},
		{"", "[guard]\nscanners = [\"grep\"]\n", ":2: guard.scanners = [\"grep\"] would loosen the guard"},
		{"[guard]\nscanners = [\"grep\", \"sed\"]\n", "[guard]\nscanners = [\"grep\", \"rg\"]\n", "guard.scanners"},
	}
	for _, c := range refused {
		e := newEnv(t)
		if c.user != "" {
			e.write(e.userFile(), c.user)
		}
		e.write(e.wsFile(), c.ws)
		_, err := e.load()
		mustErr(t, err, "refusing the workspace file", "workspace file "+e.wsFile(), c.want)
	}
	accepted := []struct{ user, ws string }{
		{"[guard]\nmode = \"warn\"\n", "[guard]\nmode = \"enforce\"\n"},
		{"[guard]\nmode = \"off\"\n", "[guard]\nmode = \"warn\"\n"},
		{"[guard]\nexempt = [\"a\", \"b\"]\n", "[guard]\nexempt = [\"a\"]\n"},
		{"", "[guard]\nguard_ignored = true\nunlink = \"guard\"\nunregistered = \"guard\"\nerrno = \"EPERM\"\n"},
		{"[guard]\nunlink = \"allow\"\n", "[guard]\nunlink = \"allow\"\n"},
		{"", "[agents]\nmax_depth = 1\nmax_concurrent_total = 2\n"},
		{"", "[cache]\ncache_timeout = \"10m\"\nshort_timeout = \"500ms\"\nwatch = false\nwatch_skip = [\"build\"]\n"},
		{"", "[compact]\nthreshold = 0.8\ncontext_window = 200000\nmodel = \"gpt-4o\"\n"},
		{"[guard]\nscanners = [\"grep\"]\n", "[guard]\nscanners = [\"grep\", \"sed\"]\n"},
	}
	for _, c := range accepted {
		e := newEnv(t)
		if c.user != "" {
			e.write(e.userFile(), c.user)
		}
		e.write(e.wsFile(), c.ws)
		if _, err := e.load(); err != nil {
			t.Errorf("user %q, workspace %q: %v", c.user, c.ws, err)
		}
	}
	// A flag may loosen what the workspace file tightened: the human decides.
	e := newEnv(t)
	e.write(e.wsFile(), "[guard]\nunlink = \"guard\"\n")
	c := e.mustLoad(Flag{Key: "guard.unlink", Name: "--unlink", Value: "allow"})
	if c.Guard.Unlink != guard.UnlinkAllow {
		t.Errorf("flag --unlink allow over workspace guard: %v", c.Guard.Unlink)
	}
}

// TestWorkspaceSymlinkRefused: a .rubino.toml that is a symlink is
// refused (the agent could point it at any file the daemon may read).
func TestWorkspaceSymlinkRefused(t *testing.T) {
	e := newEnv(t)
	target := filepath.Join(e.dir, "t.toml")
	e.write(target, "[guard]\nmode = \"enforce\"\n")
	if err := os.Symlink(target, e.wsFile()); err != nil {
		t.Fatal(err)
	}
	_, err := e.load()
	mustErr(t, err, "not a regular file")
}

// TestStateFiles: agents.json and compact.json count below the user file,
// key by key, and show as state files.
func TestStateFiles(t *testing.T) {
	e := newEnv(t)
	e.write(filepath.Join(e.state, "agents.json"), `{"max_depth": 4, "max_concurrent_total": 5, "subagents": {"a": {"command": ["a", "{prompt}"]}}}`)
	e.write(filepath.Join(e.state, "compact.json"), `{"threshold": 0.6, "context_window": 64000}`)
	e.write(e.userFile(), "[agents]\nmax_depth = 2\n[agents.subagents.b]\ncommand = [\"b\"]\nstdin = true\n[compact]\nthreshold = 0.9\n")
	c := e.mustLoad()
	if c.Agents.MaxDepth != 2 || c.Agents.MaxConcurrentTotal != 5 || len(c.Agents.Subagents) != 2 {
		t.Errorf("agents: %+v", c.Agents)
	}
	if c.Compact.Threshold != 0.9 || c.Compact.ContextWindow != 64000 {
		t.Errorf("compact: %+v", c.Compact)
	}
	for key, kind := range map[string]Kind{"agents.max_depth": KindUser, "agents.max_concurrent_total": KindState,
		"agents.subagents.a": KindState, "agents.subagents.b": KindUser, "compact.context_window": KindState,
		"compact.threshold": KindUser, "compact.tail_ratio": KindDefault} {
		if en, _ := c.Lookup(key); en.Source.Kind != kind {
			t.Errorf("%s from %v, want %s", key, en.Source, kind)
		}
	}
	// A bad state file is an error naming it.
	e.write(filepath.Join(e.state, "agents.json"), `{"max_dpth": 4}`)
	_, err := e.load()
	mustErr(t, err, "agents.json", "max_dpth")
}

// TestStateFileForms: the state files' members map to the keys of the same
// names (compact.json's summarizer one table deeper); a duration is "15m"
// or seconds; in agents.json a zero or negative value is not set, in
// compact.json a zero or null value is the default, from the file.
func TestStateFileForms(t *testing.T) {
	e := newEnv(t)
	e.write(filepath.Join(e.state, "agents.json"), `{"max_depth": 0, "max_children_per_node": -1, "stop_grace": 5, "ask_timeout": "20m"}`)
	e.write(filepath.Join(e.state, "compact.json"), `{"threshold": 0, "tokenizer": null, "preserve_tool_pairs": false, "summarizer": {"timeout_seconds": 7}}`)
	c := e.mustLoad()
	if c.Agents.StopGrace != tasks.Duration(5*time.Second) || c.Agents.AskTimeout != tasks.Duration(20*time.Minute) ||
		c.Agents.MaxDepth != tasks.DefaultCaps().MaxDepth || c.Agents.MaxChildrenPerNode != tasks.DefaultCaps().MaxChildrenPerNode {
		t.Errorf("agents: %+v", c.Agents)
	}
	if c.Compact.Threshold != 0.5 || *c.Compact.PreserveToolPairs || c.Compact.Summarizer.TimeoutSeconds != 7 {
		t.Errorf("compact: %+v", c.Compact)
	}
	for key, kind := range map[string]Kind{"agents.max_depth": KindDefault, "agents.max_children_per_node": KindDefault,
		"agents.stop_grace": KindState, "compact.threshold": KindState, "compact.tokenizer": KindState,
		"compact.summarizer.timeout_seconds": KindState, "compact.model": KindDefault} {
		if en, _ := c.Lookup(key); en.Source.Kind != kind {
			t.Errorf("%s from %v, want %s", key, en.Source, kind)
		}
	}
}

// TestShow: the TOML output names every source and parses back into the
// same values; the JSON output carries the same.
func TestShow(t *testing.T) {
	e := newEnv(t)
	e.write(e.userFile(), "[guard]\nmode = \"warn\"\n[agents.subagents.\"my.agent\"]\ncommand = [\"x\", \"{prompt}\"]\nenv = [\"A=1\"]\n")
	e.write(e.wsFile(), "[compact]\nthreshold = 0.7\n")
	c := e.mustLoad(Flag{Key: "cache.short_timeout", Name: "--short-timeout", Value: 2 * time.Second})
	var b bytes.Buffer
	if err := c.WriteTOML(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`mode = "warn"`, "# from user file " + e.userFile() + ":2",
		"threshold = 0.7", "# from workspace file " + e.wsFile() + ":2",
		`short_timeout = "2s"`, "# from flag --short-timeout",
		`errno = "EACCES"`, "# from default",
		`[agents.subagents."my.agent"] # from user file`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	// The output is a valid config file giving the same values.
	p := filepath.Join(e.dir, "roundtrip.toml")
	e.write(p, out)
	c2, err := Load(Options{UserFile: p, Getenv: e.getenv})
	if err != nil {
		t.Fatalf("show output does not load: %v\n%s", err, out)
	}
	if c2.Guard.Mode != c.Guard.Mode || c2.Guard.Errno != c.Guard.Errno || c2.Cache.ShortTimeout != c.Cache.ShortTimeout ||
		c2.Compact.Threshold != c.Compact.Threshold || c2.Agents.Subagents["my.agent"].Env[0] != "A=1" {
		t.Errorf("round trip differs: %+v vs %+v", c2, c)
	}
	var raw any
	if err := toml.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}

	b.Reset()
	if err := c.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var js []JSONEntry
	if err := json.Unmarshal(b.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, j := range js {
		if j.Key == "cache.short_timeout" {
			found = j.Value == "2s" && j.From == "flag --short-timeout" && j.Source.Kind == KindFlag
		}
	}
	if !found || len(js) != len(c.Entries()) {
		t.Errorf("json: %s", b.String())
	}
}

// TestFlagErrors: a flag with a bad value is an error naming the flag.
func TestFlagErrors(t *testing.T) {
	e := newEnv(t)
	_, err := e.load(Flag{Key: "guard.unlink", Name: "--unlink", Value: "maybe"})
	mustErr(t, err, "flag --unlink", `"maybe" is not one of guard, allow`)
	_, err = e.load(Flag{Key: "cache.watch_skip", Name: "--watch-skip", Value: []string{"a[b"}})
	mustErr(t, err, "flag --watch-skip", "malformed glob")
}

// TestScanners: guard.scanners defaults to guard.DefaultScanners; the user
// file may set any list (with provenance); a malformed name is refused.
func TestScanners(t *testing.T) {
	e := newEnv(t)
	c := e.mustLoad()
	if fmt.Sprint(c.Guard.Scanners) != fmt.Sprint(guard.DefaultScanners) {
		t.Fatalf("default scanners %v, want %v", c.Guard.Scanners, guard.DefaultScanners)
	}
	e.write(e.userFile(), "[guard]\nscanners = [\"grep\", \"sed\"]\n")
	c = e.mustLoad()
	if fmt.Sprint(c.Guard.Scanners) != "[grep sed]" {
		t.Fatalf("user scanners %v", c.Guard.Scanners)
	}
	if en, _ := c.Lookup("guard.scanners"); en.Source.Path != e.userFile() || en.Source.Line != 2 {
		t.Fatalf("provenance %+v", en.Source)
	}
	e.write(e.userFile(), "[guard]\nscanners = [\"/usr/bin/grep\"]\n")
	_, err := e.load()
	mustErr(t, err, "guard.scanners", "malformed program name")
}

// TestSessionsCgroupAuto: sessions.cgroup_auto is read from the user file
// and refused in the workspace file with a readable reason; a relative
// glob is refused with its line.
func TestSessionsCgroupAuto(t *testing.T) {
	e := newEnv(t)
	e.write(e.userFile(), "[sessions]\ncgroup_auto = [\"/system.slice/docker-*.scope\", \"/kubepods*/**\"]\n")
	c, err := e.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sessions.CgroupAuto; len(got) != 2 || got[0] != "/system.slice/docker-*.scope" {
		t.Fatalf("CgroupAuto = %q", got)
	}
	e = newEnv(t)
	e.write(e.wsFile(), "[sessions]\ncgroup_auto = [\"/docker/*\"]\n")
	_, err = e.load()
	mustErr(t, err, "refusing the workspace file", ":2: sessions.cgroup_auto may not be set in a workspace file: it decides which processes share a session")
	e = newEnv(t)
	e.write(e.userFile(), "[sessions]\ncgroup_auto = [\"docker/*\"]\n")
	_, err = e.load()
	mustErr(t, err, ":2: sessions.cgroup_auto", "is not absolute")
}

// TestSessionsMaxLive: sessions.max_live defaults to 1024, is read from
// the user file and the flag (which wins), is refused out of range with
// the key and the bounds, and is refused in the workspace file.
func TestSessionsMaxLive(t *testing.T) {
	e := newEnv(t)
	if c := e.mustLoad(); c.Sessions.MaxLive != DefaultMaxLiveSessions || DefaultMaxLiveSessions != 1024 {
		t.Fatalf("default MaxLive = %d", c.Sessions.MaxLive)
	}
	e.write(e.userFile(), "[sessions]\nmax_live = 3\n")
	if c := e.mustLoad(); c.Sessions.MaxLive != 3 {
		t.Fatalf("user file MaxLive = %d", c.Sessions.MaxLive)
	}
	if c := e.mustLoad(Flag{Key: "sessions.max_live", Name: "--max-live-sessions", Value: 2}); c.Sessions.MaxLive != 2 {
		t.Fatalf("flag MaxLive = %d", c.Sessions.MaxLive)
	}
	e.write(e.userFile(), "[sessions]\nmax_live = 0\n")
	_, err := e.load()
	mustErr(t, err, "sessions.max_live", "out of range (1 to 65536)")
	e = newEnv(t)
	e.write(e.wsFile(), "[sessions]\nmax_live = 1\n")
	_, err = e.load()
	mustErr(t, err, "refusing the workspace file", ":2: sessions.max_live may not be set in a workspace file: it bounds the sessions")
}
