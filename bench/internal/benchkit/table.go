package benchkit

import (
	"fmt"
	"strings"
	"time"
)

// Mount makes the targets a benchmark compares, in the order given:
// "native" (always made, whatever only says), "loop-nocache" and "loop-1s"
// (bare go-fuse loopbacks without kernel caching and with 1 s timeouts),
// "loop-1s-perms" (loop-1s with default_permissions: LoopbackPerms),
// "rubinofs-off" (guard off, watcher on), "rubinofs" (guard enforcing,
// watcher on, the journal as shipped: on) and "rubinofs-nojournal" (as
// rubinofs, the journal off). only, if not empty, is a comma-separated list of the
// targets to make besides native (the -only flag); it may also name
// targets "bin:LABEL=PATH[:ARG...]", mounts made by an external rubinofs
// binary (Binary), which come after the named ones in the order given. A
// name in only that is neither in names nor a bin: spec is an error. Each
// mount is registered with AtExit.
func Mount(tmp, only string, names ...string) ([]*Target, error) {
	var targets []*Target
	known := map[string]bool{}
	for _, name := range names {
		known[name] = true
	}
	var specs []BinarySpec
	for _, f := range strings.Split(only, ",") {
		switch {
		case f == "" || known[f]:
		case strings.HasPrefix(f, BinaryPrefix):
			spec, err := ParseBinarySpec(f)
			if err != nil {
				return nil, err
			}
			if known[spec.Label] {
				return nil, fmt.Errorf("target %q: label %q is taken", f, spec.Label)
			}
			known[spec.Label] = true
			specs = append(specs, spec)
		default:
			return nil, fmt.Errorf("unknown target %q (want one of %s, or bin:LABEL=PATH)", f, strings.Join(names, ", "))
		}
	}
	for _, name := range names {
		if name != "native" && only != "" && !strings.Contains(","+only+",", ","+name+",") {
			continue
		}
		var t *Target
		var err error
		switch name {
		case "native":
			t, err = Native(tmp, name)
		case "loop-nocache":
			t, err = Loopback(tmp, name, nil)
		case "loop-1s":
			t, err = Loopback(tmp, name, Ptr(time.Second))
		case "loop-1s-perms":
			t, err = LoopbackPerms(tmp, name, Ptr(time.Second))
		case "rubinofs-off":
			t, err = Rubinofs(tmp, name, modeOff)
		case "rubinofs":
			t, err = Rubinofs(tmp, name, modeEnforce)
		case "rubinofs-nojournal":
			t, err = Rubinofs(tmp, name, modeEnforce, NoJournal)
		default:
			err = fmt.Errorf("unknown target %q", name)
		}
		if err != nil {
			return targets, err
		}
		targets = append(targets, t)
	}
	for _, spec := range specs {
		t, err := Binary(tmp, spec)
		if err != nil {
			return targets, err
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// Table prints one markdown table: a row per phase, a column per target
// with the value and, but for native, its ratio to native.
type Table struct {
	Phases  []string
	Targets []*Target
	// Value returns the figure of a target in a phase (a median).
	Value func(target, phase string) float64
	// Format formats a value ("%.3f" for seconds).
	Format string
	// Overheads adds the columns rubinofs / rubinofs-off (the guard's
	// overhead), rubinofs / rubinofs-nojournal (the journal's) and
	// rubinofs / loop-1s when those targets ran; with Binary targets
	// (A/B builds), the first one over each other one and over loop-1s.
	Overheads bool
}

// Print writes the table to standard output.
func (tb Table) Print() {
	has := map[string]bool{}
	for _, t := range tb.Targets {
		has[t.Name] = true
	}
	type extra struct{ title, num, den string }
	var extras []extra
	if tb.Overheads && has["rubinofs"] && has["rubinofs-off"] {
		extras = append(extras, extra{"guard overhead (rubinofs / rubinofs-off)", "rubinofs", "rubinofs-off"})
	}
	if tb.Overheads && has["rubinofs"] && has["rubinofs-nojournal"] {
		extras = append(extras, extra{"journal overhead (rubinofs / rubinofs-nojournal)", "rubinofs", "rubinofs-nojournal"})
	}
	if tb.Overheads && has["rubinofs"] && has["loop-1s"] {
		extras = append(extras, extra{"rubinofs / loop-1s", "rubinofs", "loop-1s"})
	}
	var bins []string
	for _, t := range tb.Targets {
		if t.Pid != 0 {
			bins = append(bins, t.Name)
		}
	}
	if tb.Overheads && len(bins) > 0 {
		for _, b := range bins[1:] {
			extras = append(extras, extra{bins[0] + " / " + b, bins[0], b})
		}
		if has["loop-1s"] {
			extras = append(extras, extra{bins[0] + " / loop-1s", bins[0], "loop-1s"})
		}
	}
	fmt.Printf("| phase |")
	for _, t := range tb.Targets {
		fmt.Printf(" %s |", t.Name)
	}
	for _, e := range extras {
		fmt.Printf(" %s |", e.title)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("---|", len(tb.Targets)+len(extras)))
	for _, p := range tb.Phases {
		fmt.Printf("| %s |", p)
		base := tb.Value("native", p)
		for _, t := range tb.Targets {
			v := tb.Value(t.Name, p)
			if t.Name == "native" {
				fmt.Printf(" "+tb.Format+" |", v)
			} else {
				fmt.Printf(" "+tb.Format+" (%.2f×) |", v, v/base)
			}
		}
		for _, e := range extras {
			fmt.Printf(" %.2f× |", tb.Value(e.num, p)/tb.Value(e.den, p))
		}
		fmt.Println()
	}
}
