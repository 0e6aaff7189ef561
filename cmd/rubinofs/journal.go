package main

// `rubinofs checkpoint`, `changes`, `diff` and `rewind`: a session's change
// journal (docs/DESIGN.md#journal-store) through the session's
// .rubino/sessions/NAME/journal request file, or .rubino/self/journal for
// the caller's own session. Like every subcommand after `mount` they only
// open control files; the daemon plans and applies.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/journal"
)

// sessionNameRE is the shape of a session name (docs/DESIGN.md#sessions);
// anything else is refused before it becomes part of a path.
var sessionNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkpointIDRE is the shape of a checkpoint id ("cp" and six digits, or
// more past a million).
var checkpointIDRE = regexp.MustCompile(`^cp[0-9]{6,}$`)

// sessionFlag is --session of the journal commands.
func sessionFlag() cli.Flag {
	return &cli.StringFlag{Name: "session", Usage: "the session `NAME` (default: the caller's own session, .rubino/self)"}
}

// sinceFlag is --since of changes and diff.
func sinceFlag() cli.Flag {
	return &cli.StringFlag{Name: "since", Usage: "from checkpoint `CP` (default: the session start, cp000000)"}
}

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "mark a checkpoint in a session's change journal and print its id (rewind --to ID returns to it)",
		ArgsUsage: "[LABEL...]",
		Flags:     []cli.Flag{sessionFlag(), mountFlag()},
		Action: func(c *cli.Context) error {
			req := []string{"checkpoint"}
			if label := strings.Join(c.Args().Slice(), " "); label != "" {
				req = append(req, label)
			}
			out, err := journalAction(c, req...)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, strings.TrimSpace(string(out)))
			return nil
		},
	}
}

func checkpointsCommand() *cli.Command {
	return &cli.Command{
		Name:  "checkpoints",
		Usage: "list a session's checkpoints, oldest first (id, time, changes and paths since, label)",
		Flags: []cli.Flag{sessionFlag(), mountFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the checkpoints file's JSON lines as they are"}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("usage: rubinofs checkpoints [--session NAME] [--json]", exitUsage)
			}
			rel, err := journalFile(c.String("session"))
			if err != nil {
				return err
			}
			b, err := readMountCtl(c, strings.TrimSuffix(rel, "journal")+"checkpoints")
			if err != nil {
				return err
			}
			if c.Bool("json") {
				c.App.Writer.Write(b)
				return nil
			}
			text, err := formatCheckpoints(b)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			fmt.Fprint(c.App.Writer, text)
			return nil
		},
	}
}

func changesCommand() *cli.Command {
	return &cli.Command{
		Name:  "changes",
		Usage: "list the paths a session changed (status, before..after hashes, renames as OLD -> NEW)",
		Description: "One line a path, as git status --short: M modified, A added, D deleted, R renamed (OLD -> NEW),\n" +
			"T type changed, = changed and back; then the short hashes before..after (- absent, dir/, link),\n" +
			"and the modes when they changed. Temporary files (absent then and now) are left out, and a file\n" +
			"saved by renaming a temporary over it shows as M. --json prints every path as the journal has it.",
		Flags: []cli.Flag{sessionFlag(), sinceFlag(), mountFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON lines (path, ops, before, after, renamed_from)"}},
		BashComplete: completeCheckpoints,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("usage: rubinofs changes [--session NAME] [--since CP] [--json]", exitUsage)
			}
			req, err := withSince(c, "changes")
			if err != nil {
				return err
			}
			if c.Bool("json") { // streamed: never held whole (docs/DESIGN.md#ctl-render)
				return journalStreamAction(c, req...)
			}
			out, err := journalAction(c, req...)
			if err != nil {
				return err
			}
			changes, err := parseChanges(out)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			fmt.Fprint(c.App.Writer, formatChanges(changes))
			return nil
		},
	}
}

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:         "diff",
		Usage:        "print a unified diff, as git diff does, of what a session changed against the state at a checkpoint",
		ArgsUsage:    "[PATH...]",
		Flags:        []cli.Flag{sessionFlag(), sinceFlag(), mountFlag()},
		BashComplete: completeCheckpoints,
		Action: func(c *cli.Context) error {
			req, err := withSince(c, "diff")
			if err != nil {
				return err
			}
			out, err := journalPathsAction(c, req)
			if err != nil {
				return err
			}
			c.App.Writer.Write(out)
			return nil
		},
	}
}

