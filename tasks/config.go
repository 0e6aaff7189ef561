package tasks

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"
)

// ConfigFileName is the name of the agents config (the JSON form of
// Config) in the state directory. Package config reads it, with the other
// sources, and the daemon hands the merged Config to Open: this package
// reads no configuration file or variable of its own
// (docs/DESIGN.md#options-table). It lives outside the mount and nothing
// under .rubino can change it: its command templates run as whoever spawns
// a task of the type (docs/DESIGN.md#task-credentials).
const ConfigFileName = "agents.json"

// BuiltinShell is the built-in subagent type: the prompt is a shell
// command, run as /bin/sh -c PROMPT. It needs no model, so the registry is
// usable and testable anywhere. A config cannot redefine it.
const BuiltinShell = "sh"

// SubagentType is one configured subagent: a command template.
//
// Command is an argv, executed directly (no shell) from the mount root.
// In every element, "{prompt}" is replaced by the prompt, "{id}" by the
// task id and "{mount}" by the mount path. With Stdin the prompt is written
// to the process's standard input (then closed) instead, and Command need
// not mention {prompt}; without Stdin, standard input is /dev/null and
// Command must contain {prompt}. Env adds KEY=VALUE pairs to the task's
// environment. Example (agents.json):
//
//	{"subagents": {
//	  "claude": {"command": ["claude", "-p", "{prompt}"]},
//	  "codex":  {"command": ["codex", "exec", "-"], "stdin": true}
//	}}
type SubagentType struct {
	Command []string `json:"command"`         // the argv template
	Stdin   bool     `json:"stdin,omitempty"` // the prompt goes to standard input
	Env     []string `json:"env,omitempty"`   // extra KEY=VALUE pairs
}

// Validate checks a type's template.
func (t SubagentType) Validate(name string) error {
	if len(t.Command) == 0 || t.Command[0] == "" {
		return fmt.Errorf("subagent %s: command is empty", name)
	}
	if !t.Stdin {
		found := false
		for _, a := range t.Command {
			found = found || strings.Contains(a, "{prompt}")
		}
		if !found {
			return fmt.Errorf("subagent %s: the prompt goes nowhere: put {prompt} in command or set \"stdin\": true", name)
		}
	}
	for _, kv := range t.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("subagent %s: env entry %q is not KEY=VALUE", name, kv)
		}
	}
	return nil
}

// argv expands the template for one task.
func (t SubagentType) argv(prompt, id, mount string) []string {
	r := strings.NewReplacer("{prompt}", prompt, "{id}", id, "{mount}", mount)
	out := make([]string, len(t.Command))
	for i, a := range t.Command {
		out[i] = r.Replace(a)
	}
	return out
}

// Duration is a time.Duration that reads and writes JSON as "15m".
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "15m" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("want a duration like \"15m\" or seconds")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Config configures a Runner. The JSON fields are what agents.json may set;
// zero values mean the defaults. The others are set by the daemon.
type Config struct {
	Caps
	// AskTimeout bounds a blocking ask and a pending approval (default
	// 900 s, DefaultAskTimeout).
	AskTimeout Duration `json:"ask_timeout,omitempty"`
	// StopGrace is how long a stopped task has between SIGTERM and SIGKILL
	// of its process group (default 2 s).
	StopGrace Duration `json:"stop_grace,omitempty"`
	// KeepFinished bounds the finished tasks (done, failed, stopped) the
	// registry keeps, in tasks: after every finish and every spawn the ones
	// that finished first are removed beyond it, with their in-memory
	// output and activity and their log file (Registry.Prune; a finished
	// task with a live descendant is kept until that one finishes). The
	// same bound applies to the log files earlier runs left in LogDir.
	// Default DefaultKeepFinished (256); 1 to MaxKeepFinished, else
	// Validate fails.
	KeepFinished int `json:"keep_finished,omitempty"`
	// Subagents are the configured types by name ("sh" is built in).
	Subagents map[string]SubagentType `json:"subagents,omitempty"`

	// Mount is the mount root: the tasks' working directory and
	// RUBINO_MOUNT. Required.
	Mount string `json:"-"`
	// StateDir is the mount's state directory, where its branches live
	// (STATE/branches/NAME, package branch); set by Open. "" refuses tasks
	// in a branch (ErrBranchRefused).
	StateDir string `json:"-"`
	// Rubinofs is the rubinofs executable a task in a branch is started
	// through (`rubinofs run --branch NAME -- ...`,
	// docs/DESIGN.md#branch-tasks): the daemon's own binary, set by
	// `rubinofs mount`. "" refuses tasks in a branch (ErrBranchRefused).
	Rubinofs string `json:"-"`
	// LogDir receives one log file per task (stdout and stderr); "" means
	// a temporary directory removed by Close.
	LogDir string `json:"-"`
	// Sessions registers each task's process as a session root; nil skips
	// registration (callers are then recognised as tasks by their POSIX
	// session id, see Runner).
	Sessions Sessions `json:"-"`
	// NoShell switches the built-in sh type off (agents.shell = false):
	// spawning it fails with ErrShellOff (EPERM), and it is not listed.
	NoShell bool `json:"-"`
	// Shell runs the built-in sh type and the start-up wrapper (default
	// /bin/sh). For a spawner in other namespaces it is the shell of the
	// spawner's root directory (docs/DESIGN.md#task-credentials).
	Shell string `json:"-"`
	// MountOwner is the uid that mounted: it names the default session
	// "default" (sessions.DefaultUID), and with root it may act on
	// every task from outside every session (docs/DESIGN.md#task-authority).
	MountOwner uint32 `json:"-"`
	// Umask is the umask the start-up wrapper sets before it starts the
	// task, in octal ("0022"); "" keeps the runner's process umask. The
	// daemon runs with umask 0 (it creates files with the modes callers
	// asked for, masked with their own umask) and passes the umask it was
	// started with, so tasks create files as the user's shell would.
	// Anything but up to four octal digits fails Validate.
	Umask string `json:"-"`
	// Logger receives the runner's diagnostics (default: text records on
	// stderr), at two levels: warn for what degrades but continues (a task
	// that could not start, processes that outlived SIGKILL, a log file that
	// could not be listed or removed), info for a task that finished with
	// steer notes it never read. Every record has the field "task" when it
	// concerns one.
	Logger *slog.Logger `json:"-"`
}

