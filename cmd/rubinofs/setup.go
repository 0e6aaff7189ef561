package main

// `rubinofs setup claude-code` and `rubinofs setup codex`: merge the
// rubinofs hook into a Claude Code settings file or Codex's hooks.json
// (both take the same "hooks" layout), and with --mcp the MCP server
// (setupmcp.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// claudeHookEvents are the Claude Code hook events `rubinofs hook
// claude-code` handles: PreToolUse snapshots the session's denials,
// PostToolUse (a tool call that succeeded, including a Bash command that
// exited 0) and PostToolUseFailure (one that failed) declare reads and
// report denials.
var claudeHookEvents = []string{"PreToolUse", "PostToolUse", "PostToolUseFailure"}

// claudeHookTimeout is the timeout Claude Code gives the hook, in seconds:
// a bound for a hung mount, never reached by a working one.
const claudeHookTimeout = 30

// claudePromptEvent is the Claude Code hook event at which `rubinofs hook
// claude-code` checkpoints the session's change journal, labelled with the
// prompt (promptCheckpoint): a rewind to it undoes the turn. Claude Code
// takes no matcher for it and adds the hook's stdout to the model's
// context, so the hook prints nothing there.
const claudePromptEvent = "UserPromptSubmit"

// claudePromptHookTimeout is the timeout Claude Code gives the prompt
// hook, in seconds; the hook bounds its own wait well below it
// (promptCheckpointTimeout), so a hung mount never holds the prompt long.
const claudePromptHookTimeout = 10

// claudeSetupEvents are the events `rubinofs setup claude-code` hooks:
// claudeHookEvents and the prompt checkpoint.
var claudeSetupEvents = append(claudeHookEvents[:len(claudeHookEvents):len(claudeHookEvents)], claudePromptEvent)

func setupCommand() *cli.Command {
	return &cli.Command{
		Name:  "setup",
		Usage: "install rubinofs's hooks (and with --mcp its MCP server) into an agent's settings",
		Subcommands: []*cli.Command{{
			Name:  "claude-code",
			Usage: "merge the rubinofs hook into a Claude Code settings file, with a checkpoint at every prompt; --mcp: and `rubinofs mcp` into the project's .mcp.json (idempotent; keeps every other setting)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "settings", Usage: "the settings `FILE` (default: .claude/settings.json at the mount root around the current directory, else in the current directory)"},
				&cli.BoolFlag{Name: "mcp", Usage: "also add the MCP server rubinofs (this executable, `rubinofs mcp`) to .mcp.json beside .claude/"},
				mountFlag(),
			},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return cli.Exit("usage: rubinofs setup claude-code [--settings FILE] [--mcp]", exitUsage)
				}
				root := "."
				mnt, err := findMount(mountFlagValue(c))
				switch {
				case err == nil:
					root = mnt
				case mountFlagValue(c) != "": // a --mount that is none: say so
					return cli.Exit(err.Error(), 1)
				}
				if err := setupClaudeCode(c.App.Writer, root, c.String("settings"), c.Bool("mcp")); err != nil {
					return cli.Exit(err.Error(), 1)
				}
				return nil
			},
		}, {
			Name:  "codex",
			Usage: "merge the rubinofs hook into Codex's hooks.json; --mcp: and `rubinofs mcp` into its config.toml (idempotent; keeps every other hook and setting)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "codex-home", Usage: "Codex's home `DIR` (default: $CODEX_HOME, else ~/.codex)"},
				&cli.BoolFlag{Name: "mcp", Usage: "also add the MCP server rubinofs (this executable, `rubinofs mcp`) to config.toml as [mcp_servers.rubinofs]"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return cli.Exit("usage: rubinofs setup codex [--codex-home DIR] [--mcp]", exitUsage)
				}
				home, err := codexHome(c.String("codex-home"))
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				if err := setupCodex(c.App.Writer, home, c.Bool("mcp")); err != nil {
					return cli.Exit(err.Error(), 1)
				}
				return nil
			},
		}},
	}
}

// codexHome is Codex's home directory: flag when set, else $CODEX_HOME,
// else ~/.codex.
func codexHome(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("CODEX_HOME"); env != "" {
		return env, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding Codex's home: %v (use --codex-home)", err)
	}
	return filepath.Join(h, ".codex"), nil
}

