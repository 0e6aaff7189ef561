package main

// `rubinofs agents`, `rubinofs ask` and `rubinofs inbox`: background
// subagents through .rubino/agents. Like every subcommand after `mount`,
// they only read and write control files, so they work inside a container
// that sees nothing but the mount.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/tasks"
)

// taskIDRE is the shape of a task id; anything else is refused before it
// becomes part of a path.
var taskIDRE = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

func agentsCommand() *cli.Command {
	idCmd := func(name, usage, args string, action cli.ActionFunc) *cli.Command {
		return &cli.Command{Name: name, Usage: usage, ArgsUsage: args, Flags: []cli.Flag{mountFlag()}, Action: action}
	}
	return &cli.Command{
		Name:  "agents",
		Usage: "spawn, watch, steer, answer and stop background subagents (through .rubino/agents)",
		Description: "Tasks are processes in their own process group and guard session (task-ID). A task may act only on\n" +
			"its own descendants; a session on the tasks it spawned; outside every session a uid on its own tasks, and the\n" +
			"mount owner or root on all (others' tasks are not listed). Inside a task, use `rubinofs ask` and `rubinofs inbox`.",
		Flags: []cli.Flag{mountFlag()},
		Subcommands: []*cli.Command{
			idCmd("ls", "list tasks, newest first", "", agentsLs),
			{
				Name: "spawn", Usage: "start a task and print its id (the prompt from the arguments, or stdin with -)",
				ArgsUsage: "PROMPT...|-",
				Flags: []cli.Flag{mountFlag(),
					&cli.StringFlag{Name: "subagent", Aliases: []string{"s"}, Value: "sh", Usage: "the subagent type (sh runs the prompt as a shell command)"},
					&cli.StringFlag{Name: "branch", Usage: "run the task in branch `NAME` (rubinofs branch new): it sees the branch at the workspace's paths (needs root)"},
					&cli.StringFlag{Name: "isolation", Usage: "`branch`: run the task in a new branch of its own, task-ID (needs root); none: in the workspace (the default)"},
				},
				Action: agentsSpawn,
			},
			idCmd("show", "show a task's state, question, result, activity and output", "ID", agentsShow),
			idCmd("tree", "show every task under its owner", "", agentsTree),
			idCmd("steer", "queue a note for the task's next turn (its inbox)", "ID TEXT...", agentsCtlText("steer")),
			{
				Name: "stop", Usage: "stop a task and everything under it (--all: every task, and wait for them)",
				ArgsUsage: "ID|--all",
				Flags:     []cli.Flag{mountFlag(), &cli.BoolFlag{Name: "all", Usage: "stop every live task and wait until they are finished (before `rubinofs unmount`)"}},
				Action:    agentsStop,
			},
			idCmd("reply", "answer a task's pending question", "ID TEXT...", agentsCtlText("reply")),
			idCmd("approve", "decide a task's pending approval", "ID yes|no [NOTE...]", agentsApprove),
			idCmd("wait", "wait until the task is finished and print its result (exit 1 unless done)", "ID", agentsWait),
		},
	}
}

func askCommand() *cli.Command {
	return &cli.Command{
		Name:  "ask",
		Usage: "inside a task: ask the owner (or the human) a question and print the answer",
		Description: "Blocks until answered (`rubinofs agents reply ID ...`), the task is stopped, or the ask times out.\n" +
			"With --approval, asks for approval to run COMMAND instead: exit 0 approved, 1 denied.",
		ArgsUsage: "QUESTION...|-",
		Flags: []cli.Flag{mountFlag(),
			&cli.StringFlag{Name: "task", Usage: "the asking task's `ID` (default $RUBINO_TASK_ID)"},
			&cli.BoolFlag{Name: "no-wait", Usage: "do not wait: the answer arrives in the inbox"},
			&cli.StringFlag{Name: "approval", Usage: "request approval to run `COMMAND`; QUESTION is optional"},
		},
		Action: askAction,
	}
}

func inboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "inbox",
		Usage: "inside a task: print and drain the steer notes (and answers) queued for it",
		Flags: []cli.Flag{mountFlag(),
			&cli.StringFlag{Name: "task", Usage: "the task's `ID` (default $RUBINO_TASK_ID)"},
		},
		Action: func(c *cli.Context) error {
			mnt, id, err := taskContext(c)
			if err != nil {
				return err
			}
			b, err := readAgentFile(mnt, id+"/inbox")
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			c.App.Writer.Write(b)
			return nil
		},
	}
}

// taskAction is a subcommand on one task: it resolves the mount and the
// ID argument, then runs fn.
func taskAction(fn func(c *cli.Context, mnt, id string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		mnt, err := mountOf(c)
		if err != nil {
			return err
		}
		id, err := taskArg(c)
		if err != nil {
			return err
		}
		return fn(c, mnt, id)
	}
}

// taskArg returns the ID argument, checked.
func taskArg(c *cli.Context) (string, error) {
	id := c.Args().First()
	if id == "" {
		return "", cli.Exit("give a task ID", 2)
	}
	if !taskIDRE.MatchString(id) {
		return "", cli.Exit(fmt.Sprintf("%q is not a task id (a decimal number)", id), 2)
	}
	return id, nil
}

