package main

// rubinofs policy: the ignore rules that exempt paths from the guard, and
// their acceptance by the mount's owner (docs/DESIGN.md#exempt-widening),
// through .rubino/policy.

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/urfave/cli/v2"
)

func policyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "show the accepted exemption rules and those waiting (.rubino/policy); `reload` accepts them",
		Description: "A git-ignore rule (.gitignore, .git/info/exclude) written through the mount exempts nothing\n" +
			"until the mount owner accepts it with `rubinofs policy reload`, run outside every session.\n" +
			"Removing a rule applies at once.",
		Flags:  []cli.Flag{mountFlag(), &cli.BoolFlag{Name: "json", Usage: "print the raw JSON"}},
		Action: policyShow,
		Subcommands: []*cli.Command{
			{
				Name:   "reload",
				Usage:  "accept every ignore rule now on disk (the mount owner or root, outside every session)",
				Flags:  []cli.Flag{mountFlag()},
				Action: policyReload,
			},
		},
	}
}

// policyDoc is .rubino/policy's JSON.
type policyDoc struct {
	AcceptedAt time.Time           `json:"accepted_at"`
	Accepted   map[string][]string `json:"accepted"`
	Pending    []struct {
		Path    string   `json:"path"`
		Added   []string `json:"added"`
		Removed []string `json:"removed"`
	} `json:"pending"`
	Hint      string `json:"hint"`
	SaveError string `json:"save_error"`
}

func policyShow(c *cli.Context) error {
	raw, err := readMountCtl(c, "policy")
	if err != nil {
		return err
	}
	if c.Bool("json") {
		fmt.Fprint(c.App.Writer, string(raw))
		return nil
	}
	var doc policyDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return cli.Exit(fmt.Sprintf(".rubino/policy: %v", err), 1)
	}
	writePolicy(c.App.Writer, &doc)
	return nil
}

// writePolicy prints the policy for people: what counts, what waits, and
// what to do about it.
func writePolicy(w io.Writer, doc *policyDoc) {
	fmt.Fprintf(w, "rules accepted at %s\n", doc.AcceptedAt.Local().Format(time.RFC3339))
	paths := make([]string, 0, len(doc.Accepted))
	for p := range doc.Accepted {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "  %s: %d rule(s)\n", p, len(doc.Accepted[p]))
	}
	if len(doc.Pending) == 0 {
		fmt.Fprintln(w, "no changes waiting")
	} else {
		fmt.Fprintln(w, "changes waiting (added rules exempt nothing yet; removed ones are already out of force):")
		for _, p := range doc.Pending {
			fmt.Fprintf(w, "  %s\n", p.Path)
			for _, l := range p.Added {
				fmt.Fprintf(w, "    + %s\n", l)
			}
			for _, l := range p.Removed {
				fmt.Fprintf(w, "    - %s\n", l)
			}
		}
		fmt.Fprintln(w, "to accept them: rubinofs policy reload (as the mount owner, outside every session)")
	}
	if doc.SaveError != "" {
		fmt.Fprintf(w, "warning: the accepted rules could not be kept for the next mount: %s\n", doc.SaveError)
	}
}

func policyReload(c *cli.Context) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	if err := writeCtl(mnt, "policy", []byte("reload\n")); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	fmt.Fprintln(c.App.Writer, "exemption rules accepted: every ignore rule now on disk counts")
	return nil
}
