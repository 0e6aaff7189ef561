package main

// `rubinofs branch merge NAME`: replay a branch's changes onto the
// workspace through the guard, as one checkpointed step of a session of
// its own (docs/DESIGN.md#branch-merge). Package branch plans; this file
// registers the session, declares each path's base, applies and undoes.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"unicode"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/branch"
	"github.com/rubinofs/rubinofs/ctltree"
)

func branchMergeCommand() *cli.Command {
	return &cli.Command{
		Name: "merge",
		Usage: "apply branch NAME's changes to the workspace through the guard, as a session of their own: a path the workspace changed since " +
			"the branch read it is a conflict (a text file changed on both sides in disjoint hunks is merged 3-way); with any conflict nothing " +
			"is applied, unless --partial; `rubinofs rewind` undoes a merge (needs root)",
		ArgsUsage: "NAME",
		Flags: []cli.Flag{mountFlag(),
			&cli.BoolFlag{Name: "partial", Usage: "apply what does not conflict and report the rest"},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "print the plan (each path's action, the conflicts) and change nothing"},
			&cli.BoolFlag{Name: "confirm", Usage: "print the plan, then apply it only if a line on stdin says y or yes"},
			&cli.BoolFlag{Name: "in-session", Hidden: true}, // the re-executed child: it becomes the merge session's root
		},
		Action: branchMerge,
	}
}

// branchMerge runs the merge in a child process (the hidden
// --in-session), which registers itself as the root of a new harness-mode
// session: a process can root only one session, and the MCP server runs
// commands in its own process. Its output goes to this command's writers
// and its exit status is this one's.
func branchMerge(c *cli.Context) error {
	name, err := branchName(c)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return cli.Exit("rubinofs branch merge: needs root (a branch's directories are root's); run it as root", 1)
	}
	if c.Bool("in-session") {
		return mergeInSession(c, name)
	}
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return cli.Exit(fmt.Sprintf("finding the rubinofs executable: %v", err), 1)
	}
	args := []string{"branch", "merge", "--in-session", "--mount", mnt}
	for _, f := range []string{"partial", "dry-run", "confirm"} {
		if c.Bool(f) {
			args = append(args, "--"+f)
		}
	}
	cmd := exec.Command(self, append(args, name)...)
	cmd.Stdout, cmd.Stderr = c.App.Writer, c.App.ErrWriter
	if c.Bool("confirm") {
		cmd.Stdin = os.Stdin // only then: the MCP server's stdin is its protocol
	}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return cli.Exit("", ee.ExitCode())
		}
		return cli.Exit(fmt.Sprintf("rubinofs branch merge: %v", err), 1)
	}
	return nil
}

// mergeInSession is the child: it finds the branch, becomes a session
// root, plans, and applies unless there are conflicts (or --partial).
func mergeInSession(c *cli.Context, name string) error {
	fail := func(format string, a ...any) error {
		return cli.Exit("rubinofs branch merge: "+oneLine(fmt.Sprintf(format, a...)), 1)
	}
	mnt, st, err := workspaceOf(c)
	if err != nil {
		return err
	}
	b, err := branch.Open(st.State.Dir, name)
	if errors.Is(err, branch.ErrNotFound) {
		return fail("no branch %s in %s (`rubinofs branch ls` lists them)", name, mnt)
	}
	if err != nil {
		return fail("branch %s: %v", name, err)
	}
	if b.DaemonMounted() {
		var ws, bs unix.Stat_t
		if unix.Stat(mnt, &ws) == nil && unix.Stat(b.Mnt(), &bs) == nil && ws.Dev == bs.Dev {
			return fail("%s is branch %s here (this is a `run --branch`): merge from outside the branch", mnt, name)
		}
		if live, err := liveSessions(b.Mnt(), ""); err == nil && len(live) > 0 {
			return fail("branch %s has live sessions (%s): a merge reads the branch as it stands; end them first", name, strings.Join(live, ", "))
		}
	}
	// A session of its own, in harness mode: this process's reads of the
	// workspace count for nothing, so only the bases it declares make a
	// path writable (docs/DESIGN.md#branch-merge).
	sess, err := cloneCtl(mnt, "sessions/clone", []byte("harness=1 cmd=rubinofs branch merge "+name+"\n"))
	if err != nil {
		return fail("registering the merge's session: %v", err)
	}
	skip := func(p string) bool { return p == ctltree.DirName || strings.HasPrefix(p, ctltree.DirName+"/") }
	// The workspace is read where the overlay reads it (the backing
	// directory, or the mount for one mounted in place): no FUSE round
	// trips for the plan, the same bytes.
	plan, err := branch.PlanMerge(b, b.Meta.Workspace, skip)
	if err != nil {
		return fail("branch %s: %v", name, err)
	}
	w := c.App.Writer
	todo := 0
	for _, s := range plan.Steps {
		printStep(w, s)
		if s.Action != branch.MergeSame && s.Action != branch.MergeConflict {
			todo++
		}
	}
	switch {
	case plan.Conflicts > 0 && c.Bool("dry-run"):
		return cli.Exit(fmt.Sprintf("branch %s: %d conflict(s), %d change(s) to apply; dry run, nothing changed", name, plan.Conflicts, todo), 1)
	case plan.Conflicts > 0 && !c.Bool("partial"):
		return cli.Exit(fmt.Sprintf("branch %s: %d conflict(s); nothing merged (--partial merges the other %d change(s))", name, plan.Conflicts, todo), 1)
	case c.Bool("dry-run"):
		fmt.Fprintf(w, "branch %s: %d change(s) to apply; dry run, nothing changed\n", name, todo)
		return nil
	case todo == 0:
		fmt.Fprintf(w, "branch %s: nothing to merge\n", name)
		return exitIf(plan.Conflicts > 0)
	case c.Bool("confirm") && !confirmed(c, fmt.Sprintf("apply %d change(s) of branch %s to %s? [y/N] ", todo, name, mnt)):
		return cli.Exit(fmt.Sprintf("branch %s: not confirmed; nothing merged", name), 1)
	}
	out, err := journalRequest(mnt, "self/journal", "checkpoint", "merge of branch "+name)
	if err != nil {
		return fail("checkpoint before the merge: %s", journalError(err, ""))
	}
	cp := strings.Fields(string(out) + " ")[0]
	// Said before the first change: a merge interrupted while it applies
	// (a signal, a kill) leaves a part applied, which this undoes.
	fmt.Fprintf(w, "applying as session %s from checkpoint %s; undo: rubinofs rewind --session %s --to %s\n", sess, cp, sess, cp)
	if f, ok := w.(interface{ Sync() error }); ok {
		f.Sync()
	}
	applied, failed := applyMerge(w, mnt, plan, c.Bool("partial"))
	if failed > 0 && !c.Bool("partial") {
		if _, err := journalRequest(mnt, "self/journal", "rewind", "--to", cp); err != nil {
			return fail("a change was refused and undoing the %d applied failed: %s; `rubinofs rewind --session %s --to %s` undoes them", applied, journalError(err, ""), sess, cp)
		}
		return fail("branch %s: a change was refused (the workspace changed meanwhile); the %d applied were undone, nothing merged", name, applied)
	}
	fmt.Fprintf(w, "branch %s: merged %d change(s) as session %s", name, applied, sess)
	if n := plan.Conflicts + failed; n > 0 {
		fmt.Fprintf(w, ", %d left in conflict", n)
	}
	fmt.Fprintf(w, "; undo: rubinofs rewind --session %s --to %s\n", sess, cp)
	return exitIf(plan.Conflicts+failed > 0)
}

