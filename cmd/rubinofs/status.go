package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a mount's state (from .rubino/status)",
		ArgsUsage: "[MOUNTPOINT]",
		Flags:     []cli.Flag{mountFlag(), &cli.BoolFlag{Name: "json", Usage: "print the raw JSON"}},
		Action: func(c *cli.Context) error {
			// The mount as --mount DIR, like every control-file
			// subcommand, or as the one positional argument (as df and
			// mountpoint take it).
			flag, arg := mountFlagValue(c), c.Args().First()
			switch {
			case c.NArg() > 1:
				return cli.Exit("usage: rubinofs status [--json] [--mount DIR | MOUNTPOINT]", exitUsage)
			case flag != "" && arg != "" && flag != arg:
				return cli.Exit(fmt.Sprintf("--mount %s and MOUNTPOINT %s disagree: give one", flag, arg), exitUsage)
			case flag == "":
				flag = arg
			}
			mnt, err := findMount(flag)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			raw, err := readCtl(mnt, "status")
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			if c.Bool("json") {
				fmt.Fprint(c.App.Writer, string(raw))
				return nil
			}
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				return cli.Exit(fmt.Sprintf("%s/.rubino/status: %v", mnt, err), 1)
			}
			fmt.Fprint(c.App.Writer, formatStatus(mnt, doc))
			return nil
		},
	}
}

// formatStatus renders the status document for people: the main facts
// first, then every other section as indented key: value lines.
func formatStatus(mnt string, doc map[string]any) string {
	var b strings.Builder
	up := time.Duration(0)
	if f, ok := doc["uptime_s"].(float64); ok {
		up = time.Duration(f * float64(time.Second)).Round(time.Second)
	}
	fmt.Fprintf(&b, "mount:      %s\n", mnt)
	fmt.Fprintf(&b, "workspace:  %v\n", doc["workspace"])
	fmt.Fprintf(&b, "mode:       %v (unregistered callers: %v)\n", doc["mode"], doc["unregistered"])
	fmt.Fprintf(&b, "version:    %v, pid %v, up %v\n", doc["version"], doc["pid"], up)
	skip := map[string]bool{"workspace": true, "mode": true, "unregistered": true, "version": true, "pid": true, "uptime_s": true, "started": true}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		writeSection(&b, k, doc[k], "")
	}
	return b.String()
}

// durationUnits are the unit suffixes of status keys that hold a duration
// as a number ("short_timeout_ns"): such a key is printed without its
// suffix and its value as a duration (1s, 1.5ms, 1h2m3s).
var durationUnits = []struct {
	suffix string
	unit   time.Duration
}{{"_ns", time.Nanosecond}, {"_us", time.Microsecond}, {"_ms", time.Millisecond}, {"_s", time.Second}}

// writeSection writes key: v at indent, a map as an indented section, a
// list on one line, a number without trailing zeros and a duration key
// (durationUnits) as a duration.
func writeSection(b *strings.Builder, key string, v any, indent string) {
	if f, ok := v.(float64); ok {
		for _, u := range durationUnits {
			if name, cut := strings.CutSuffix(key, u.suffix); cut && name != "" {
				fmt.Fprintf(b, "%s%s: %v\n", indent, name, time.Duration(f*float64(u.unit)))
				return
			}
		}
	}
	switch x := v.(type) {
	case nil:
		fmt.Fprintf(b, "%s%s: none\n", indent, key)
	case map[string]any:
		fmt.Fprintf(b, "%s%s:\n", indent, key)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			writeSection(b, k, x[k], indent+"  ")
		}
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		fmt.Fprintf(b, "%s%s: [%s]\n", indent, key, strings.Join(parts, ", "))
	case float64:
		fmt.Fprintf(b, "%s%s: %s\n", indent, key, strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", x), "0"), "."))
	default:
		fmt.Fprintf(b, "%s%s: %v\n", indent, key, x)
	}
}
