package main

// Helpers for subcommands that work through the control files. Every
// subcommand after `mount` uses only these, so it works anywhere the mount is
// visible: on the host, or inside a container that sees only the mount.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/ctltree"
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
	if flag != "" {
		abs, err := filepath.Abs(flag)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(filepath.Join(abs, ctltree.DirName, "status")); err != nil {
			return "", fmt.Errorf("%s is not a rubinofs mount (no %s/status): %w", abs, ctltree.DirName, err)
		}
		return abs, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, ctltree.DirName, "status")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside a rubinofs mount: give the mount with --mount DIR, or run this inside one")
		}
		dir = parent
	}
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
