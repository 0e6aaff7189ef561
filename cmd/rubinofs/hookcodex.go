package main

// `rubinofs hook codex`: Codex CLI's command hook for a rubinofs mount.
// Codex runs it on PreToolUse, PostToolUse and Stop with one JSON event on
// stdin,
// in the layout Claude Code's hooks use (session_id, hook_event_name,
// tool_name, tool_use_id, cwd, tool_input, tool_response), and takes the
// same {"hookSpecificOutput": {"hookEventName", "additionalContext"}} on
// stdout: the context reaches the model as a developer message. Its one
// job is to tell the model why a write was refused during a tool call.
// It declares no reads: Codex's model reads files through shell commands,
// children of the harness, and those reads count by themselves.
//
// Codex runs PostToolUse only after a tool call that succeeded (an
// exec_command whatever its exit code, an apply_patch that applied).
// After a failed call (an apply_patch the guard refused) no post event
// comes, and the call's PreToolUse snapshot stays behind: the next
// PreToolUse of the same Codex session reports the denials logged since
// it, so the model learns why one tool call later; when the model ends its
// turn instead, Stop reports them by blocking the stop once.

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// runCodexHook handles one Codex hook event from stdin, writing its output
// (if any) to stdout. An error is the hook's own (no mount, a control file
// that failed); the tool call goes on regardless.
func runCodexHook(stdin io.Reader, stdout io.Writer, mountFlag string) error {
	ev, mnt, err := readHookEvent(stdin, mountFlag)
	if err != nil {
		return err
	}
	dir := hookStateDir(ev.SessionID)
	state := filepath.Join(dir, safeName(ev.ToolUseID)+".json")
	switch ev.HookEventName {
	case "PreToolUse":
		ds, err := sessionDenials(mnt)
		if err != nil {
			return err
		}
		var errs []error
		if snap, ok, err := takeLeftSnapshots(dir, state); err != nil {
			errs = append(errs, err)
		} else if ok {
			if ctx := denialContextFor(newSince(ds, snap), "the previous tool call"); ctx != "" {
				_, err := stdout.Write(hookOutput(ev.HookEventName, ctx))
				errs = append(errs, err)
			}
		}
		return errors.Join(append(errs, saveSnapshot(state, snapshotOf(ds)))...)
	case "PostToolUse":
		return reportDenials(mnt, ev.HookEventName, state, stdout)
	case "Stop":
		// The model ended its turn. A note left behind is a last call
		// that failed (no PostToolUse): its refusals are reported by
		// blocking the stop once, with them as the reason, which Codex
		// hands the model to go on with. A second Stop finds no note.
		snap, ok, err := takeLeftSnapshots(dir, "")
		if err != nil || !ok {
			return err
		}
		ds, err := sessionDenials(mnt)
		if err != nil {
			return err
		}
		if ctx := denialContextFor(newSince(ds, snap), "your last tool call"); ctx != "" {
			b, _ := json.Marshal(map[string]string{"decision": "block", "reason": ctx})
			_, err = stdout.Write(append(b, '\n'))
			return err
		}
	}
	return nil // an event the hook has nothing to do for
}

// takeLeftSnapshots removes the snapshots in dir other than keep (those
// of earlier tool calls that got no PostToolUse) and returns the oldest
// of them; ok is false when there were none. Denials since it are the
// ones no post event reported. Codex may run tool calls in parallel: a
// snapshot of a call still running is taken too, and its denials are then
// reported here rather than by its own PostToolUse (which finds no
// snapshot and reports nothing).
func takeLeftSnapshots(dir, keep string) (snap denialSnapshot, ok bool, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return denialSnapshot{}, false, nil
	}
	if err != nil {
		return denialSnapshot{}, false, err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if p == keep || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		raw, rerr := os.ReadFile(p)
		os.Remove(p)
		var s denialSnapshot
		if rerr != nil || json.Unmarshal(raw, &s) != nil {
			continue // removed by a concurrent hook, or not ours
		}
		if !ok || s.Last.Before(snap.Last) {
			snap, ok = s, true
		}
	}
	return snap, ok, nil
}
