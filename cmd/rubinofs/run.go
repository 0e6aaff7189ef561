package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run CMD as a new guard session of the mount (its own read tracker)",
		ArgsUsage: "-- CMD [ARGS...]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "session", Usage: "session `NAME` (default: a generated id)"},
			&cli.BoolFlag{Name: "harness", Usage: "CMD is an agent harness (claude, codex...): its own reads do not count, its children's do, and it declares what its model read in .rubino/self/ctl"},
			mountFlag(),
			&cli.StringFlag{Name: "branch", Usage: "run CMD in branch `NAME` (rubinofs branch new): it and its descendants see the branch at the workspace's paths, in a mount namespace of their own (needs root)"},
			&cli.StringFlag{Name: "new-branch", Usage: "make branch `NAME` first (as `rubinofs branch new NAME` does), then run CMD in it as --branch does (needs root)"},
			&cli.StringFlag{Name: "branch-entered", Hidden: true}, // branchrun.go: the re-executed child, in its namespace
			&cli.StringSliceFlag{Name: "branch-over", Hidden: true},
		}, runCgroupFlags()...), // session.go: --cgroup, --cgroup-parent, --join
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("usage: rubinofs run [--harness] [--session NAME [--join]] [--cgroup [--cgroup-parent PATH]] [--branch NAME | --new-branch NAME] [--mount DIR] -- CMD [ARGS...]", 2)
			}
			if c.IsSet("branch") || c.IsSet("new-branch") {
				return runInBranch(c) // branchrun.go: re-executes this command in a namespace of its own
			}
			if c.IsSet("branch-entered") {
				if err := enterBranch(c.String("branch-entered"), c.StringSlice("branch-over")); err != nil {
					return err
				}
			}
			mnt, err := mountOf(c)
			if err != nil {
				return err
			}
			args := c.Args().Slice()
			path, err := exec.LookPath(args[0])
			if err != nil {
				return cli.Exit(err.Error(), 127)
			}
			// Register this very pid as the session root, then exec: the pid
			// is kept and no helper process stays around.
			// No pid=: the daemon takes the writer's pid from the FUSE
			// request, which the kernel translates into the daemon's pid
			// namespace; os.Getpid() is wrong inside a container's.
			// With --cgroup, the process moves into its new cgroup first;
			// with --join --cgroup into the session's cgroup after joining
			// (session.go).
			spec, undo, after, err := runSessionSpec(c, mnt)
			if err != nil {
				return err
			}
			spec += "cmd=" + strings.Join(args, " ")
			id, err := cloneCtl(mnt, "sessions/clone", []byte(spec+"\n"))
			if err != nil {
				undo()
				return cli.Exit(fmt.Sprintf("registering the session: %v", err), 1)
			}
			if err := after(); err != nil {
				return err
			}
			env := append(os.Environ(), "RUBINO_SESSION="+id, "RUBINO_MOUNT="+mnt)
			// The root adopts the orphans of its tree (a child subreaper;
			// the attribute survives the exec): a descendant that
			// double-forks or calls setsid stays below the root, in the
			// session, rather than leave it (docs/DESIGN.md#sessions).
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				fmt.Fprintf(os.Stderr, "rubinofs run: PR_SET_CHILD_SUBREAPER: %v (daemonised descendants will leave the session)\n", err)
			}
			if err := syscall.Exec(path, args, env); err != nil {
				return cli.Exit(fmt.Sprintf("exec %s: %v", args[0], err), 126)
			}
			return nil
		},
	}
}