func rewindCommand() *cli.Command {
	return &cli.Command{
		Name:      "rewind",
		Usage:     "return every path a session changed since a checkpoint to its state then",
		ArgsUsage: "--to CP [PATH...]",
		Description: "Restores content and mode, recreates deleted files and directories, removes created ones and\n" +
			"undoes renames. A path changed since by another session, or from outside the mount, is a conflict:\n" +
			"skipped and reported (--force applies it anyway). The rewind is journaled behind an automatic\n" +
			"checkpoint, printed at the end: rewind --to it to undo the rewind. Exit status 1 when a conflict\n" +
			"was skipped or a step failed.",
		Flags: []cli.Flag{sessionFlag(), mountFlag(),
			&cli.StringFlag{Name: "to", Usage: "the checkpoint `CP` to return to (cp000000: the session start)"},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "print the plan, change nothing"},
			&cli.BoolFlag{Name: "force", Usage: "apply the conflicting steps too (overwrites the other changes)"},
		},
		BashComplete: completeCheckpoints,
		Action:       rewindAction,
	}
}

func rewindAction(c *cli.Context) error {
	to := c.String("to")
	switch {
	case to == "":
		return cli.Exit("rubinofs rewind: give the checkpoint with --to CP (cp000000: the session start; rubinofs checkpoints lists them)", exitUsage)
	case !checkpointIDRE.MatchString(to):
		return cli.Exit(fmt.Sprintf("rubinofs rewind: --to %q is not a checkpoint id (cp and six digits, e.g. cp000000)", to), exitUsage)
	}
	req := []string{"rewind", "--to", to}
	if c.Bool("force") {
		req = append(req, "--force")
	}
	if c.Bool("dry-run") {
		req = append(req, "--dry-run")
	}
	out, err := journalPathsAction(c, req)
	if err != nil {
		return err
	}
	var rep rewindReply
	if err := json.Unmarshal(out, &rep); err != nil {
		return cli.Exit(fmt.Sprintf("the rewind's reply is not JSON: %v: %q", err, clip(string(out), 200)), 1)
	}
	text, failed := formatRewind(rep, c.Bool("force"), undoCommand(c))
	fmt.Fprint(c.App.Writer, text)
	if failed {
		return cli.Exit("", 1)
	}
	return nil
}

// undoCommand is the command line that rewinds to an automatic checkpoint
// (its id appended), naming the same session and mount as c did.
func undoCommand(c *cli.Context) string {
	s := "rubinofs rewind"
	if v := c.String("session"); v != "" {
		s += " --session " + v
	}
	if v := mountFlagValue(c); v != "" {
		s += " --mount " + shq(v)
	}
	return s + " --to "
}

// withSince is the request verb with --since CP when the flag is given
// (checked to be a checkpoint id).
func withSince(c *cli.Context, verb string) ([]string, error) {
	req := []string{verb}
	if since := c.String("since"); since != "" {
		if !checkpointIDRE.MatchString(since) {
			return nil, cli.Exit(fmt.Sprintf("rubinofs %s: --since %q is not a checkpoint id (cp and six digits, e.g. cp000000)", verb, since), exitUsage)
		}
		req = append(req, "--since", since)
	}
	return req, nil
}

// journalPathsAction sends req limited to the command's PATH arguments
// (workspacePaths), as `-- PATH...` when they limit it.
func journalPathsAction(c *cli.Context, req []string) ([]byte, error) {
	mnt, err := mountOf(c)
	if err != nil {
		return nil, err
	}
	paths, err := workspacePaths(mnt, c.Args().Slice())
	if err != nil {
		return nil, cli.Exit(err.Error(), exitUsage)
	}
	if len(paths) > 0 {
		req = append(append(req, "--"), paths...)
	}
	return journalCall(c, mnt, req...)
}

