package main

// `rubinofs denials`: the denial log (the newest lines) or, with
// --summary, the per-session summary that counts every refusal by (path,
// code) (docs/DESIGN.md#denial-summary), through .rubino/self/, the
// session's .rubino/sessions/NAME/ or, with --all, .rubino/guard/ (every
// session the caller may see).

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/guard"
)

func denialsCommand() *cli.Command {
	return &cli.Command{
		Name:  "denials",
		Usage: "show refused writes: the newest lines of the denial log, or --summary (every refusal, by path and code)",
		Description: "Without --session or --all: the caller's own session. The log keeps the newest lines only;\n" +
			"the summary counts every refusal since the mount, one entry per (path, code), and counts those\n" +
			"past its bound as \"other\" (docs/DESIGN.md#denial-summary).",
		Flags: []cli.Flag{
			sessionFlag(), mountFlag(),
			&cli.BoolFlag{Name: "all", Usage: "every session the caller may see (.rubino/guard/)"},
			&cli.BoolFlag{Name: "summary", Usage: "the per-session summary instead of the log's lines"},
			&cli.BoolFlag{Name: "json", Usage: "print the raw JSON lines"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "then print each new refusal as it is logged, until interrupted (the log is read again every 0.5 s: a control file's size is 0, as a /proc file's, so tail -f cannot follow it)"},
		},
		Action: denialsAction,
	}
}

func denialsAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("rubinofs denials takes no arguments (got %q): name a session with --session NAME", c.Args().First()), exitUsage)
	}
	dir := "self/"
	switch name := c.String("session"); {
	case name != "" && c.Bool("all"):
		return cli.Exit("rubinofs denials: --session and --all disagree: give one", exitUsage)
	case name != "":
		if !sessionNameRE.MatchString(name) {
			return cli.Exit(fmt.Sprintf("rubinofs denials: --session %q is not a session name (letters, digits, '.', '_', '-'; at most 64)", name), exitUsage)
		}
		dir = "sessions/" + name + "/"
	case c.Bool("all"):
		dir = "guard/"
	}
	file := "denials"
	if c.Bool("summary") {
		if c.Bool("follow") {
			return cli.Exit("rubinofs denials: --follow prints the log's new lines, not the --summary: give one", exitUsage)
		}
		file = "denials.summary"
	}
	if c.Bool("follow") {
		return followDenials(c, dir+file)
	}
	raw, err := readMountCtl(c, dir+file)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		fmt.Fprint(c.App.Writer, string(raw))
		return nil
	}
	if c.Bool("summary") {
		return formatSummaries(c.App.Writer, raw)
	}
	printDenials(c.App.Writer, raw)
	return nil
}

// printDenials prints the denial log's JSON lines raw for people: time,
// session, operation, code and message, one line each (a control
// character of a file name escaped, so no name starts a line of its own).
func printDenials(w io.Writer, raw []byte) {
	for _, d := range parseDenials(raw) {
		fmt.Fprintf(w, "%s %s %s %s: %s\n", d.Time.UTC().Format(time.RFC3339), d.Session, d.Op, d.Code, oneLine(d.Message))
	}
}

// followInterval is how often `denials --follow` reads the log again.
const followInterval = 500 * time.Millisecond

// followDenials prints the lines of the denial log at rel, then every line
// that appears in it, reading it again every followInterval until the
// command is interrupted or a read fails (the mount went away: exit 1).
// A line is new when the previous read did not hold it, so what it
// remembers is bounded by the log's own bound; lines logged and pushed out
// of the log between two reads are not seen (the --summary counts them).
func followDenials(c *cli.Context, rel string) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	var seen map[string]bool
	for {
		raw, err := readCtl(mnt, rel)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		now := map[string]bool{}
		for _, line := range strings.SplitAfter(string(raw), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			now[line] = true
			if seen[line] {
				continue
			}
			if c.Bool("json") {
				fmt.Fprint(c.App.Writer, line)
			} else {
				printDenials(c.App.Writer, []byte(line))
			}
		}
		seen = now
		time.Sleep(followInterval)
	}
}

// formatSummaries renders .rubino/.../denials.summary for people: per
// session a header with the counts, then count, code and path (quoted as
// the journal commands quote it when it holds white space, a quote or a
// control byte), most counted first.
func formatSummaries(w io.Writer, raw []byte) error {
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var s guard.DenialSummary
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return cli.Exit(fmt.Sprintf("rubinofs denials: a summary line is not JSON (%v): %q", err, line), 1)
		}
		fmt.Fprintf(w, "session %s: %d refused", s.Session, s.Denials)
		if s.Warnings > 0 {
			fmt.Fprintf(w, ", %d would have been (warn mode)", s.Warnings)
		}
		if s.Other > 0 {
			fmt.Fprintf(w, "; %d not listed (other: past the summary's bound)", s.Other)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%8s  %-15s %s\n", "count", "code", "path")
		for _, e := range s.Entries {
			fmt.Fprintf(w, "%8d  %-15s %s\n", e.Count, e.Code, quoteToken(e.Path))
		}
	}
	return nil
}
