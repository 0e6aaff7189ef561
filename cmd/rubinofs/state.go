package main

// `rubinofs state ls|prune`: the state directories that mounts left under
// the caller's own state root, and removing those whose workspace is gone
// (docs/DESIGN.md#state-retention).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/daemon"
)

func stateCommand() *cli.Command {
	return &cli.Command{
		Name:  "state",
		Usage: "list or prune the state directories mounts left under your state root",
		Description: "The state root is $XDG_STATE_HOME/rubinofs (~/.local/state/rubinofs; /var/lib/rubinofs for root).\n" +
			"Only its owner lists or prunes it. A state directory is removed only when rubinofs recorded its\n" +
			"workspace, that workspace is gone and no mount holds it (docs/DESIGN.md#state-retention).",
		Subcommands: []*cli.Command{
			{
				Name:   "ls",
				Usage:  "list every state directory: its workspace, whether it is gone, in use or kept, size and last use",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
				Action: stateLs,
			},
			{
				Name:  "prune",
				Usage: "remove the state directories of workspaces that no longer exist",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "dry-run", Usage: "print what would be removed, remove nothing"},
					&cli.DurationFlag{Name: "older-than", Usage: "only those unused for at least `DURATION` (default 0: any age)"},
					&cli.BoolFlag{Name: "legacy", Usage: "also those made before rubinofs recorded workspaces, when no directory of their name exists"},
					&cli.BoolFlag{Name: "json", Usage: "print a JSON array of what was (or would be) removed"},
				},
				Action: statePrune,
			},
		},
	}
}

// stateDirJSON is one state directory as --json prints it.
type stateDirJSON struct {
	Dir       string `json:"dir"`
	Kind      string `json:"kind"`
	Workspace string `json:"workspace,omitempty"`
	Bytes     int64  `json:"bytes"`
	LastUse   string `json:"last_use,omitempty"`
	Pid       int    `json:"pid,omitempty"`
}

func toJSON(infos []daemon.StateDirInfo) []stateDirJSON {
	out := []stateDirJSON{}
	for _, i := range infos {
		j := stateDirJSON{Dir: i.Dir, Kind: i.Kind, Workspace: i.Workspace, Bytes: i.Size, Pid: i.HolderPid}
		if !i.LastUse.IsZero() {
			j.LastUse = i.LastUse.UTC().Format(time.RFC3339)
		}
		out = append(out, j)
	}
	return out
}

func stateLs(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit("usage: rubinofs state ls [--json]", exitUsage)
	}
	root := stateRoot()
	infos, err := daemon.ScanStateRoot(root, os.Geteuid(), true)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if c.Bool("json") {
		return json.NewEncoder(os.Stdout).Encode(toJSON(infos))
	}
	fmt.Printf("state root %s: %d state directories\n", root, len(infos))
	printStateDirs(os.Stdout, infos, time.Now())
	return nil
}

func statePrune(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit("usage: rubinofs state prune [--dry-run] [--older-than DURATION] [--legacy] [--json]", exitUsage)
	}
	if c.Duration("older-than") < 0 {
		return cli.Exit("--older-than: must not be negative (0: any age)", exitUsage)
	}
	root := stateRoot()
	removed, err := daemon.PruneStateRoot(daemon.PruneOptions{Root: root, UID: os.Geteuid(),
		OlderThan: c.Duration("older-than"), Legacy: c.Bool("legacy"), DryRun: c.Bool("dry-run")})
	if c.Bool("json") {
		json.NewEncoder(os.Stdout).Encode(toJSON(removed))
	} else {
		verb := "removed"
		if c.Bool("dry-run") {
			verb = "would remove"
		}
		var total int64
		for _, r := range removed {
			total += r.Size
		}
		fmt.Printf("%s %d state directories (%s) under %s\n", verb, len(removed), humanBytes(total), root)
		printStateDirs(os.Stdout, removed, time.Now())
	}
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	return nil
}

// printStateDirs prints one line a directory: kind, size, last use (as an
// age), path and workspace.
func printStateDirs(w io.Writer, infos []daemon.StateDirInfo, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, i := range infos {
		kind := i.Kind
		if i.HolderPid > 0 {
			kind = fmt.Sprintf("%s (pid %d)", kind, i.HolderPid)
		}
		ws := i.Workspace
		if ws == "" {
			ws = "?"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\tworkspace %s\n", kind, humanBytes(i.Size), age(now, i.LastUse), i.Dir, ws)
	}
	tw.Flush()
}

// humanBytes renders n bytes as 12.3 MB (decimal units); "?" when unknown.
func humanBytes(n int64) string {
	switch {
	case n < 0:
		return "?"
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

// age renders the time since t as "used 3d ago", "used 5h ago", "used
// 2m ago" or "used just now".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "last use unknown"
	}
	d := now.Sub(t)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("used %dd ago", int(d/(24*time.Hour)))
	case d >= time.Hour:
		return fmt.Sprintf("used %dh ago", int(d/time.Hour))
	case d >= time.Minute:
		return fmt.Sprintf("used %dm ago", int(d/time.Minute))
	}
	return "used just now"
}