// taskContext is the mount and the calling task's id, for ask and inbox;
// inside a branch (RUBINO_BRANCH) without --mount it refuses with the
// reason, exit 1.
func taskContext(c *cli.Context) (string, string, error) {
	id := c.String("task")
	if id == "" {
		id = os.Getenv("RUBINO_TASK_ID")
	}
	if id == "" {
		return "", "", cli.Exit("not inside a task: RUBINO_TASK_ID is not set (or pass --task ID)", 2)
	}
	if !taskIDRE.MatchString(id) {
		return "", "", cli.Exit(fmt.Sprintf("%q is not a task id", id), 2)
	}
	if b := os.Getenv(tasks.EnvBranch); b != "" && mountFlagValue(c) == "" {
		// The task's files are the workspace daemon's; at the workspace's
		// paths a branch shows its own daemon's (docs/DESIGN.md#branch-tasks).
		return "", "", cli.Exit(fmt.Sprintf("rubinofs %s: task %s runs in branch %s, which shows the branch's control files, not the workspace's where the task's are: a task in a branch reports through its output and exit status", c.Command.Name, id, b), 1)
	}
	mnt, err := mountOf(c)
	return mnt, id, err
}

// readAgentFile reads agents/rel whole (readCtl).
func readAgentFile(mnt, rel string) ([]byte, error) { return readCtl(mnt, "agents/"+rel) }

// writeAgentFile writes one command to agents/rel (writeCtl).
func writeAgentFile(mnt, rel string, data []byte) error { return writeCtl(mnt, "agents/"+rel, data) }

func agentField(mnt, id, name string) string {
	b, _ := readAgentFile(mnt, id+"/"+name)
	return strings.TrimRight(string(b), "\n")
}

// textArgs joins the arguments from index i, or reads stdin for "-".
func textArgs(c *cli.Context, i int, what string) (string, error) {
	args := c.Args().Slice()
	if len(args) > i && len(args) == i+1 && args[i] == "-" {
		b, err := io.ReadAll(c.App.Reader)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\n"), nil
	}
	if len(args) <= i {
		return "", cli.Exit("give the "+what, 2)
	}
	return strings.Join(args[i:], " "), nil
}

func agentsSpawn(c *cli.Context) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	prompt, err := textArgs(c, 0, "prompt")
	if err != nil {
		return err
	}
	fields := map[string]string{"subagent": c.String("subagent"), "prompt": prompt}
	for _, f := range []string{"branch", "isolation"} { // checked by the daemon (docs/DESIGN.md#branch-tasks)
		if c.IsSet(f) {
			fields[f] = c.String(f)
		}
	}
	spec, _ := json.Marshal(fields)
	id, err := cloneCtl(mnt, "agents/clone", append(spec, '\n'))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	fmt.Fprintln(c.App.Writer, id)
	return nil
}

// taskIDs lists the task directories, newest (highest id) first.
func taskIDs(mnt string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(mnt, ctltree.DirName, "agents"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && taskIDRE.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, _ := strconv.ParseUint(ids[i], 10, 64)
		b, _ := strconv.ParseUint(ids[j], 10, 64)
		return a > b
	})
	return ids, nil
}

func agentsLs(c *cli.Context) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	ids, err := taskIDs(mnt)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if len(ids) == 0 {
		fmt.Fprintln(c.App.Writer, "no tasks")
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSUBAGENT\tOWNER\tDEPTH\tAGE\tPROMPT")
	for _, id := range ids {
		status := agentField(mnt, id, "status")
		if status == "" {
			continue // gone meanwhile
		}
		age := ""
		if t, err := time.Parse(time.RFC3339Nano, agentField(mnt, id, "started")); err == nil {
			age = time.Since(t).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, status, agentField(mnt, id, "subagent"),
			agentField(mnt, id, "owner"), agentField(mnt, id, "depth"), age, oneLineClip(agentField(mnt, id, "prompt"), 60))
	}
	tw.Flush()
	if w, _ := readAgentFile(mnt, "waiting"); len(w) > 0 {
		fmt.Fprintf(c.App.Writer, "\nwaiting on you:\n%s", indentLines(string(w)))
	}
	return nil
}

func oneLineClip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func indentLines(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
	return b.String()
}

var agentsShow = taskAction(func(c *cli.Context, mnt, id string) error {
	status, err := readAgentFile(mnt, id+"/status")
	if err != nil {
		return cli.Exit(fmt.Sprintf("task %s: %v", id, err), 1)
	}
	fmt.Fprintf(c.App.Writer, "task:      %s\n", id)
	fmt.Fprintf(c.App.Writer, "status:    %s", status)
	for _, f := range []string{"subagent", "owner", "depth", "started", "finished", "branch"} {
		if v := agentField(mnt, id, f); v != "" {
			fmt.Fprintf(c.App.Writer, "%-10s %s\n", f+":", v)
		}
	}
	fmt.Fprintf(c.App.Writer, "prompt:\n%s\n", indentLines(agentField(mnt, id, "prompt")+"\n"))
	for _, f := range []string{"question", "approval", "result", "error", "activity", "output"} {
		if v := agentField(mnt, id, f); v != "" {
			fmt.Fprintf(c.App.Writer, "%s:\n%s", f, indentLines(v+"\n"))
		}
	}
	return nil
})

