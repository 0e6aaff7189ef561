package main

// `rubinofs mcp`: a stdio Model Context Protocol server
// (docs/DESIGN.md#mcp-server). It is as thin as the CLI: every tool runs
// the CLI command of the same meaning in this process, which works
// through the control files of the mount, so the server acts in the
// session of the process that spawned it (the agent) and can do nothing
// that session could not do through the files. The protocol is the
// official Go SDK's (modelcontextprotocol/go-sdk).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/ctltree"
)

// mcpMaxText bounds the text of one tool result or resource, in bytes: a
// diff of a whole tree must not flood the model's context. Past it the
// text is cut at a line end and says how much was left out.
const mcpMaxText = 64 << 10

// mcpTool is one tool of the server: its name, and the function that adds
// it to a server.
type mcpTool struct {
	name string
	add  func(s *mcp.Server, name string)
}

// mcpTools lists every tool in the order tools/list shows them. Tools
// outside this file (the read tool) add themselves in init.
var mcpTools []mcpTool

// registerMCPTool adds a tool to mcpTools. Called from init only.
func registerMCPTool(name string, add func(s *mcp.Server, name string)) {
	mcpTools = append(mcpTools, mcpTool{name: name, add: add})
}

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve the mount's guard, journal and task registry as an MCP server on stdin and stdout",
		Description: "A Model Context Protocol server over stdio, for an agent to spawn (rubinofs setup claude-code --mcp,\n" +
			"rubinofs setup codex --mcp, docs/agents.md for others). Each tool does what the CLI command of the\n" +
			"same meaning does, through the control files of the mount around the working directory (or --mount),\n" +
			"in the caller's session. A failure is a tool result with isError and the daemon's reason.\n" +
			"Tools: " + strings.Join(mcpToolNames(), ", ") + ".",
		Flags: []cli.Flag{mountFlag(),
			&cli.StringFlag{Name: "tools", Usage: "serve only the tools in the comma-separated `LIST` (default: all)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("usage: rubinofs mcp [--mount DIR] [--tools a,b,...]", exitUsage)
			}
			allow, err := parseMCPTools(c.String("tools"))
			if err != nil {
				return cli.Exit("rubinofs mcp: "+err.Error(), exitUsage)
			}
			// Every in-process command finds the mount through
			// $RUBINO_MOUNT (findMount), as commands run by `rubinofs
			// run` do. Without --mount and outside a mount the server
			// still serves: each tool then answers why it cannot act
			// (an agent configured for a project that is not mounted
			// learns it from the first call), and a mount made later
			// around the working directory is found by the next call.
			mnt, err := findMount(mountFlagValue(c))
			switch {
			case err != nil && mountFlagValue(c) != "":
				return cli.Exit("rubinofs mcp: "+err.Error(), 1)
			case err != nil:
				fmt.Fprintln(c.App.ErrWriter, "rubinofs mcp: "+err.Error()+" (serving anyway: every tool will say so)")
			default:
				os.Setenv("RUBINO_MOUNT", mnt)
			}
			s := newMCPServer(allow)
			if err := s.Run(c.Context, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
				return cli.Exit("rubinofs mcp: "+err.Error(), 1)
			}
			return nil
		},
	}
}

// mcpToolNames is every tool's name, in order.
func mcpToolNames() []string {
	var names []string
	for _, t := range mcpTools {
		names = append(names, t.name)
	}
	return names
}

// parseMCPTools checks --tools: nil (every tool) when empty, else the
// set of names given, each of which must be a tool.
func parseMCPTools(list string) (map[string]bool, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	known := mcpToolNames()
	allow := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("--tools: no tool %q (the tools: %s)", n, strings.Join(known, ", "))
		}
		allow[n] = true
	}
	if len(allow) == 0 {
		return nil, errors.New("--tools: no tool named (give a comma-separated list, or leave it out for all)")
	}
	return allow, nil
}

