package main

// Helpers for subcommands that work through the control files. Every
// subcommand after `mount` uses only these, so it works anywhere the mount is
// visible: on the host, or inside a container that sees only the mount.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/procfs"
)

// findMount returns the mount root to use: flag when set (it must hold a
// control tree), otherwise $RUBINO_MOUNT when it names a mount (set by
// `rubinofs run` and for tasks), otherwise the nearest ancestor of the
// current directory that holds .rubino/status.
func findMount(flag string) (string, error) {
	if flag == "" {
		if env := os.Getenv("RUBINO_MOUNT"); env != "" {
			if mnt, err := findMount(env); err == nil {
				return mnt, nil
			}
		}
	}
	var dirs []string // where to look for a control tree, in order
	if flag != "" {
		abs, err := filepath.Abs(flag)
		if err != nil {
			return "", err
		}
		dirs = []string{abs}
	} else {
		dir, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dirs = ancestors(dir)
	}
	found, failure := "", error(nil)
	probeStats(statusPaths(dirs), func(i int, err error) bool {
		switch {
		case err == nil:
			found = dirs[i]
		case errors.Is(err, errNoAnswer):
			failure = noAnswer(dirs[i])
		case flag != "" && errors.Is(err, fs.ErrPermission) && mountTypeOf(dirs[i]) == "fuse.rubinofs":
			failure = fmt.Errorf("%s is another user's rubinofs mount, made without -o allow_other: only that user may use it (it can be mounted again with -o allow_other): %w", dirs[i], err)
		case flag != "":
			failure = fmt.Errorf("%s is not a rubinofs mount (no %s/status): %w", dirs[i], ctltree.DirName, err)
		default:
			return true // not here: the directory above
		}
		return false
	})
	switch {
	case found != "":
		return found, nil
	case failure != nil:
		return "", failure
	}
	return "", errors.New("not inside a rubinofs mount: give the mount with --mount DIR, or run this inside one")
}

// ancestors returns dir and every directory above it, nearest first.
func ancestors(dir string) []string {
	var dirs []string
	for {
		dirs = append(dirs, dir)
		parent := filepath.Dir(dir)
		if parent == dir {
			return dirs
		}
		dir = parent
	}
}

// statusPaths returns the control tree's status file in each of dirs.
func statusPaths(dirs []string) []string {
	paths := make([]string, len(dirs))
	for i, d := range dirs {
		paths[i] = filepath.Join(d, ctltree.DirName, "status")
	}
	return paths
}

// nearestMount returns the first of dirs that holds a control tree
// (.rubino/status), stat'ed by a probe child in order (probeStats); ""
// when none does, or when a daemon on the way did not answer.
func nearestMount(dirs []string) string {
	found := ""
	probeStats(statusPaths(dirs), func(i int, err error) bool {
		if err == nil {
			found = dirs[i]
		}
		return err != nil && !errors.Is(err, errNoAnswer) // on past a directory without one
	})
	return found
}

// mountTypeOf is the file system type of the mount at dir, from
// /proc/self/mountinfo (no request to the mount), "" when dir is none.
func mountTypeOf(dir string) string {
	t, _ := procfs.MountType(dir)
	return t
}

// mountProbeTimeout bounds findMount's stat of a control tree: a mount
// whose daemon has not answered by then is stopped (SIGSTOP, a frozen
// cgroup) or stuck, and the command says so instead of waiting for it.
const mountProbeTimeout = 10 * time.Second

// errNoAnswer is probeStats' error for a stat not answered within
// mountProbeTimeout.
var errNoAnswer = errors.New("no answer")

// noAnswer is findMount's error for the mount at dir whose daemon did not
// answer, with what to do.
func noAnswer(dir string) error {
	return fmt.Errorf("%s: the mount's daemon has not answered for %v (stopped or stuck): continue a stopped one with `kill -CONT PID`, or detach the mount with `rubinofs unmount --lazy %s`", dir, mountProbeTimeout, dir)
}

// mountFlag is the --mount flag of the subcommands that work through the
// control files.
func mountFlag() cli.Flag {
	return &cli.StringFlag{Name: "mount", Usage: "the mount root `DIR` (default: $RUBINO_MOUNT, else the rubinofs mount around the current directory)"}
}

// mountOf resolves --mount (findMount) for a subcommand, as a CLI exit
// error (status 1) when there is no mount. --mount counts wherever it was
// given on the command path: `rubinofs agents --mount DIR ls` and
// `rubinofs agents ls --mount DIR` are the same (the innermost wins when
// both are given). urfave/cli would read only the subcommand's own, unset,
// flag.
func mountOf(c *cli.Context) (string, error) {
	mnt, err := findMount(mountFlagValue(c))
	if err != nil {
		return "", cli.Exit(err.Error(), 1)
	}
	return mnt, nil
}

// readMountCtl reads the control file rel (readCtl) of the mount c names
// (mountOf); a failure is a cli.Exit with status 1.
func readMountCtl(c *cli.Context, rel string) ([]byte, error) {
	mnt, err := mountOf(c)
	if err != nil {
		return nil, err
	}
	b, err := readCtl(mnt, rel)
	if err != nil {
		return nil, cli.Exit(err.Error(), 1)
	}
	return b, nil
}

// mountFlagValue is the --mount given on c's command path, innermost
// first; "" when none was.
func mountFlagValue(c *cli.Context) string {
	for _, ctx := range c.Lineage() {
		if ctx.Command == nil {
			continue // the bare context above the app's: no flags
		}
		for _, n := range ctx.LocalFlagNames() { // the flags given at this level
			if n == "mount" {
				return ctx.String("mount")
			}
		}
	}
	return ""
}
