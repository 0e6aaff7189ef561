package main

// `rubinofs agent claude-code|codex [-- AGENT ARGS]`: one command that
// starts a coding agent guarded in the project directory it is run in
// (docs/DESIGN.md#agent-command): mount it in place when it is no mount
// yet, install rubinofs's hooks and MCP server into the agent's settings,
// run the agent as the harness of a new session, and unmount at the end
// when it mounted, unless other sessions are live.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/fusefs"
)

// agentKind is what `rubinofs agent` knows of one agent client.
type agentKind struct {
	bin     string // its command on PATH
	install string // how to install it, for the error when it is missing
	// setup installs the hooks and the MCP entry (idempotent) for a
	// project whose mount root is root, printing what changed to w.
	setup func(w io.Writer, root string) error
}

// agentKinds are the agents `rubinofs agent` starts, by the name it takes.
var agentKinds = map[string]agentKind{
	"claude-code": {
		bin:     "claude",
		install: "npm install -g @anthropic-ai/claude-code",
		setup: func(w io.Writer, root string) error {
			return setupClaudeCode(w, root, "", true)
		},
	},
	"codex": {
		bin:     "codex",
		install: "npm install -g @openai/codex",
		setup: func(w io.Writer, _ string) error {
			home, err := codexHome("")
			if err != nil {
				return err
			}
			return setupCodex(w, home, true)
		},
	},
}

func agentCommand() *cli.Command {
	return &cli.Command{
		Name:      "agent",
		Usage:     "start a coding agent guarded in the current directory: mount it in place if needed, install the hooks and MCP server, run the agent as the harness of a new session, unmount at the end",
		ArgsUsage: "claude-code|codex [-- AGENT ARGS...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent-bin", Usage: "the agent's executable `PATH` (default: claude or codex from $PATH)"},
			&cli.StringFlag{Name: "session", Usage: "the session `NAME` (default: the agent's name and a random suffix)"},
		},
		Action: runAgent,
	}
}

// agentUsage is the one-line usage error of `rubinofs agent`.
const agentUsage = "usage: rubinofs agent [--agent-bin PATH] [--session NAME] claude-code|codex [-- AGENT ARGS...]"

func runAgent(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit(agentUsage, exitUsage)
	}
	name := c.Args().First()
	kind, ok := agentKinds[name]
	if !ok {
		return cli.Exit(fmt.Sprintf("rubinofs agent: unknown agent %q: claude-code or codex; %s", name, agentUsage), exitUsage)
	}
	bin, err := agentBinary(c.String("agent-bin"), kind)
	if err != nil {
		return cli.Exit("rubinofs agent: "+err.Error(), 127)
	}
	dir, err := os.Getwd()
	if err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs agent: the current directory: %v", err), 1)
	}
	session := c.String("session")
	if session == "" {
		session = name + "-" + randomSuffix()
	}
	stderr := c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}

	// The settings are written before mounting when this command mounts:
	// straight to the workspace, so they are no change of any session's.
	root, mounted := mountAround(dir)
	if !mounted {
		root = dir
	}
	if err := kind.setup(stderr, root); err != nil {
		return cli.Exit("rubinofs agent: "+err.Error(), 1)
	}
	if !mounted {
		if err := mountInPlace(dir, stderr); err != nil {
			return cli.Exit("rubinofs agent: "+err.Error(), 1)
		}
	}
	code, runErr := runHarness(root, dir, session, bin, c.Args().Tail(), stderr)
	if !mounted {
		fmt.Fprintln(stderr, "rubinofs agent: "+unmountIfIdle(root, session))
	}
	if runErr != nil {
		return cli.Exit("rubinofs agent: "+runErr.Error(), 1)
	}
	if code != 0 {
		return cli.Exit("", code) // the agent's own status, no message
	}
	return nil
}

// agentBinary resolves the agent's executable: flag when given (a path,
// or a name looked up on PATH), else kind.bin on PATH. The error says how
// to install the agent.
func agentBinary(flag string, kind agentKind) (string, error) {
	if flag != "" {
		p, err := exec.LookPath(flag)
		if err != nil {
			return "", fmt.Errorf("--agent-bin %s: %v", flag, err)
		}
		return filepath.Abs(p)
	}
	p, err := exec.LookPath(kind.bin)
	if err != nil {
		return "", fmt.Errorf("%s not found on PATH: install it (%s), or give its path with --agent-bin PATH", kind.bin, kind.install)
	}
	return filepath.Abs(p)
}