// journalAction resolves the mount and sends the request (journalCall).
func journalAction(c *cli.Context, req ...string) ([]byte, error) {
	mnt, err := mountOf(c)
	if err != nil {
		return nil, err
	}
	return journalCall(c, mnt, req...)
}

// journalCall sends the request to the journal file of the session c
// names (journalFile) on mnt and returns the reply; a failure is a
// cli.Exit (status 1) with the reason the control tree gave.
func journalCall(c *cli.Context, mnt string, req ...string) ([]byte, error) {
	rel, err := journalFile(c.String("session"))
	if err != nil {
		return nil, err
	}
	out, err := journalRequest(mnt, rel, req...)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("rubinofs %s: %s", req[0], journalError(err, c.String("session"))), 1)
	}
	return out, nil
}

// journalFile is the request file, relative to the control tree, of
// session name ("": the caller's own).
func journalFile(name string) (string, error) {
	if name == "" {
		return "self/journal", nil
	}
	if !sessionNameRE.MatchString(name) {
		return "", cli.Exit(fmt.Sprintf("--session %q is not a session name (1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit)", name), exitUsage)
	}
	return "sessions/" + name + "/journal", nil
}

// journalError says what a failed journal request means: a missing
// session or an older mount for a missing file, the control tree's reason
// (with the errno) otherwise.
func journalError(err error, session string) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "open" && errors.Is(err, fs.ErrNotExist) {
		if session != "" {
			return fmt.Sprintf("no session %q on this mount (rubinofs status lists them): %v", session, err)
		}
		return fmt.Sprintf("%v (this mount keeps no journal: its rubinofs is older than this one; remount with this version)", err)
	}
	var ce *ctlError
	if errors.As(err, &ce) && ce.Reason != "" {
		return fmt.Sprintf("%s (%s)", ce.Reason, ce.Errno)
	}
	return err.Error()
}

// journalStreamAction sends the request as journalAction does and copies
// the reply to the app's writer as it is read, never holding it whole
// (docs/DESIGN.md#ctl-render); a failure is a cli.Exit with the reason.
func journalStreamAction(c *cli.Context, req ...string) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	rel, err := journalFile(c.String("session"))
	if err != nil {
		return err
	}
	f, err := openCtl(ctlPathOf(mnt, rel), unix.O_RDWR) // ctlio.go: never Go's poller
	if err == nil {
		defer f.close()
		if err = f.write([]byte(requestLine(req) + "\n")); err == nil {
			err = f.copyAt(c.App.Writer, 0)
		}
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("rubinofs %s: %s", req[0], journalError(err, c.String("session"))), 1)
	}
	return nil
}

// journalRequest writes one request line (requestLine of req) to the
// clone-kind request file rel on a handle opened read-write, and reads
// the whole reply from offset 0 of the same handle. A refused request is
// a ctlError with the control tree's reason.
func journalRequest(mnt, rel string, req ...string) ([]byte, error) {
	f, err := openCtl(ctlPathOf(mnt, rel), unix.O_RDWR) // ctlio.go: never Go's poller
	if err != nil {
		return nil, err
	}
	defer f.close()
	if err := f.write([]byte(requestLine(req) + "\n")); err != nil {
		return nil, err
	}
	return f.readAllAt(0)
}

// requestLine joins request tokens with spaces, each as it is or, when it
// would not survive the split (empty, white space, a quote or backslash, a
// control or non-UTF-8 byte), as a Go-quoted string (strconv.Quote).
func requestLine(req []string) string {
	out := make([]string, len(req))
	for i, tok := range req {
		out[i] = quoteToken(tok)
	}
	return strings.Join(out, " ")
}

// quoteToken is one token of a request line (requestLine), and a path as
// the journal commands print it.
func quoteToken(tok string) string {
	if tok == "" || strings.ContainsAny(tok, "\"'\\") || strings.IndexFunc(tok, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == unicode.ReplacementChar
	}) >= 0 {
		return strconv.Quote(tok)
	}
	return tok
}

