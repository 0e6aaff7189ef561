package main

import "github.com/urfave/cli/v2"

// branchDiffCommand is `rubinofs branch diff`, not built yet: a stub that
// says so until its own file replaces this one.
func branchDiffCommand() *cli.Command {
	return &cli.Command{
		Name:   "diff",
		Usage:  "show a branch's changes (not built yet)",
		Hidden: true,
		Action: func(*cli.Context) error {
			return cli.Exit("rubinofs branch diff: not built yet", 1)
		},
	}
}
