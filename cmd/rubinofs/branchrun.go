package main

// `rubinofs run --branch NAME -- CMD` (docs/DESIGN.md#branches): CMD and
// its descendants see the branch's guarded mount at the workspace's
// mountpoint (and backing path), in a mount namespace of their own, so
// that no path they use reaches the workspace. A Go process cannot
// unshare its mount namespace once it runs threads, so this command
// re-executes itself in a new one (CLONE_NEWNS at clone time) as `run
// --branch-entered`, which bind-mounts the branch and goes on as a plain
// `run` against the branch daemon.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/branch"
	"github.com/rubinofs/rubinofs/tasks"
)

// runInBranch is the launcher of `run --branch NAME`: it finds the branch,
// re-executes `run` with the same flags in a new mount namespace and
// returns CMD's exit status (128+N for a death by signal N). With
// --new-branch NAME it makes the branch first (makeBranch). Errors: a bad
// name, both flags (exit 2), an unknown or unmounted branch, one that
// cannot be made, not root (exit 1).
func runInBranch(c *cli.Context) error {
	name := c.String("branch")
	if c.IsSet("new-branch") {
		if c.IsSet("branch") {
			return cli.Exit("rubinofs run: give --branch NAME (an existing branch) or --new-branch NAME (made first), not both", exitUsage)
		}
		name = c.String("new-branch")
	}
	if !branch.ValidName(name) {
		return cli.Exit(fmt.Sprintf("rubinofs run: bad branch name %q (`rubinofs branch ls` lists them)", name), exitUsage)
	}
	if os.Geteuid() != 0 {
		return cli.Exit("rubinofs run --branch: a mount namespace of its own needs root (CAP_SYS_ADMIN); run it as root", 1)
	}
	if c.IsSet("new-branch") {
		if _, err := makeBranch(c, name); err != nil { // as `branch new` (docs/DESIGN.md#branch-tasks)
			return err
		}
	}
	mnt, st, err := workspaceOf(c)
	if err != nil {
		return err
	}
	b, err := branch.Open(st.State.Dir, name)
	if errors.Is(err, branch.ErrNotFound) {
		return cli.Exit(fmt.Sprintf("rubinofs run: no branch %s of %s (make it with `rubinofs branch new %s`)", name, mnt, name), 1)
	}
	if err != nil {
		return cli.Exit("rubinofs run: "+err.Error(), 1)
	}
	if !b.DaemonMounted() {
		return cli.Exit(fmt.Sprintf("rubinofs run: branch %s is not mounted (%s): discard it and make it again", name, b.Mnt()), 1)
	}
	self, err := os.Executable()
	if err != nil {
		return cli.Exit(fmt.Sprintf("finding the rubinofs executable: %v", err), 1)
	}
	argv := []string{"run", "--branch-entered=" + b.Mnt(), "--branch-over=" + mnt}
	if filepath.Clean(st.Workspace) != filepath.Clean(mnt) {
		argv = append(argv, "--branch-over="+st.Workspace)
	}
	for _, f := range []string{"session", "cgroup-parent"} {
		if c.IsSet(f) {
			argv = append(argv, "--"+f+"="+c.String(f))
		}
	}
	for _, f := range []string{"harness", "cgroup", "join"} {
		if c.IsSet(f) {
			argv = append(argv, fmt.Sprintf("--%s=%v", f, c.Bool(f)))
		}
	}
	argv = append(append(argv, "--mount="+mnt, "--"), c.Args().Slice()...)
	cmd := exec.Command(self, argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), tasks.EnvBranch+"="+name) // CMD knows it is in a branch
	// Go makes the new namespace's mounts private (MS_REC|MS_PRIVATE on /)
	// before the exec when Unshareflags has CLONE_NEWNS.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	code, err := waitPassingSignals(cmd)
	if err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs run --branch %s: %v", name, err), 1)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// waitPassingSignals starts cmd and waits for it, passing SIGTERM and
// SIGHUP on and ignoring SIGINT and SIGQUIT here (the terminal sends them
// to cmd itself); it returns cmd's exit status, 128+N for a death by
// signal N.
func waitPassingSignals(cmd *exec.Cmd) (int, error) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGTERM || s == syscall.SIGHUP {
					cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

// enterBranch is the first step of the re-executed `run --branch-entered
// MNT`: in the process's own mount namespace (it refuses to run in its
// parent's, where the mounts would reach every process), it bind-mounts
// the branch daemon's mountpoint mnt over each of overs (the workspace's
// mountpoint and backing path) and enters the working directory again, so
// that it resolves in the branch.
func enterBranch(mnt string, overs []string) error {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	parent, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()))
	if err1 != nil || err2 != nil || self == parent {
		return cli.Exit("rubinofs run: --branch-entered is internal to `rubinofs run --branch` (it needs a mount namespace of its own)", exitUsage)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs run --branch: the working directory: %v", err), 1)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs run --branch: making the mounts private: %v", err), 1)
	}
	for _, o := range overs {
		if err := unix.Mount(mnt, o, "", unix.MS_BIND, ""); err != nil {
			return cli.Exit(fmt.Sprintf("rubinofs run --branch: binding %s over %s: %v", mnt, o, err), 1)
		}
	}
	if err := os.Chdir(cwd); err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs run --branch: the working directory %s is not in the branch: %v", cwd, err), 1)
	}
	return nil
}