// workspacePaths maps PATH arguments to the paths a journal request
// takes, which the daemon resolves against the caller's current directory
// (as self/ctl's read does). A relative PATH is taken from the current
// directory when that is inside the mount, else from the mount root; an
// absolute one must be inside the mount. Each is sent relative to the
// current directory when that is inside the mount (it then means the same
// in a container, whose paths the daemon does not share), else absolute.
// A path outside the mount or in the control tree is an error; "." (the
// whole workspace) or no argument means every path: nil.
func workspacePaths(mnt string, args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	root := filepath.Clean(mnt)
	roots := []string{root} // the mount as spelled, and resolved
	if r, err := filepath.EvalSymlinks(mnt); err == nil && r != root {
		root = r
		roots = append(roots, r)
	}
	inMount := func(p string) (string, bool) {
		for _, r := range roots {
			if rel, err := filepath.Rel(r, filepath.Clean(p)); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return rel, true
			}
		}
		return "", false
	}
	base, inside := "", false // the current directory, workspace-relative
	if wd, err := os.Getwd(); err == nil {
		if base, inside = inMount(wd); !inside {
			if r, err := filepath.EvalSymlinks(wd); err == nil {
				base, inside = inMount(r)
			}
		}
	}
	var out []string
	for _, a := range args {
		rel, ok := "", true
		if filepath.IsAbs(a) {
			rel, ok = inMount(a)
		} else {
			rel = filepath.Join(base, a)
			ok = rel != ".." && !strings.HasPrefix(rel, "../")
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("%s is outside the mount %s", a, mnt)
		case rel == ".":
			return nil, nil
		case rel == ctltree.DirName || strings.HasPrefix(rel, ctltree.DirName+"/"):
			return nil, fmt.Errorf("%s is in the control tree, which is never journaled", a)
		case inside:
			rel, _ = filepath.Rel(base, rel)
			out = append(out, rel)
		default:
			out = append(out, filepath.Join(root, rel))
		}
	}
	return out, nil
}

// completeCheckpoints completes --to and --since with the checkpoint ids
// of the caller's session (or --session's), newest first; otherwise the
// flags. urfave/cli hands the completion no word before the cursor, so it
// is taken from os.Args (the last word before --generate-bash-completion).
func completeCheckpoints(c *cli.Context) {
	args := os.Args
	prev := ""
	if n := len(args); n >= 2 && args[n-1] == "--generate-bash-completion" {
		prev = args[n-2]
	}
	if prev == "--to" || prev == "--since" {
		mnt, err := findMount(mountFlagValue(c))
		if err != nil {
			return
		}
		rel := "self/checkpoints"
		if s := c.String("session"); sessionNameRE.MatchString(s) {
			rel = "sessions/" + s + "/checkpoints"
		}
		b, err := readCtl(mnt, rel)
		if err != nil {
			return
		}
		ids := []string{}
		for _, line := range strings.Split(string(b), "\n") {
			var cp struct {
				ID string `json:"id"`
			}
			if json.Unmarshal([]byte(line), &cp) == nil && cp.ID != "" {
				ids = append([]string{cp.ID}, ids...)
			}
		}
		fmt.Fprintln(c.App.Writer, strings.Join(ids, "\n"))
		return
	}
	cli.DefaultCompleteWithFlags(c.Command)(c)
}

// rewindReply is the journal file's reply to a rewind request.
type rewindReply struct {
	DryRun bool            `json:"dry_run"`
	Plan   journal.Plan    `json:"plan"`
	Result *journal.Result `json:"result,omitempty"`
}

// parseChanges decodes the JSON lines of a changes reply.
func parseChanges(b []byte) ([]journal.PathChange, error) {
	var out []journal.PathChange
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var pc journal.PathChange
		if err := json.Unmarshal([]byte(line), &pc); err != nil {
			return nil, fmt.Errorf("line %d of the change list is not JSON: %v: %q", i+1, err, clip(line, 200))
		}
		out = append(out, pc)
	}
	return out, nil
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