// newMCPServer returns the server with the tools allow names (nil: all),
// and the read-only resources.
func newMCPServer(allow map[string]bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "rubinofs", Title: "rubinofs", Version: versionString()},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	for _, t := range mcpTools {
		if allow == nil || allow[t.name] {
			t.add(s, t.name)
		}
	}
	addMCPResources(s, allow)
	return s
}

// mcpInstructions is what the server tells the client about itself.
const mcpInstructions = "rubinofs guards this workspace: a write to an existing file you have not read, or that " +
	"changed since you read it, is refused (EACCES). `why` says why and what to do. `checkpoint` marks a point " +
	"in your change journal; `changes`, `diff` and `rewind` show and undo what you changed since (shell commands " +
	"included). `task_*` run background subagents, in a branch of their own if asked; `branch_*` make, " +
	"review, merge and discard branches. `read` reads a file as the guard counts it."

// cliRun runs the CLI command args (without the program name) in this
// process and returns what it printed. A failure is an error whose text
// is what it printed, its error output and its error line: the tool
// result then shows the model the daemon's reason.
func cliRun(ctx context.Context, args ...string) (string, error) {
	app := newApp()
	usageErrors(app)
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter, app.Reader = &out, &errOut, strings.NewReader("")
	err := app.RunContext(ctx, append([]string{"rubinofs"}, args...))
	text := clipText(out.String())
	if err == nil {
		return text, nil
	}
	msg := strings.TrimSpace(strings.TrimSpace(text) + "\n" + strings.TrimSpace(errOut.String()) + "\n" + errorLine(err))
	if msg == "" {
		msg = "rubinofs " + strings.Join(args, " ") + ": failed"
	}
	return "", errors.New(clipText(msg))
}

// clipText cuts s to mcpMaxText bytes at a line end, saying how much
// was left out.
func clipText(s string) string {
	if len(s) <= mcpMaxText {
		return s
	}
	cut := strings.LastIndexByte(s[:mcpMaxText], '\n') + 1
	if cut == 0 {
		cut = mcpMaxText
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes left out: narrow the request, e.g. with paths)\n", len(s)-cut)
}

// textResult is a tool result holding text.
func textResult(text string) *mcp.CallToolResult {
	if text == "" {
		text = "(nothing)"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// cliTool adds a tool named name that runs the CLI command argv(in)
// returns; a bad input is an error from argv.
func cliTool[In any](s *mcp.Server, name, desc string, argv func(In) ([]string, error)) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			args, err := argv(in)
			if err != nil {
				return nil, nil, err
			}
			text, err := cliRun(ctx, args...)
			if err != nil {
				return nil, nil, errors.New(asToolText(err.Error()))
			}
			return textResult(asToolText(text)), nil, nil
		})
}

// asToolText rewrites the CLI's advice into the tools' terms: the undo of
// a rewind is the rewind tool's call, not a command line.
func asToolText(s string) string {
	return undoLineRE.ReplaceAllString(s, "undo with: the rewind tool, to=$1")
}

var undoLineRE = regexp.MustCompile(`undo with: rubinofs rewind --to (cp[0-9]+)`)

type noInput struct{}

type checkpointInput struct {
	Label string `json:"label,omitempty" jsonschema:"a few words saying what is about to be done (shown by checkpoints)"`
}

type sinceInput struct {
	Since string `json:"since,omitempty" jsonschema:"checkpoint id such as cp000003 (default: the session start, cp000000)"`
}

type diffInput struct {
	Since string   `json:"since,omitempty" jsonschema:"checkpoint id such as cp000003 (default: the session start, cp000000)"`
	Paths []string `json:"paths,omitempty" jsonschema:"limit to these paths (relative to the working directory, or absolute inside the mount)"`
}

type rewindInput struct {
	To     string   `json:"to" jsonschema:"checkpoint id to return to, such as cp000003 (cp000000: the session start)"`
	Paths  []string `json:"paths,omitempty" jsonschema:"rewind only these paths (default: every path changed since)"`
	DryRun bool     `json:"dry_run,omitempty" jsonschema:"only show the plan, change nothing"`
	Force  bool     `json:"force,omitempty" jsonschema:"also apply steps that conflict with changes made by others since (overwrites them)"`
}