func agentsTree(c *cli.Context) error {
	b, err := readMountCtl(c, "agents/tree")
	if err != nil {
		return err
	}
	if len(b) == 0 {
		fmt.Fprintln(c.App.Writer, "no tasks")
	}
	c.App.Writer.Write(b)
	return nil
}

// agentsCtlText runs "VERB TEXT" on ID's ctl.
func agentsCtlText(verb string) cli.ActionFunc {
	return taskAction(func(c *cli.Context, mnt, id string) error {
		text, err := textArgs(c, 1, "text")
		if err != nil {
			return err
		}
		if err := writeAgentFile(mnt, id+"/ctl", []byte(verb+" "+text+"\n")); err != nil {
			return cli.Exit(err.Error(), 1)
		}
		return nil
	})
}

func agentsStop(c *cli.Context) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	if c.Bool("all") {
		return agentsStopAll(c, mnt)
	}
	id, err := taskArg(c)
	if err != nil {
		return err
	}
	if err := writeAgentFile(mnt, id+"/ctl", []byte("stop\n")); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	return nil
}

var agentsApprove = taskAction(func(c *cli.Context, mnt, id string) error {
	args := c.Args().Slice()
	if len(args) < 2 || (args[1] != "yes" && args[1] != "no") {
		return cli.Exit("usage: rubinofs agents approve ID yes|no [NOTE...]", 2)
	}
	if err := writeAgentFile(mnt, id+"/ctl", []byte("approve "+strings.Join(args[1:], " ")+"\n")); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	return nil
})

var agentsWait = taskAction(func(c *cli.Context, mnt, id string) error {
	b, err := readAgentFile(mnt, id+"/wait")
	if err != nil {
		return cli.Exit(fmt.Sprintf("task %s: %v", id, err), 1)
	}
	status, body, _ := strings.Cut(string(b), "\n")
	if status != "done" {
		return cli.Exit(fmt.Sprintf("task %s %s: %s", id, status, strings.TrimRight(body, "\n")), 1)
	}
	fmt.Fprint(c.App.Writer, body)
	return nil
})

func askAction(c *cli.Context) error {
	mnt, id, err := taskContext(c)
	if err != nil {
		return err
	}
	if cmd := c.String("approval"); cmd != "" {
		question := strings.Join(c.Args().Slice(), " ")
		req, _ := json.Marshal(map[string]string{"question": question, "command": cmd})
		if err := writeAgentFile(mnt, id+"/approval", append(req, '\n')); err != nil {
			return cli.Exit(err.Error(), 1)
		}
		b, err := readAgentFile(mnt, id+"/approval") // blocks until decided
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		state, note := "", ""
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, " ")
			switch k {
			case "state":
				state = v
			case "note":
				note = v
			}
		}
		fmt.Fprintln(c.App.Writer, strings.TrimSpace(state+" "+note))
		if state != "approved" {
			return cli.Exit("", 1)
		}
		return nil
	}
	question, err := textArgs(c, 0, "question")
	if err != nil {
		return err
	}
	data := []byte(question + "\n")
	if c.Bool("no-wait") || strings.HasPrefix(strings.TrimSpace(question), "{") {
		// JSON form: needed for --no-wait, and for a question that starts
		// with "{" (which the ask file would take for JSON).
		req := map[string]any{"question": question}
		if c.Bool("no-wait") {
			req["blocking"] = false
		}
		data, _ = json.Marshal(req)
	}
	if err := writeAgentFile(mnt, id+"/ask", data); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if c.Bool("no-wait") {
		return nil
	}
	b, err := readAgentFile(mnt, id+"/answer")
	if err != nil {
		var ce *ctlError
		if errors.As(err, &ce) && ce.Errno == syscall.ECANCELED {
			return cli.Exit("the question was cancelled: the task is stopping", 1)
		}
		return cli.Exit(err.Error(), 1)
	}
	c.App.Writer.Write(b)
	return nil
}

// agentsStopAll stops every live task and waits until each is finished,
// so nothing keeps the mount busy.
func agentsStopAll(c *cli.Context, mnt string) error {
	ids, err := taskIDs(mnt)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	var live []string
	for _, id := range ids {
		switch agentField(mnt, id, "status") {
		case "", "done", "failed", "stopped":
		default:
			live = append(live, id)
		}
	}
	for _, id := range live {
		if err := writeAgentFile(mnt, id+"/ctl", []byte("stop\n")); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "rubinofs: task %s: %v\n", id, err)
		}
	}
	for _, id := range live {
		readAgentFile(mnt, id+"/wait")
	}
	fmt.Fprintf(c.App.Writer, "stopped %d task(s)\n", len(live))
	return nil
}
