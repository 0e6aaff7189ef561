package main

// `rubinofs branch diff NAME [PATH...]`: what a branch changed, read from
// its overlay's upper directory against the workspace
// (docs/DESIGN.md#branch-diff).

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/branch"
	"github.com/rubinofs/rubinofs/ctltree"
)

// branchDiffCommand is `rubinofs branch diff [--mount DIR] [--stat] NAME
// [PATH...]`: the branch's changes as `git diff` prints them (binary files
// named), or with --stat one line a path as `git diff --name-status`
// (A, M, D, T). PATHs limit it (each with what is below it), taken as
// `rubinofs diff` takes them: from the current directory inside the mount,
// else from the mount root. Errors are one line: a bad NAME or a PATH
// outside the workspace exits 2; no such branch, an unreadable meta.json,
// status or tree exits 1.
func branchDiffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "show what branch NAME changed in the workspace, as git diff (binary files named)",
		ArgsUsage: "NAME [PATH...]",
		Description: "Reads the branch's overlay upper directory against the workspace: created, changed,\n" +
			"deleted and retyped files and symlinks (a copy-up that changed nothing is not shown).\n" +
			"--stat lists them as git diff --name-status does.",
		Flags: []cli.Flag{mountFlag(),
			&cli.BoolFlag{Name: "stat", Aliases: []string{"name-status"}, Usage: "list the changed paths, one a line: A, M, D or T, a tab, the path"}},
		Action: branchDiff,
	}
}

func branchDiff(c *cli.Context) error {
	const usage = "usage: rubinofs branch diff [--mount DIR] [--stat] NAME [PATH...]"
	if c.NArg() < 1 {
		return cli.Exit(usage, exitUsage)
	}
	name := c.Args().First()
	if !branch.ValidName(name) {
		return cli.Exit(fmt.Sprintf("rubinofs branch diff: bad branch name %q: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit; %s", name, usage), exitUsage)
	}
	mnt, st, err := workspaceOf(c)
	if err != nil {
		return err
	}
	b, err := branch.Open(st.State.Dir, name)
	if errors.Is(err, branch.ErrNotFound) {
		return cli.Exit(fmt.Sprintf("rubinofs branch diff: no branch %s in %s (`rubinofs branch ls` lists them)", name, mnt), 1)
	}
	if err == nil && b.Meta.Workspace == "" {
		err = errors.New(`no "workspace" in its meta.json`)
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs branch diff: branch %s: %v", name, err), 1)
	}
	meta := b.Meta
	paths, err := branchDiffPaths([]string{mnt, meta.Mount, meta.Workspace}, c.Args().Slice()[1:])
	if err != nil {
		return cli.Exit("rubinofs branch diff: "+err.Error(), exitUsage)
	}
	upper := b.Upper()
	changes, err := branch.Changes(upper, b.Lowers()...) // the branch point: its base over the workspace

	if err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs branch diff: branch %s: %v", name, err), 1)
	}
	kept := changes[:0] // the control tree, seen when the workspace is read through an in-place mount
	for _, ch := range changes {
		if ch.Path != ctltree.DirName && !strings.HasPrefix(ch.Path, ctltree.DirName+"/") {
			kept = append(kept, ch)
		}
	}
	out := bufio.NewWriterSize(c.App.Writer, 64<<10)
	if c.Bool("stat") {
		err = branch.WriteNameStatus(out, kept, paths)
	} else {
		err = branch.WriteDiffLayers(out, upper, b.Lowers(), kept, paths)
	}
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs branch diff: branch %s: %v", name, err), 1)
	}
	return nil
}

// branchDiffPaths maps PATH arguments to workspace-relative slash paths
// (nil: every path). roots are the directories the workspace is seen at
// (the mount, as found and as meta.json names it, and the backing
// directory; "" skipped), each also with its symlinks resolved. A
// relative PATH is taken from the current directory when that is under a
// root, else from the workspace root; an absolute one must be under a
// root. A PATH outside them or in the control tree is an error.
func branchDiffPaths(roots []string, args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	var all []string
	for _, r := range roots {
		if r == "" {
			continue
		}
		all = append(all, filepath.Clean(r))
		if e, err := filepath.EvalSymlinks(r); err == nil && e != filepath.Clean(r) {
			all = append(all, e)
		}
	}
	under := func(p string) (string, bool) {
		for _, r := range all {
			if rel, err := filepath.Rel(r, filepath.Clean(p)); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return rel, true
			}
		}
		return "", false
	}
	base := "."
	if wd, err := os.Getwd(); err == nil {
		if rel, ok := under(wd); ok {
			base = rel
		} else if e, err := filepath.EvalSymlinks(wd); err == nil {
			if rel, ok := under(e); ok {
				base = rel
			}
		}
	}
	var out []string
	for _, a := range args {
		rel, ok := "", true
		if filepath.IsAbs(a) {
			rel, ok = under(a)
		} else {
			rel = filepath.Join(base, a)
			ok = rel != ".." && !strings.HasPrefix(rel, "../")
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("%s is outside the workspace (%s)", a, all[0])
		case rel == ".":
			return nil, nil
		case rel == ctltree.DirName || strings.HasPrefix(rel, ctltree.DirName+"/"):
			return nil, fmt.Errorf("%s is in the control tree, which a branch does not hold", a)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}