type taskSpawnInput struct {
	Prompt    string `json:"prompt" jsonschema:"what the subagent is to do (for subagent sh: a shell command)"`
	Subagent  string `json:"subagent,omitempty" jsonschema:"the subagent type (default sh: runs the prompt as a shell command)"`
	Branch    string `json:"branch,omitempty" jsonschema:"run the task in this existing branch (branch_new): it sees the branch at the workspace's paths (needs root)"`
	Isolation string `json:"isolation,omitempty" jsonschema:"branch: run the task in a new branch of its own, named task-ID (needs root); none (the default): in the workspace"`
}

type taskIDInput struct {
	ID string `json:"id" jsonschema:"the task id, as task_spawn or task_list gave it"`
}

type taskReplyInput struct {
	ID   string `json:"id" jsonschema:"the task id"`
	Text string `json:"text" jsonschema:"the answer to the task's pending question"`
}

type taskApproveInput struct {
	ID       string `json:"id" jsonschema:"the task id"`
	Decision string `json:"decision" jsonschema:"yes or no, optionally followed by a note"`
}

// withPaths appends "--" and paths to args when paths are given.
func withPaths(args, paths []string) []string {
	if len(paths) == 0 {
		return args
	}
	return append(append(args, "--"), paths...)
}

// needID checks a task id argument.
func needID(id string) error {
	if strings.TrimSpace(id) == "" {
		return errors.New("give the task id (id), as task_spawn or task_list gave it")
	}
	if strings.ContainsAny(id, "/\x00") || strings.HasPrefix(id, "-") {
		return fmt.Errorf("%q is not a task id (task_list lists them)", id)
	}
	return nil
}

