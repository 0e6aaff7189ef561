package main

// The `rubinofs hook` command: reads the event, finds the mount, and acts
// (hook.go has the event's format and the pure parts).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/urfave/cli/v2"
)

func hookCommand() *cli.Command {
	return &cli.Command{
		Name:  "hook",
		Usage: "an agent's hook: tell the guard what the model read, and the model why a write was refused",
		Subcommands: []*cli.Command{
			hookSubcommand("claude-code", "Claude Code's PreToolUse/PostToolUse/PostToolUseFailure hook (one JSON event on stdin)", runClaudeHook),
			hookSubcommand("codex", "Codex's PreToolUse/PostToolUse hook (one JSON event on stdin)", runCodexHook),
		},
	}
}

// hookSubcommand is `rubinofs hook NAME`, which runs run on the event. The
// hook never fails the agent's tool call: its own errors go to stderr
// (Claude Code shows them to the user in its debug output, never to the
// model) with exit 0.
func hookSubcommand(name, usage string, run func(stdin io.Reader, stdout io.Writer, mountFlag string) error) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: usage,
		Flags: []cli.Flag{mountFlag()},
		Action: func(c *cli.Context) error {
			if err := run(c.App.Reader, c.App.Writer, mountFlagValue(c)); err != nil {
				fmt.Fprintln(c.App.ErrWriter, "rubinofs hook "+name+":", err)
			}
			return nil
		},
	}
}

// runClaudeHook handles one Claude Code hook event from stdin, writing its
// output (if any) to stdout. An error is the hook's own (no mount, a
// control file that failed); the tool call goes on regardless.
func runClaudeHook(stdin io.Reader, stdout io.Writer, mountFlag string) error {
	ev, err := parseHookEvent(stdin)
	if err != nil {
		return err
	}
	if ev.HookEventName == claudePromptEvent {
		return promptCheckpoint(mountFlag, ev)
	}
	mnt, err := hookMount(mountFlag, ev.Cwd)
	if err != nil {
		return err
	}
	state := filepath.Join(hookStateDir(ev.SessionID), safeName(ev.ToolUseID)+".json")
	switch ev.HookEventName {
	case "PreToolUse":
		ds, err := sessionDenials(mnt)
		if err != nil {
			return err
		}
		return saveSnapshot(state, snapshotOf(ds))
	case "PostToolUse", "PostToolUseFailure":
		var errs []error
		if ro, ok := ev.readOf(); ok && ro.Whole {
			errs = append(errs, declareRead(mnt, ro))
		}
		if path := ev.failedEdit(); path != "" && inMount(mnt, path) {
			if err := writeCtl(mnt, "self/ctl", []byte("edit-failed "+ctlPath(path)+"\n")); err != nil {
				errs = append(errs, fmt.Errorf("declaring the failed edit of %s: %w", path, ctlHint(err)))
			}
		}
		errs = append(errs, reportDenials(mnt, ev.HookEventName, state, stdout))
		return errors.Join(errs...)
	}
	return nil // an event the hook has nothing to do for
}

// reportDenials writes the hook output that tells the model of the
// denials logged since PreToolUse's snapshot in state, and removes it.
// Without a snapshot (PreToolUse not hooked, or its state lost) it reports
// nothing: it cannot tell this call's denials from older ones.
func reportDenials(mnt, event, state string, stdout io.Writer) error {
	raw, err := os.ReadFile(state)
	if err != nil {
		return fmt.Errorf("no PreToolUse snapshot of the denials (%w): is PreToolUse hooked too? (rubinofs setup AGENT)", err)
	}
	os.Remove(state)
	var snap denialSnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		return fmt.Errorf("%s: %w", state, err)
	}
	ds, err := sessionDenials(mnt)
	if err != nil {
		return err
	}
	if ctx := denialContext(newSince(ds, snap)); ctx != "" {
		_, err := stdout.Write(hookOutput(event, ctx))
		return err
	}
	return nil
}