// setupClaudeCode installs rubinofs for Claude Code in the project at
// root: the hooks into settings (default ROOT/.claude/settings.json) and,
// with mcp, the MCP server into ROOT/.mcp.json, approved in settings
// (mergeMCPApproval). It prints what changed to w, and stops at the first
// file it cannot merge (left as it was).
func setupClaudeCode(w io.Writer, root, settings string, mcp bool) error {
	if settings == "" {
		settings = filepath.Join(root, ".claude", "settings.json")
	}
	if err := installHook(w, settings, "claude-code", claudeSetupEvents); err != nil || !mcp {
		return err
	}
	if err := installMCP(w, filepath.Join(root, ".mcp.json"), 0o644, mergeMCPJSON); err != nil {
		return err
	}
	// The approval, in the settings file reported above: said only when
	// it changed it.
	changes, err := setupConfigFile(settings, "", 0o644, mergeMCPApproval)
	for _, ch := range changes {
		fmt.Fprintf(w, "%s: %s\n", settings, ch)
	}
	return err
}

// setupCodex installs rubinofs for Codex in its home directory: the hook
// into HOME/hooks.json and, with mcp, the MCP server into
// HOME/config.toml. Output and errors as setupClaudeCode's.
func setupCodex(w io.Writer, home string, mcp bool) error {
	if err := installHook(w, filepath.Join(home, "hooks.json"), "codex", codexHookEvents); err != nil || !mcp {
		return err
	}
	return installMCP(w, filepath.Join(home, "config.toml"), 0o600, mergeCodexMCP)
}

// codexHookEvents are the Codex hook events `rubinofs hook codex` handles:
// PreToolUse snapshots the session's denials (and reports those of an
// earlier call that got no post event), PostToolUse reports the denials of
// a call that succeeded, Stop reports those of a last call that failed.
// Codex runs no hook after a tool call that failed.
var codexHookEvents = []string{"PreToolUse", "PostToolUse", "Stop"}

// installHook merges `rubinofs hook AGENT` (this executable) as the hook
// of each of events into file and prints what changed to w.
func installHook(w io.Writer, file, agent string, events []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the rubinofs executable: %v", err)
	}
	changes, err := setupHooksFile(file, shq(exe)+" hook "+agent, agent, events)
	if err != nil {
		return err
	}
	printChanges(w, file, changes)
	return nil
}

// installMCP merges `rubinofs mcp` (this executable, by its absolute
// path) into file with merge (setupConfigFile) and prints what changed to
// w; mode is a new file's.
func installMCP(w io.Writer, file string, mode os.FileMode, merge func([]byte, string) ([]byte, []string, error)) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the rubinofs executable: %v", err)
	}
	changes, err := setupConfigFile(file, exe, mode, merge)
	if err != nil {
		return err
	}
	printChanges(w, file, changes)
	return nil
}

// printChanges prints setup's change lines for file, "FILE: CHANGE" each,
// or that it was already set up.
func printChanges(w io.Writer, file string, changes []string) {
	if len(changes) == 0 {
		fmt.Fprintf(w, "%s: already set up, unchanged\n", file)
	}
	for _, ch := range changes {
		fmt.Fprintf(w, "%s: %s\n", file, ch)
	}
}