func init() {
	registerMCPTool("status", func(s *mcp.Server, name string) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "The mount's state (guard mode, counts of reads, writes and " +
			"refusals), and your session: its name, the files it has read and its refusals."},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
				text, err := statusText()
				if err != nil {
					return nil, nil, err
				}
				return textResult(text), nil, nil
			})
	})
	registerMCPTool("why", func(s *mcp.Server, name string) {
		cliTool(s, name, "Your session's recent refused writes, newest last: path, operation, reason and what to do "+
			"(usually: read the file, then retry the write).",
			func(noInput) ([]string, error) { return []string{"denials"}, nil })
	})
	registerMCPTool("checkpoint", func(s *mcp.Server, name string) {
		cliTool(s, name, "Mark a checkpoint in your session's change journal and return its id; rewind to it later "+
			"undoes everything changed since, shell commands included.",
			func(in checkpointInput) ([]string, error) {
				args := []string{"checkpoint"}
				if l := strings.TrimSpace(in.Label); l != "" {
					args = append(args, "--", l)
				}
				return args, nil
			})
	})
	registerMCPTool("checkpoints", func(s *mcp.Server, name string) {
		cliTool(s, name, "List your session's checkpoints, oldest first: id, time, changes and paths since, label.",
			func(noInput) ([]string, error) { return []string{"checkpoints"}, nil })
	})
	registerMCPTool("changes", func(s *mcp.Server, name string) {
		cliTool(s, name, "List the paths your session changed since a checkpoint, as git status --short "+
			"(M modified, A added, D deleted, R renamed), with short content hashes before..after.",
			func(in sinceInput) ([]string, error) { return sinceArgs("changes", in.Since) })
	})
	registerMCPTool("diff", func(s *mcp.Server, name string) {
		cliTool(s, name, "Show what your session changed since a checkpoint as a unified diff (binary files named).",
			func(in diffInput) ([]string, error) {
				args, err := sinceArgs("diff", in.Since)
				return withPaths(args, in.Paths), err
			})
	})
	registerMCPTool("rewind", func(s *mcp.Server, name string) {
		cliTool(s, name, "Return every path your session changed since a checkpoint (or only paths) to its state then: "+
			"content, mode, deleted files recreated, created ones removed, renames undone. A path changed since by "+
			"someone else is a conflict, skipped and reported unless force. The rewind itself is journaled behind a "+
			"new checkpoint (named in the answer) so it can be undone. dry_run shows the plan only.",
			func(in rewindInput) ([]string, error) {
				if strings.TrimSpace(in.To) == "" {
					return nil, errors.New("give the checkpoint to return to (to), e.g. cp000000 for the session start; checkpoints lists them")
				}
				args := []string{"rewind", "--to", in.To}
				if in.DryRun {
					args = append(args, "--dry-run")
				}
				if in.Force {
					args = append(args, "--force")
				}
				return withPaths(args, in.Paths), nil
			})
	})
	registerMCPTool("task_spawn", func(s *mcp.Server, name string) {
		cliTool(s, name, "Start a background subagent task in its own session and return its id. It runs as you; "+
			"task_wait returns its result. With branch or isolation=branch it works in a branch, and its result "+
			"says how to review and merge it (branch_diff, branch_merge).",
			func(in taskSpawnInput) ([]string, error) {
				if strings.TrimSpace(in.Prompt) == "" {
					return nil, errors.New("give the task's prompt (prompt)")
				}
				sub := in.Subagent
				if sub == "" {
					sub = "sh"
				}
				args := []string{"agents", "spawn", "--subagent", sub}
				if in.Branch != "" {
					args = append(args, "--branch", in.Branch)
				}
				if in.Isolation != "" {
					args = append(args, "--isolation", in.Isolation)
				}
				return append(args, "--", in.Prompt), nil
			})
	})
	registerMCPTool("task_list", func(s *mcp.Server, name string) {
		cliTool(s, name, "List the tasks you may see, newest first, and the questions waiting on you.",
			func(noInput) ([]string, error) { return []string{"agents", "ls"}, nil })
	})
	registerMCPTool("task_show", func(s *mcp.Server, name string) {
		cliTool(s, name, "Show a task: status, prompt, pending question or approval, result, activity and output.",
			func(in taskIDInput) ([]string, error) { return []string{"agents", "show", "--", in.ID}, needID(in.ID) })
	})
	registerMCPTool("task_stop", func(s *mcp.Server, name string) {
		cliTool(s, name, "Stop a task and everything it started.",
			func(in taskIDInput) ([]string, error) { return []string{"agents", "stop", "--", in.ID}, needID(in.ID) })
	})
	registerMCPTool("task_reply", func(s *mcp.Server, name string) {
		cliTool(s, name, "Answer a task's pending question.",
			func(in taskReplyInput) ([]string, error) {
				if strings.TrimSpace(in.Text) == "" {
					return nil, errors.New("give the answer (text)")
				}
				return []string{"agents", "reply", "--", in.ID, in.Text}, needID(in.ID)
			})
	})
	registerMCPTool("task_approve", func(s *mcp.Server, name string) {
		cliTool(s, name, "Decide a task's pending approval: yes or no, optionally with a note.",
			func(in taskApproveInput) ([]string, error) {
				f := strings.Fields(in.Decision)
				if len(f) == 0 || (f[0] != "yes" && f[0] != "no") {
					return nil, fmt.Errorf("decision must be yes or no (optionally followed by a note), not %q", in.Decision)
				}
				return append([]string{"agents", "approve", "--", in.ID}, f...), needID(in.ID)
			})
	})
	registerMCPTool("task_wait", addTaskWait)
	registerMCPTool("sessions", func(s *mcp.Server, name string) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "List the guard sessions you may see, yours marked."},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
				text, err := sessionsText(false)
				if err != nil {
					return nil, nil, err
				}
				return textResult(text), nil, nil
			})
	})
}

// sinceArgs is a journal command with --since when given.
func sinceArgs(verb, since string) ([]string, error) {
	if since = strings.TrimSpace(since); since == "" {
		return []string{verb}, nil
	}
	return []string{verb, "--since", since}, nil
}

