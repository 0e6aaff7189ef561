// Command floor measures the protocol floor of the coding-agent workload
// on this machine: what a FUSE filesystem that must see every open could
// at best cost per phase, against which rubinofs as shipped is compared.
//
// It measures, in child processes, the round-trip cost of one FUSE
// request: a GETATTR (fstat(2) of an open file on a bare go-fuse loopback
// with zero timeouts, less native fstat) and an OPEN with its RELEASE
// (open(2) and close(2) of one file on the floor mount, less native),
// medians of -n calls, over -probe-rounds rounds before the phases and
// as many after. Then it runs the phases of bench/agent
// (benchkit.AgentSteps) on three targets alternating, the order rotating
// every run:
//
//	native    the workload directory itself
//	floor     a bare go-fuse loopback made to send the kernel as few
//	          requests as a filesystem that sees every open can:
//	          one-hour entry, attribute and negative timeouts,
//	          FOPEN_KEEP_CACHE and FOPEN_NOFLUSH on every open,
//	          FOPEN_CACHE_DIR on every directory open, kernel
//	          passthrough of every file (as root), and rubinofs's
//	          kernel-facing options (default_permissions, POSIX ACLs,
//	          atomic O_TRUNC); no writeback cache
//	rubinofs  rubinofs as shipped, in-process (benchkit.Rubinofs:
//	          enforcing, watcher, journal; a checkpoint after the clone)
//
// Both mounts count their requests by opcode with the same layer
// (internal/observe's wrapper, read in-process: no request of the
// harness's own). Per phase it prints native, the floor (native plus,
// per request the floor mount received, its price: Costs.Cost), the
// floor mount's own measured time, rubinofs, and rubinofs over each;
// then the requests of each mount by opcode and the ones rubinofs sent
// beyond the floor's (medians of the runs, per opcode).
//
// Usage (as root): go build -o /tmp/floor ./bench/floor && nice -n -20 /tmp/floor -runs 5
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

var (
	runs        = flag.Int("runs", 3, "runs of the workload per target (each run does every phase on every target)")
	module      = flag.String("module", benchkit.Module, "module whose source is the repository (fetched with go mod download)")
	probeN      = flag.Int("n", 20000, "calls per round-trip probe")
	probeRounds = flag.Int("probe-rounds", 3, "round-trip probe rounds before the phases, and as many after")
	skipRubino  = flag.Bool("no-rubinofs", false, "leave rubinofs out (native and the floor only)")
	rawJSON     = flag.String("json", "", "also write the costs, every run's seconds and requests by op to `FILE`")

	ioURing    = flag.Bool("io-uring", false, "the probe loopbacks and the floor mount serve over FUSE over io_uring (the harness switches the fuse module's enable_uring on for the run and back); rubinofs stays as shipped")
	probesOnly = flag.Bool("probes-only", false, "measure the round-trip costs only (-probe-rounds rounds), not the workload")

	// The child side of a probe (runProbe).
	probeKind = flag.String("probe", "", "internal: time `KIND` calls (fstat, open) on -file and exit")
	probePath = flag.String("file", "", "internal: the file of -probe")
)

// target is one place the phases run, with its request counter (nil for
// native).
type target struct {
	name, dir string
	reg       *prometheus.Registry
	bk        *benchkit.Target // the benchkit target, for a rubinofs checkpoint; nil for the floor
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	if *probeKind != "" {
		if err := runProbe(*probeKind, *probePath, *probeN); err != nil {
			log.Fatal(err)
		}
		return
	}
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	if *ioURing {
		if err := benchkit.KernelURing(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("load average at the start: %s", loadavg())
	tmp, err := benchkit.TempDir("rubinofs-floor-")
	if err != nil {
		log.Fatal(err)
	}
	probes, err := setupProbes(tmp)
	if err != nil {
		benchkit.Fatal(err)
	}
	var rounds []costRound
	for range *probeRounds {
		rounds = append(rounds, probes.measure(*probeN))
	}
	if *probesOnly {
		printCosts(rounds)
		return
	}

	origin := filepath.Join(tmp, "origin")
	if err := benchkit.MakeOrigin(*module, origin); err != nil {
		benchkit.Fatal(err)
	}
	var bks []*benchkit.Target
	if *skipRubino {
		nat, err := benchkit.Native(tmp, "native")
		if err != nil {
			benchkit.Fatal(err)
		}
		bks = []*benchkit.Target{nat}
	} else if bks, err = benchkit.Mount(tmp, "rubinofs", "native", "rubinofs"); err != nil {
		benchkit.Fatal(err)
	}
	fl, err := mountLoop(tmp, "floor", benchkit.Ptr(time.Hour), true)
	if err != nil {
		benchkit.Fatal(err)
	}
	targets := []*target{{name: "native", dir: bks[0].Dir}, {name: "floor", dir: fl.dir, reg: fl.reg}}
	for _, t := range bks[1:] {
		targets = append(targets, &target{name: t.Name, dir: t.Dir, reg: t.Daemon.Obs.Registry(), bk: t})
	}

	times := map[string]map[string][]time.Duration{}       // target -> phase -> runs
	counts := map[string]map[string][]map[string]float64{} // target -> phase -> runs' requests by op
	for _, t := range targets {
		times[t.name], counts[t.name] = map[string][]time.Duration{}, map[string][]map[string]float64{}
	}
	for r := range *runs {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			for _, s := range benchkit.AgentSteps {
				var before map[string]float64
				if t.reg != nil {
					before = benchkit.OpCounts(t.reg)
				}
				d, err := benchkit.Run(t.dir, s.Script, "ORIGIN="+origin)
				if err != nil {
					benchkit.Fatalf("%s/%s: %v", t.name, s.Name, err)
				}
				times[t.name][s.Name] = append(times[t.name][s.Name], d)
				if t.reg != nil {
					counts[t.name][s.Name] = append(counts[t.name][s.Name], delta(before, benchkit.OpCounts(t.reg)))
				}
				if s.Name == "clone" && t.bk != nil && t.bk.Journaled() {
					// As bench/agent: the agent's prompt, untimed.
					if err := benchkit.Checkpoint(t.dir, fmt.Sprintf("run %d", r+1)); err != nil {
						benchkit.Fatalf("%s: checkpoint: %v", t.name, err)
					}
				}
			}
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}
	for range *probeRounds {
		rounds = append(rounds, probes.measure(*probeN))
	}
	fmt.Printf("load average at the end: %s", loadavg())
	costs := printCosts(rounds)
	report(targets, costs, times, counts)
	if *rawJSON != "" {
		writeJSON(*rawJSON, costs, times, counts)
	}
}

// writeJSON writes the run's raw figures to path (-json): the costs in
// µs, {target: {phase: [seconds of each run]}} and {target: {phase:
// [requests by op of each run]}}.
func writeJSON(path string, c Costs, times map[string]map[string][]time.Duration, counts map[string]map[string][]map[string]float64) {
	secs := map[string]map[string][]float64{}
	for t, phases := range times {
		secs[t] = map[string][]float64{}
		for p, ds := range phases {
			for _, d := range ds {
				secs[t][p] = append(secs[t][p], d.Seconds())
			}
		}
	}
	out := map[string]any{
		"getattr_us": float64(c.Getattr) / 1e3, "open_release_us": float64(c.OpenPair) / 1e3,
		"seconds": secs, "requests": counts,
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		log.Printf("-json: %v", err)
	}
}

// loadavg is /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error() + "\n"
	}
	return string(b)
}

