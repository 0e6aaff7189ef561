package main

// The MCP server's branch tools (docs/DESIGN.md#mcp-server,
// docs/DESIGN.md#branches): each runs the `rubinofs branch` command of
// the same meaning in this process (cliRun), as the agent's session.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rubinofs/rubinofs/branch"
)

type branchNameInput struct {
	Name string `json:"name" jsonschema:"the branch name: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"`
}

type branchDiffInput struct {
	Name  string   `json:"name" jsonschema:"the branch name, as branch_ls lists it"`
	Stat  bool     `json:"stat,omitempty" jsonschema:"list the changed paths only, one a line: A, M, D or T, a tab, the path"`
	Paths []string `json:"paths,omitempty" jsonschema:"limit to these paths (relative to the working directory, or absolute inside the mount)"`
}

type branchMergeInput struct {
	Name    string `json:"name" jsonschema:"the branch name, as branch_ls lists it"`
	Partial bool   `json:"partial,omitempty" jsonschema:"apply what merges even when other paths conflict (default: a conflict applies nothing)"`
	DryRun  bool   `json:"dry_run,omitempty" jsonschema:"only show the plan, change nothing"`
}

type branchDiscardInput struct {
	Name  string `json:"name" jsonschema:"the branch name, as branch_ls lists it"`
	Force bool   `json:"force,omitempty" jsonschema:"discard even while sessions of the branch are live (their files go away)"`
}

// needBranch checks a branch name argument (branch.ValidName), so that a
// bad one is a tool error naming the rule, never a flag.
func needBranch(name string) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("give the branch name (name); branch_ls lists them")
	}
	if !branch.ValidName(name) {
		return fmt.Errorf("bad branch name %q: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", name)
	}
	return nil
}

// flagIf appends flag to args when on.
func flagIf(args []string, on bool, flag string) []string {
	if on {
		return append(args, flag)
	}
	return args
}

func init() {
	registerMCPTool("branch_new", func(s *mcp.Server, name string) {
		cliTool(s, name, "Make a branch: a copy-on-write view of the workspace with its own guarded mount (needs root). "+
			"Run a task in it with task_spawn's branch, review it with branch_diff, merge it with branch_merge.",
			func(in branchNameInput) ([]string, error) {
				return []string{"branch", "new", "--", in.Name}, needBranch(in.Name)
			})
	})
	registerMCPTool("branch_ls", func(s *mcp.Server, name string) {
		cliTool(s, name, "List the workspace's branches: name, created, changed paths, mounted, mount path.",
			func(noInput) ([]string, error) { return []string{"branch", "ls"}, nil })
	})
	registerMCPTool("branch_diff", func(s *mcp.Server, name string) {
		cliTool(s, name, "Show what a branch changed against the workspace as a unified diff (binary files named), "+
			"or with stat the changed paths only.",
			func(in branchDiffInput) ([]string, error) {
				args := append(flagIf([]string{"branch", "diff"}, in.Stat, "--stat"), "--", in.Name)
				return append(args, in.Paths...), needBranch(in.Name)
			})
	})
	registerMCPTool("branch_merge", func(s *mcp.Server, name string) {
		cliTool(s, name, "Merge a branch's changes into the workspace through the guard, one line a path. A path "+
			"changed in the workspace since the branch read it is a conflict (disjoint text edits are merged 3-way); "+
			"with a conflict nothing is applied unless partial, and the call is an error listing the conflicts. "+
			"dry_run shows the plan only.",
			func(in branchMergeInput) ([]string, error) {
				args := flagIf(flagIf([]string{"branch", "merge"}, in.Partial, "--partial"), in.DryRun, "--dry-run")
				return append(args, "--", in.Name), needBranch(in.Name)
			})
	})
	registerMCPTool("branch_discard", func(s *mcp.Server, name string) {
		cliTool(s, name, "Discard a branch and its changes: unmount it and remove it. Refused while it has live "+
			"sessions, unless force.",
			func(in branchDiscardInput) ([]string, error) {
				args := flagIf([]string{"branch", "discard"}, in.Force, "--force")
				return append(args, "--", in.Name), needBranch(in.Name)
			})
	})
}