// sessionsText lists .rubino/sessions (the sessions the caller may see),
// one line each from its info file, the caller's own (.rubino/self)
// marked with "*"; onlySelf: the caller's own line alone.
func sessionsText(onlySelf bool) (string, error) {
	mnt, err := findMount(os.Getenv("RUBINO_MOUNT"))
	if err != nil {
		return "", err
	}
	ents, err := os.ReadDir(filepath.Join(mnt, ctltree.DirName, "sessions"))
	if err != nil {
		return "", err
	}
	self, _ := os.Readlink(filepath.Join(mnt, ctltree.DirName, "self"))
	self = filepath.Base(self)
	var b strings.Builder
	for _, e := range ents {
		if !e.IsDir() || (onlySelf && e.Name() != self) {
			continue
		}
		mark := "  "
		if e.Name() == self {
			mark = "* "
		}
		line := mark + e.Name()
		if raw, err := readCtl(mnt, "sessions/"+e.Name()+"/info"); err == nil {
			var info struct {
				Owner   *int   `json:"owner"`
				Live    *bool  `json:"live"`
				Harness bool   `json:"harness"`
				Tracked int    `json:"tracked"`
				Denials int    `json:"denials"`
				Command string `json:"command"`
			}
			if json.Unmarshal(raw, &info) == nil {
				if info.Owner != nil {
					line += fmt.Sprintf("  uid %d", *info.Owner)
				}
				if info.Live != nil && !*info.Live {
					line += "  ended"
				}
				if info.Harness {
					line += "  harness"
				}
				line += fmt.Sprintf("  %d tracked, %d refused  %s", info.Tracked, info.Denials, oneLineClip(info.Command, 60))
			}
		}
		b.WriteString(line + "\n")
	}
	if b.Len() == 0 {
		return "no sessions", nil
	}
	return clipText(b.String()), nil
}

// statusText is the status tool's answer: the few lines of
// .rubino/status a model acts on (the mount, the guard's mode, the
// caller's session, the counts of decisions and refusals, the journal's
// size), not the daemon's internals that `rubinofs status` shows.
func statusText() (string, error) {
	mnt, err := findMount(os.Getenv("RUBINO_MOUNT"))
	if err != nil {
		return "", err
	}
	raw, err := readCtl(mnt, "status")
	if err != nil {
		return "", err
	}
	var st struct {
		Mode         string `json:"mode"`
		Unregistered string `json:"unregistered"`
		Workspace    string `json:"workspace"`
		Shared       string `json:"shared"`
		Counts       struct {
			Decisions, Denials, Warnings, Reads, Writes, Sessions int64
		} `json:"counts"`
		Journal struct {
			LogBytes    int64 `json:"log_bytes"`
			BlobBytes   int64 `json:"blob_bytes"`
			BudgetBytes int64 `json:"budget_bytes"`
		} `json:"journal"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", fmt.Errorf("%s/.rubino/status: %v", mnt, err)
	}
	self, err := sessionsText(true)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mount: %s (workspace %s)\n", mnt, st.Workspace)
	fmt.Fprintf(&b, "guard: %s (callers outside every session: %s; other mounts sharing the files: %s)\n", st.Mode, st.Unregistered, st.Shared)
	fmt.Fprintf(&b, "your session: %s\n", strings.TrimSpace(strings.TrimPrefix(self, "* ")))
	c := st.Counts
	fmt.Fprintf(&b, "all sessions: %d live, %d reads, %d writes, %d decisions, %d refused, %d warned\n",
		c.Sessions, c.Reads, c.Writes, c.Decisions, c.Denials, c.Warnings)
	fmt.Fprintf(&b, "journal: %d bytes of logs and %d of pre-images, of a %d-byte budget\n",
		st.Journal.LogBytes, st.Journal.BlobBytes, st.Journal.BudgetBytes)
	return b.String(), nil
}