// Defaults of Config.
const (
	DefaultStopGrace    = 2 * time.Second
	DefaultKeepFinished = 256
	// MaxKeepFinished is the largest KeepFinished, in tasks. A finished
	// entry typically holds a few KiB; its worst case is about 400 KiB
	// (MaxPrompt, MaxResult for the result and the declared one, the last
	// question and approval, UndeliveredKeptMax of notes, a 7-line output
	// tail and a 6-line activity ring), so at most about 4 GiB at this
	// bound and about 100 MiB at the default.
	MaxKeepFinished = 10_000
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Caps = c.Caps.withDefaults()
	if c.AskTimeout <= 0 {
		c.AskTimeout = Duration(DefaultAskTimeout)
	}
	if c.StopGrace <= 0 {
		c.StopGrace = Duration(DefaultStopGrace)
	}
	if c.KeepFinished == 0 {
		c.KeepFinished = DefaultKeepFinished
	}
	if c.Shell == "" {
		c.Shell = "/bin/sh"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return c
}

// Validate checks KeepFinished (0 means the default, else 1 to
// MaxKeepFinished) and the subagent types.
func (c Config) Validate() error {
	if c.KeepFinished < 0 || c.KeepFinished > MaxKeepFinished {
		return fmt.Errorf("keep_finished %d tasks is out of range: want 1 to %d (0: the default %d)", c.KeepFinished, MaxKeepFinished, DefaultKeepFinished)
	}
	if c.Umask != "" && !umaskRE.MatchString(c.Umask) {
		return fmt.Errorf("umask %q: want up to four octal digits", c.Umask)
	}
	for name, t := range c.Subagents {
		if name == BuiltinShell {
			return fmt.Errorf("subagent %s is built in and cannot be configured", name)
		}
		if !subagentRE.MatchString(name) {
			return fmt.Errorf("malformed subagent name %q", name)
		}
		if err := t.Validate(name); err != nil {
			return err
		}
	}
	return nil
}

// umaskRE is what Config.Umask may be: the wrapper passes it to the
// shell's umask builtin unquoted, so nothing else may reach the script.
var umaskRE = regexp.MustCompile(`^[0-7]{1,4}$`)

// ParseConfig parses the bytes of an agents.json (package config reads the
// file): one JSON object; unknown fields are errors, and the result is
// Validated (zero fields stay zero: WithDefaults fills them).
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Over returns c with its zero JSON fields (caps, timeouts, keep_finished)
// taken from base: values set in c win; subagent types are the union, c
// winning per name. The daemon uses it for a Config built without package
// config's Load (docs/DESIGN.md#options-table).
func (c Config) Over(base Config) Config {

	c.MaxDepth = cmp.Or(c.MaxDepth, base.MaxDepth)
	c.MaxChildrenPerNode = cmp.Or(c.MaxChildrenPerNode, base.MaxChildrenPerNode)
	c.MaxConcurrentTotal = cmp.Or(c.MaxConcurrentTotal, base.MaxConcurrentTotal)
	c.AskTimeout = cmp.Or(c.AskTimeout, base.AskTimeout)
	c.StopGrace = cmp.Or(c.StopGrace, base.StopGrace)
	c.KeepFinished = cmp.Or(c.KeepFinished, base.KeepFinished)
	if len(base.Subagents) > 0 {
		m := map[string]SubagentType{}
		for k, v := range base.Subagents {
			m[k] = v
		}
		for k, v := range c.Subagents {
			m[k] = v
		}
		c.Subagents = m
	}
	return c
}
