package tasks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rubinofs/rubinofs/branch"
)

// Tasks in a branch (docs/DESIGN.md#branch-tasks): a spec with branch=NAME
// or isolation=branch starts its subagent through `rubinofs run --branch
// NAME` (or `--new-branch NAME`), re-executed as the spawner, so the
// task's process tree sees the branch at the workspace's paths in a mount
// namespace of its own, exactly as a command run with `run --branch` does.

// ErrBranchRefused wraps why a task cannot run in a branch for this
// spawner or this daemon: a spawner that is not root (a branch is an
// overlay mount entered in a mount namespace of its own, CAP_SYS_ADMIN,
// and a task runs as its spawner), a spawner in a container, a daemon
// that does not know the rubinofs executable. Control-file callers see
// EPERM and the reason.
var ErrBranchRefused = errors.New("a task in a branch (isolation=branch, or branch=NAME)")

// ErrNoBranch wraps a spec's branch=NAME that names no branch of the
// workspace, or one whose daemon is not mounted. Control-file callers see
// ENOENT and the reason.
var ErrNoBranch = errors.New("no such branch")

// checkBranch refuses a spec asking for a branch that sp (nil: the
// runner's own process) cannot run in, before anything is reserved. It
// reads only the daemon's own state directory and mount table, never the
// caller's /proc. Errors: ErrBranchRefused, ErrNoBranch.
func (rn *Runner) checkBranch(s Spec, sp *Spawner) error {
	if !s.InBranch() {
		return nil
	}
	uid := uint32(os.Geteuid())
	if sp != nil {
		uid = sp.Uid
	}
	switch {
	case uid != 0:
		return fmt.Errorf("%w needs a root spawner: a branch is an overlay mount entered in a mount namespace of its own (CAP_SYS_ADMIN), and a task runs as its spawner, uid %d; spawn it as root, or without a branch", ErrBranchRefused, uid)
	case sp.Joins():
		return fmt.Errorf("%w cannot be started from a container (%s): spawn it from the daemon's namespaces", ErrBranchRefused, sp.describe())
	case rn.cfg.Rubinofs == "" || rn.cfg.StateDir == "":
		return fmt.Errorf("%w: this daemon knows no rubinofs executable or state directory to run it with (a daemon started by `rubinofs mount` does)", ErrBranchRefused)
	case s.Branch == "":
		return nil
	}
	b, err := branch.Open(rn.cfg.StateDir, s.Branch)
	if err != nil {
		return fmt.Errorf("%w %s of this workspace (%v): make it with `rubinofs branch new %s`, or spawn with isolation=branch for a new one", ErrNoBranch, s.Branch, err, s.Branch)
	}
	if !b.DaemonMounted() {
		return fmt.Errorf("%w: branch %s is not mounted (%s): discard it and make it again", ErrNoBranch, s.Branch, b.Mnt())
	}
	return nil
}

// newBranchName names the branch of task id under isolation=branch:
// task-ID, or task-ID-RUN (the runner's start time) when a branch of that
// name is left from an earlier mount.
func (rn *Runner) newBranchName(id string) string {
	name := SessionName(id)
	if _, err := os.Lstat(filepath.Join(branch.Root(rn.cfg.StateDir), name)); err == nil {
		name += "-" + rn.run
	}
	return name
}

// branchArgv wraps the subagent's argv for task t in a branch: `rubinofs
// run --mount=MOUNT --branch=NAME -- ARGV...` (--new-branch= for
// isolation=branch). Unchanged for a task without a branch.
func (rn *Runner) branchArgv(t Task, mount string, argv []string) []string {
	if t.Branch == "" {
		return argv
	}
	flag := "--branch="
	if t.NewBranch {
		flag = "--new-branch="
	}
	return append([]string{rn.cfg.Rubinofs, "run", "--mount=" + mount, flag + t.Branch, "--"}, argv...)
}

// BranchNote is what a finished task's result and wait say of its branch:
// its name and the commands that show, merge and drop its changes; "" for
// a task without a branch. It looks the branch up in the state directory
// (one stat), so a branch that was never made, or was discarded since,
// is said to be gone.
func (rn *Runner) BranchNote(t Task) string {
	if t.Branch == "" {
		return ""
	}
	if _, err := branch.Open(rn.cfg.StateDir, t.Branch); err != nil {
		return fmt.Sprintf("branch %s: not there (never made, or discarded since)", t.Branch)
	}
	return fmt.Sprintf("branch %[1]s: review with `rubinofs branch diff %[1]s`, merge with `rubinofs branch merge %[1]s`, drop with `rubinofs branch discard %[1]s`", t.Branch)
}

// withBranchNote appends BranchNote(t) to body on a line of its own.
func (rn *Runner) withBranchNote(t Task, body string) string {
	note := rn.BranchNote(t)
	switch {
	case note == "":
		return body
	case body == "":
		return note
	}
	return body + "\n" + note
}