// shq quotes s for the shell Claude Code runs a hook command with.
func shq(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// setupClaudeSettings merges command as the hook of every claudeHookEvents
// event into the settings file (setupHooksFile).
func setupClaudeSettings(file, command string) ([]string, error) {
	return setupHooksFile(file, command, "claude-code", claudeHookEvents)
}

// setupHooksFile merges command as the hook of each of events into the
// hooks file (mergeHooks) and returns what it changed, one line each
// (none: the file already had it, and is left untouched). A missing file
// (and its directory) is created. The file is replaced atomically (a
// temporary file renamed over it, with its mode kept).
func setupHooksFile(file, command, agent string, events []string) ([]string, error) {
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	merged, changes, err := mergeHooks(old, command, agent, events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(changes) == 0 {
		return nil, nil
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(file); err == nil {
		mode = st.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	return changes, writeAtomic(file, merged, mode)
}

// writeAtomic writes data to a temporary file beside file, syncs it and
// renames it over file: a reader sees the old content or the new, never a
// part.
func writeAtomic(file string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: ENOENT, ignored
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// isRubinoHook reports whether a hook command is `rubinofs hook AGENT`
// (by any path to the executable): setup's own entry, to be updated
// rather than added again.
func isRubinoHook(cmd, agent string) bool {
	f := strings.Fields(cmd)
	if len(f) < 3 || f[len(f)-2] != "hook" || f[len(f)-1] != agent {
		return false
	}
	exe := strings.Trim(strings.Join(f[:len(f)-2], " "), `'"`)
	return filepath.Base(exe) == "rubinofs"
}

// mergeClaudeHooks merges command, `rubinofs hook claude-code`, into a
// Claude Code settings file's JSON (mergeHooks).
func mergeClaudeHooks(settings []byte, command string) ([]byte, []string, error) {
	return mergeHooks(settings, command, "claude-code", claudeHookEvents)
}

// mergeHooks merges command into settings (JSON with a top-level "hooks"
// object in the layout Claude Code and Codex share; empty: none) as
// {"matcher": "*", "hooks": [{"type": "command", "command": command,
// "timeout": claudeHookTimeout}]} under each of events, and returns the new
// JSON (indented) and the changes made; the prompt event gets its own
// entry (hookGroup). An existing `rubinofs hook AGENT`
// entry (isRubinoHook) gets the new command in place, its matcher and
// options left as the user set them, and is never doubled; every other
// key, event and hook is kept as it was (the keys come out sorted:
// encoding/json does not keep their order).
func mergeHooks(settings []byte, command, agent string, events []string) ([]byte, []string, error) {
	doc, hooks, err := jsonObjectAt(settings, "hooks")
	if err != nil {
		return nil, nil, err
	}
	var changes []string
	for _, event := range events {
		groups, ok := hooks[event].([]any)
		if hooks[event] != nil && !ok {
			return nil, nil, fmt.Errorf("hooks.%s is not a list, left as it is", event)
		}
		found := false
		for _, g := range groups {
			group, _ := g.(map[string]any)
			list, _ := group["hooks"].([]any)
			for _, h := range list {
				hook, _ := h.(map[string]any)
				cmd, _ := hook["command"].(string)
				if hook == nil || !isRubinoHook(cmd, agent) {
					continue
				}
				found = true
				if cmd != command { // another path to rubinofs: this one
					hook["command"] = command
					changes = append(changes, fmt.Sprintf("updated the %s hook to %s", event, command))
				}
			}
		}
		if !found {
			groups = append(groups, hookGroup(event, command))
			hooks[event] = groups
			changes = append(changes, addedLine(event, command))
		}
	}
	if len(changes) == 0 {
		return settings, nil, nil
	}
	doc["hooks"] = hooks
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(out, '\n'), changes, nil
}

// hookGroup is the hook entry setup adds under event: matcher "*" and
// claudeHookTimeout, or for the prompt event (claudePromptEvent) no
// matcher (Claude Code takes none there) and claudePromptHookTimeout.
func hookGroup(event, command string) map[string]any {
	if event == claudePromptEvent {
		return map[string]any{"hooks": []any{map[string]any{
			"type": "command", "command": command, "timeout": claudePromptHookTimeout,
		}}}
	}
	return map[string]any{"matcher": "*", "hooks": []any{map[string]any{
		"type": "command", "command": command, "timeout": claudeHookTimeout,
	}}}
}

// addedLine is the change line for a hook added under event: "added the
// EVENT hook: COMMAND", and for the prompt event what it is for.
func addedLine(event, command string) string {
	if event == claudePromptEvent {
		return fmt.Sprintf("added a journal checkpoint at every prompt (%s hook): %s", event, command)
	}
	return fmt.Sprintf("added the %s hook: %s", event, command)
}

// jsonObjectAt decodes settings (a JSON object; empty or null: a new one)
// and returns it with its object under key (a new one, not yet in doc,
// when key is absent). The error, for a document that is no JSON object
// or a key that holds no object, says the file is left as it is.
func jsonObjectAt(settings []byte, key string) (doc, sub map[string]any, err error) {
	doc = map[string]any{}
	if len(bytes.TrimSpace(settings)) > 0 {
		if err := json.Unmarshal(settings, &doc); err != nil {
			return nil, nil, fmt.Errorf("not valid JSON, left as it is: %w", err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
	}
	sub, ok := doc[key].(map[string]any)
	if doc[key] != nil && !ok {
		return nil, nil, fmt.Errorf("%q is not an object, left as it is", key)
	}
	if sub == nil {
		sub = map[string]any{}
	}
	return doc, sub, nil
}