// confirmed asks question on the error writer and reports whether the
// next line of stdin is y or yes (any case); end of input is a no.
func confirmed(c *cli.Context, question string) bool {
	fmt.Fprint(c.App.ErrWriter, question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// exitIf is exit status 1 when bad (conflicts were left), else nil.
func exitIf(bad bool) error {
	if bad {
		return cli.Exit("", 1)
	}
	return nil
}

// printStep prints one line of the plan: the action, the path, and for a
// conflict or a 3-way merge why.
func printStep(w io.Writer, s branch.MergeStep) {
	line := fmt.Sprintf("%-8s %s", s.Action, quoteToken(s.Path))
	if s.Action == branch.MergeConflict || s.Action == branch.Merge3Way {
		line += ": " + oneLine(s.Why)
	}
	fmt.Fprintln(w, line)
}

// oneLine is s with its control characters (a newline in a file name of
// the workspace or the branch) escaped as Go escapes them, so that a name
// never starts a line of the plan of its own; s without any is unchanged.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// applyMerge applies the plan's steps through the mount at mnt: creations,
// replacements and merges in path order (a directory before what it
// holds), then removals deepest first. A step the workspace refuses stops
// the apply unless partial. It returns how many steps were applied and
// failed; each failure is printed.
func applyMerge(w io.Writer, mnt string, plan branch.MergePlan, partial bool) (applied, failed int) {
	var order []branch.MergeStep
	for _, s := range plan.Steps {
		if s.Action != branch.MergeRemove && s.Action != branch.MergeRmdir {
			order = append(order, s)
		}
	}
	for i := len(plan.Steps) - 1; i >= 0; i-- {
		if s := plan.Steps[i]; s.Action == branch.MergeRemove || s.Action == branch.MergeRmdir {
			order = append(order, s)
		}
	}
	// One handle for every declaration: one write(2) each.
	ctl, err := openCtl(ctlPathOf(mnt, "self/ctl"), unix.O_RDWR)
	if err != nil {
		fmt.Fprintf(w, "refused  (all): %v\n", err)
		return 0, 1
	}
	defer ctl.close()
	for _, s := range order {
		if s.Action == branch.MergeSame || s.Action == branch.MergeConflict {
			continue
		}
		declare := func(abs, hash string) error { return ctl.write([]byte("read " + ctlPath(abs) + " " + hash + "\n")) }
		if err := branch.ApplyStep(mnt, s, os.Geteuid() == 0, declare); err != nil {
			failed++
			hint := ""
			if errors.Is(err, fs.ErrPermission) {
				hint = " (the guard: it changed after the plan read it; `rubinofs why` says more)"
			}
			fmt.Fprintf(w, "refused  %s: %s%s\n", quoteToken(s.Path), oneLine(err.Error()), hint)
			if !partial {
				return applied, failed
			}
			continue
		}
		applied++
	}
	return applied, failed
}