// randomSuffix is 8 hex digits for a default session name.
func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// mountAround returns the rubinofs mount root around dir (dir or its
// nearest ancestor holding .rubino/status) and whether there is one.
// Unlike findMount it looks at dir alone, never at $RUBINO_MOUNT: the
// project is where the command was run.
// The stats are a probe child's (nearestMount), as findMount's: a
// daemon that holds one makes the walk stop there, with no mount found.
func mountAround(dir string) (string, bool) {
	found := nearestMount(ancestors(dir))
	return found, found != ""
}

// mountInPlace mounts dir over itself in the background (`rubinofs mount
// --in-place --daemon DIR`, this executable), after checking what a mount
// needs so the error says what to install; the mount's own output goes to
// w.
func mountInPlace(dir string, w io.Writer) error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("cannot mount %s: no /dev/fuse (%v): load the module (modprobe fuse), or in a container pass --device /dev/fuse; `rubinofs doctor` checks the rest", dir, err)
	}
	if os.Geteuid() != 0 && findFusermount() == "" {
		return fmt.Errorf("cannot mount %s: not root and no fusermount3, which users other than root mount through: apt-get install fuse3 (`rubinofs doctor` checks the rest)", dir)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the rubinofs executable: %v", err)
	}
	cmd := exec.Command(self, "mount", "--in-place", "--daemon", dir)
	// Not run in dir: the agent is started in the mount by name, so the
	// mount's note about a working directory under it would be noise.
	cmd.Stdout, cmd.Stderr, cmd.Dir = w, w, "/"
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mounting %s in place failed (%v; the reason is above): run this inside a mount of it instead, or mount it yourself (rubinofs mount --in-place --daemon %s) and run this again", dir, err, shq(dir))
	}
	return nil
}

// runHarness runs bin with args as the harness of a new session named
// session of the mount at root (`rubinofs run --harness`, this
// executable), in dir, with this process's standard files, and returns
// its exit status (128+N for a death by signal N). SIGTERM and SIGHUP
// sent to this process are passed on to it; SIGINT and SIGQUIT are left
// to the terminal, which sends them to the agent itself (a second copy
// would make Claude Code exit on one Ctrl-C).
func runHarness(root, dir, session, bin string, args []string, stderr io.Writer) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("finding the rubinofs executable: %v", err)
	}
	argv := append([]string{"run", "--harness", "--mount", root, "--session", session, "--", bin}, args...)
	cmd := exec.Command(self, argv...)
	cmd.Dir = dir // resolved again: through the mount now
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, stderr
	code, err := waitPassingSignals(cmd) // branchrun.go
	if err != nil {
		return 0, fmt.Errorf("starting %s: %v", bin, err)
	}
	return code, nil
}

// unmountIfIdle unmounts the mount at root unless a session other than own
// is live (liveSessions), and says what it did: unmounted, or left
// mounted with the reason (the live sessions, or the kernel's busy).
func unmountIfIdle(root, own string) string {
	live, err := liveSessions(root, own)
	if err != nil {
		return fmt.Sprintf("left %s mounted: cannot list its sessions (%v); unmount it with `rubinofs unmount %s`", root, err, shq(root))
	}
	if len(live) > 0 {
		return fmt.Sprintf("left %s mounted: other sessions are live (%s); unmount it with `rubinofs unmount %s` once they end", root, strings.Join(live, ", "), shq(root))
	}
	what, err := fusefs.UnmountWith(root, false, mountGone) // probe.go
	if err != nil {
		return fmt.Sprintf("left %s mounted: %v; unmount it with `rubinofs unmount %s` once it is free", root, err, shq(root))
	}
	return what
}

// liveSessions lists the live sessions of the mount at root other than
// own, as "NAME (COMMAND)", sorted: the entries of .rubino/sessions/ whose
// info says "live": true (running roots, tasks, kept sessions). Default
// sessions have no root and are never live.
func liveSessions(root, own string) ([]string, error) {
	ents, err := os.ReadDir(ctlPathOf(root, "sessions"))
	if err != nil {
		return nil, err
	}
	infos := map[string][]byte{}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == own {
			continue
		}
		b, err := readCtl(root, "sessions/"+e.Name()+"/info")
		if err != nil {
			continue // ended and dropped since the listing
		}
		infos[e.Name()] = b
	}
	return liveOf(infos), nil
}

// liveOf returns "NAME (COMMAND)" for each session info document (JSON,
// by session name) that says "live": true, sorted.
func liveOf(infos map[string][]byte) []string {
	var out []string
	for name, b := range infos {
		var info struct {
			Live    bool   `json:"live"`
			Command string `json:"command"`
		}
		if json.Unmarshal(b, &info) != nil || !info.Live {
			continue
		}
		if info.Command == "" {
			info.Command = "no command: kept"
		}
		out = append(out, fmt.Sprintf("%s (%s)", name, info.Command))
	}
	sort.Strings(out)
	return out
}