// median is benchkit.Median.
var median = benchkit.Median

// report prints the per-phase table and the request counts.
func report(targets []*target, c Costs, times map[string]map[string][]time.Duration, counts map[string]map[string][]map[string]float64) {
	has := map[string]bool{}
	for _, t := range targets {
		has[t.name] = true
	}
	fmt.Printf("\nper phase, medians of %d runs, seconds; floor = native + Σ requests × cost (floor mount's requests)\n\n", *runs)
	fmt.Print("| phase | native | floor | floor mount, measured | rubinofs | rubinofs / floor | rubinofs / floor mount | rubinofs / native | requests, floor | requests, rubinofs |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var tn, tf, tm, tr time.Duration
	var qf, qr float64
	for _, s := range benchkit.AgentSteps {
		p := s.Name
		nat := median(times["native"][p])
		fc := medianCounts(counts["floor"][p])
		floor := c.Floor(nat, fc)
		meas := median(times["floor"][p])
		tn, tf, tm, qf = tn+nat, tf+floor, tm+meas, qf+total(fc)
		fmt.Printf("| %s | %.3f | %.3f | %.3f |", p, nat.Seconds(), floor.Seconds(), meas.Seconds())
		if has["rubinofs"] {
			rb := median(times["rubinofs"][p])
			rc := medianCounts(counts["rubinofs"][p])
			tr, qr = tr+rb, qr+total(rc)
			fmt.Printf(" %.3f | %.2f× | %.2f× | %.2f× | %.0f | %.0f |\n", rb.Seconds(), rb.Seconds()/floor.Seconds(), rb.Seconds()/meas.Seconds(), rb.Seconds()/nat.Seconds(), total(fc), total(rc))
		} else {
			fmt.Printf(" - | - | - | - | %.0f | - |\n", total(fc))
		}
	}
	fmt.Printf("| total | %.3f | %.3f | %.3f |", tn.Seconds(), tf.Seconds(), tm.Seconds())
	if has["rubinofs"] {
		fmt.Printf(" %.3f | %.2f× | %.2f× | %.2f× | %.0f | %.0f |\n", tr.Seconds(), tr.Seconds()/tf.Seconds(), tr.Seconds()/tm.Seconds(), tr.Seconds()/tn.Seconds(), qf, qr)
	} else {
		fmt.Printf(" - | - | - | - | %.0f | - |\n", qf)
	}
	fmt.Printf("\n(totals are sums of the phases' medians; requests leave FORGET out)\n")

	fmt.Printf("\nrequests per phase by opcode (median of %d runs per opcode)\n\n", *runs)
	if has["rubinofs"] {
		fmt.Print("| phase | floor | rubinofs | rubinofs beyond the floor | the floor beyond rubinofs |\n|---|---|---|---|---|\n")
	} else {
		fmt.Print("| phase | floor |\n|---|---|\n")
	}
	for _, s := range benchkit.AgentSteps {
		fc := medianCounts(counts["floor"][s.Name])
		if !has["rubinofs"] {
			fmt.Printf("| %s | %s |\n", s.Name, format(fc))
			continue
		}
		rc := medianCounts(counts["rubinofs"][s.Name])
		fmt.Printf("| %s | %s | %s | %s | %s |\n", s.Name, format(fc), format(rc), format(excess(rc, fc)), format(excess(fc, rc)))
	}
	fmt.Printf("\nspread of the phases, seconds (fastest-slowest)\n\n| phase |")
	for _, t := range targets {
		fmt.Printf(" %s |", t.name)
	}
	fmt.Printf("\n|---|")
	for range targets {
		fmt.Print("---|")
	}
	fmt.Println()
	for _, s := range benchkit.AgentSteps {
		fmt.Printf("| %s |", s.Name)
		for _, t := range targets {
			ds := times[t.name][s.Name]
			fmt.Printf(" %.3f-%.3f |", slices.Min(ds).Seconds(), slices.Max(ds).Seconds())
		}
		fmt.Println()
	}
}