// declareRead tells the guard that the model was shown the whole of
// ro.Path: `read PATH` through .rubino/self/ctl records the bytes on disk
// now; when those are not the bytes the model was shown (the file changed
// between the tool's read and this hook, or Claude Code rendered it in a
// way shownHashes does not undo), `read PATH HASH` records what the model
// saw instead, so the next write finds it stale. A file outside the mount
// is none of the guard's business.
func declareRead(mnt string, ro readOutcome) error {
	if !inMount(mnt, ro.Path) {
		return nil
	}
	rel, _ := filepath.Rel(mnt, filepath.Clean(ro.Path))
	if err := writeCtl(mnt, "self/ctl", []byte("read "+ctlPath(ro.Path)+"\n")); err != nil {
		return fmt.Errorf("declaring the read of %s: %w", ro.Path, ctlHint(err))
	}
	tracked, err := readCtl(mnt, "self/tracked")
	if err == nil && slices.Contains(shownHashes(ro.Content), trackedHash(tracked, rel)) {
		return nil
	}
	shown := shownHashes(ro.Content)[0]
	if err := writeCtl(mnt, "self/ctl", []byte("read "+ctlPath(ro.Path)+" "+shown+"\n")); err != nil {
		return fmt.Errorf("declaring the read of %s as %s: %w", ro.Path, shown, err)
	}
	return nil
}

// ctlPath is path as a self/ctl command takes it: as it is, or as a Go
// quoted string when it holds white space or starts with a quote (the
// command's fields are separated by white space).
func ctlPath(path string) string {
	if strings.ContainsAny(path, " \t\n\r\v\f") || strings.HasPrefix(path, `"`) {
		return strconv.Quote(path)
	}
	return path
}

// ctlHint explains a failure to open .rubino/self/ctl: a mount served by
// a rubinofs older than this one has no such file. Other errors (a
// command the control tree refused, with its reason) pass unchanged.
func ctlHint(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "open" && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (this mount takes no read declarations: its rubinofs is older than this one; remount with this version)", err)
	}
	return err
}

// inMount reports whether the absolute path is inside the mount mnt.
func inMount(mnt, path string) bool {
	rel, err := filepath.Rel(mnt, filepath.Clean(path))
	return err == nil && filepath.IsAbs(path) && rel != ".." && !strings.HasPrefix(rel, "../")
}

// trackedHash returns the hash .rubino/self/tracked (STATE\tHASH\tPATH
// lines, PATH relative to the mount root, Go-quoted when it holds a
// control or non-UTF-8 byte or starts with a double quote) lists for rel;
// "" when none.
func trackedHash(tracked []byte, rel string) string {
	for _, line := range strings.Split(string(tracked), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			continue
		}
		p := f[2]
		if strings.HasPrefix(p, `"`) {
			if u, err := strconv.Unquote(p); err == nil {
				p = u
			}
		}
		if p == rel {
			return f[1]
		}
	}
	return ""
}

// readHookEvent parses the event on stdin and finds the mount it is about
// (hookMount).
func readHookEvent(stdin io.Reader, mountFlag string) (*hookEvent, string, error) {
	ev, err := parseHookEvent(stdin)
	if err != nil {
		return nil, "", err
	}
	mnt, err := hookMount(mountFlag, ev.Cwd)
	if err != nil {
		return nil, "", err
	}
	return ev, mnt, nil
}

// hookMount is the mount the hook works on: --mount, else $RUBINO_MOUNT
// or the mount around the current directory (findMount), else the mount
// around the event's cwd.
func hookMount(flag, cwd string) (string, error) {
	mnt, err := findMount(flag)
	if err == nil || flag != "" || cwd == "" {
		return mnt, err
	}
	if found := nearestMount(ancestors(filepath.Clean(cwd))); found != "" {
		return found, nil
	}
	return "", err
}

// sessionDenials reads and parses the session's denial log
// (.rubino/self/denials, oldest first).
func sessionDenials(mnt string) ([]guard.Denial, error) {
	b, err := readCtl(mnt, "self/denials")
	if err != nil {
		return nil, fmt.Errorf("reading the session's denials: %w", err)
	}
	return parseDenials(b), nil
}

// saveSnapshot writes the PreToolUse snapshot snap to the file state,
// creating its directory (mode 0700: the state is the user's).
func saveSnapshot(state string, snap denialSnapshot) error {
	b, _ := json.Marshal(snap)
	if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
		return err
	}
	return os.WriteFile(state, b, 0o600)
}
