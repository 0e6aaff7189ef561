// Command agent measures how much slower a coding-agent workload runs through
// rubinofs than natively or through a bare go-fuse loopback. It runs the
// same coding-agent workload on a real repository (golang.org/x/tools from
// the Go module proxy, put under git) on six targets, alternating them in
// one run (the order rotates every run) so machine noise spreads evenly:
//
//	native        the workload directory itself
//	loop-nocache  a bare go-fuse loopback with no kernel caching
//	loop-1s       a bare go-fuse loopback with 1 s entry/attribute timeouts
//	loop-1s-perms loop-1s with default_permissions (the kernel checks
//	              permissions, as on a rubinofs mount)
//	rubinofs-off  rubinofs with the guard off (--mode off), the watcher on
//	rubinofs      rubinofs with the guard enforcing, the watcher and the
//	              change journal on (the shipped defaults)
//	rubinofs-nojournal  rubinofs as above with the journal off
//	              (--journal=false): the journal's cost is rubinofs over it
//	bin:LABEL=PATH[:ARG...]  an A/B target: rubinofs mounted by the
//	              external binary PATH (cmd/rubinofs built from any commit)
//	              through its CLI, `PATH mount --daemon ARG...`, so with no
//	              ARG that build's shipped defaults (enforcing, watcher on,
//	              its journal on if it has one); named LABEL in the tables.
//	              Only through -only, after the named targets in the order
//	              given: two of them compare two builds in one run
//	              (benchkit.Binary)
//
// On a journaled target each run takes a checkpoint of the workload's
// session after the first phase (the clone, or npm's install), untimed, as the prompt hook takes one per
// prompt: the phases after it change files that existed at the
// checkpoint, so they pay the pre-image copies of first changes (the
// edit's 300 files, and every file rm -rf removes), as an agent working
// on a checked-out repository does (docs/DESIGN.md#journal-store).
//
// Phases, each a real tool run by /bin/sh: clone, git status, git grep,
// grep -rn, read all (cat of every file), find (from the workspace root),
// edit (read + sed -i on 300 files), git diff, git status of the dirty
// tree, restore (git checkout -- .), rm -rf. With -workload switch the
// phases are instead a branch switch (benchkit.SwitchSteps): clone of a
// repository holding -old-module on branch old and -module on main,
// git checkout old (thousands of files rewritten, created and removed),
// git checkout main, rm -rf. With -workload npm they are a Node.js
// project's (benchkit.NpmSteps): npm ci from a warm cache (about 5,000
// files in 840 directories), its jest test, grep -rl and find over
// node_modules, rm -rf; the harness needs npm and, once, the registry.
// It prints per phase the
// medians, the ratio to native, the guard's overhead (rubinofs over
// rubinofs-off), the journal's (rubinofs over rubinofs-nojournal) and
// rubinofs over the bare 1 s loopback, and with bin: targets the first
// one over each other one and over the loopback; the spread of the runs
// (fastest and slowest, seconds) per target and phase; with bin: targets
// the CPU time each phase cost each daemon (utime + stime of its
// process, which the machine's load moves far less than wall time); the journal's cost
// in total and the size of its stores after the workload; then, with -ops,
// the FUSE requests each phase cost each enforcing mount, "rubinofs" and
// the bin: targets (from .rubino/metrics before and after the phase, last
// run); then the latency
// from a write in the backing directory to its visibility through the
// mount (p50, p99).
//
// Usage (as root, or with fusermount3): go run ./bench/agent [-runs 5]
//
// Two builds alternated in one run (the medians' noise is then the same
// for both):
//
//	go build -o /tmp/agent ./bench/agent && nice -n -20 /tmp/agent -runs 5 -latency 0 \
//	    -only loop-1s,bin:new=/tmp/rubinofs-new,bin:old=/tmp/rubinofs-old
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

var (
	runs      = flag.Int("runs", 5, "runs per target (each run does every phase on every target)")
	module    = flag.String("module", benchkit.Module, "module whose source is the repository (fetched with go mod download)")
	latencyN  = flag.Int("latency", 200, "external writes to time for visibility latency (0: skip)")
	keepGoing = flag.Bool("k", false, "keep going after a failed phase")
	only      = flag.String("only", "", "comma-separated targets to run besides native (default all: loop-nocache,loop-1s,loop-1s-perms,rubinofs-off,rubinofs,rubinofs-nojournal);\n"+
		"bin:LABEL=PATH[:ARG...] adds a mount made by the rubinofs binary PATH (any commit's build) through its CLI (PATH mount --daemon ARG...), named LABEL")
	rawJSON     = flag.String("json", "", "also write every run's seconds, {target: {phase: [s, ...]}}, to `FILE`, and the bin: daemons' CPU seconds to FILE less .json plus .cpu.json")
	showOps     = flag.Bool("ops", true, "print the FUSE requests per phase of each enforcing mount, rubinofs and bin: (.rubino/metrics before and after)")
	workload    = flag.String("workload", "agent", "the workload: agent (benchkit.AgentSteps on -module), switch (a branch switch between -old-module and -module: clone, checkout of the old branch and back, rm -rf) or npm (a Node.js project: npm ci, jest, grep, find, rm -rf; benchkit.NpmSteps)")
	oldModule   = flag.String("old-module", benchkit.OldModule, "with -workload switch: the module version on the old branch")
	kernelURing = flag.Bool("kernel-uring", false, "switch the fuse module's enable_uring on for the run and back at the end, so that bin: targets given --io-uring serve over io_uring")
	cpuprof     = flag.String("cpuprofile", "", "write a CPU profile of this process (the in-process daemons, not the bin: targets') to `FILE`")
)

// steps is the workload (benchkit.AgentSteps, shared with bench/floor,
// benchkit.SwitchSteps with -workload switch, benchkit.NpmSteps with
// -workload npm); each runs with /bin/sh in the target directory.
var steps = benchkit.AgentSteps

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./bench/agent [flags] (as root)\n\n"+
			"Runs a coding-agent workload on golang.org/x/tools on native, two bare go-fuse loopbacks,\n"+
			"rubinofs --mode off, rubinofs enforcing and rubinofs enforcing without its journal, alternating,\n"+
			"and prints medians and ratios, and the journal's store size. A/B builds: -only bin:new=PATH,bin:old=PATH\n"+
			"mounts with each rubinofs binary through its CLI (its defaults), alternated with the others.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	if *kernelURing {
		if err := benchkit.KernelURing(); err != nil {
			log.Fatal(err)
		}
	}
	tmp, err := benchkit.TempDir("rubinofs-bench-")
	if err != nil {
		log.Fatal(err)
	}
	origin := filepath.Join(tmp, "origin")
	switch *workload {
	case "agent":
		err = benchkit.MakeOrigin(*module, origin)
	case "switch":
		steps = benchkit.SwitchSteps
		err = benchkit.MakeBranchedOrigin(*oldModule, *module, origin)
	case "npm":
		steps = benchkit.NpmSteps
		err = benchkit.MakeNpmOrigin(origin)
	default:
		err = fmt.Errorf("-workload %q: want agent, switch or npm", *workload)
	}
	if err != nil {
		benchkit.Fatal(err)
	}
	targets, err := benchkit.Mount(tmp, *only, "native", "loop-nocache", "loop-1s", "loop-1s-perms", "rubinofs-off", "rubinofs", "rubinofs-nojournal")
	if err != nil {
		benchkit.Fatal(err)
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			benchkit.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	// times[target][step] = durations over runs; the last "step" is total.
	times := map[string]map[string][]time.Duration{}
	cpu := map[string]map[string][]time.Duration{} // the bin: targets' daemon CPU, same shape
	for _, t := range targets {
		times[t.Name] = map[string][]time.Duration{}
		if t.Pid != 0 {
			cpu[t.Name] = map[string][]time.Duration{}
		}
	}
	ops := map[string]map[string]string{} // target -> step -> FUSE op deltas of an enforcing mount, last run
	for _, t := range targets {
		if *showOps && (t.Name == "rubinofs" || t.Pid != 0) {
			ops[t.Name] = map[string]string{}
		}
	}
	for r := 0; r < *runs; r++ {
		for i := range targets {
			t := targets[(i+r)%len(targets)] // rotate the order each run
			total := time.Duration(0)
			for _, s := range steps {
				var before map[string]float64
				if ops[t.Name] != nil {
					before, _ = benchkit.Ops(t.Dir)
				}
				cpu0 := daemonTime(t)
				d, err := benchkit.Run(t.Dir, s.Script, "ORIGIN="+origin)
				if t.Pid != 0 {
					cpu[t.Name][s.Name] = append(cpu[t.Name][s.Name], daemonTime(t)-cpu0)
				}
				if err != nil {
					msg := fmt.Sprintf("%s/%s: %v", t.Name, s.Name, err)
					if !*keepGoing {
						benchkit.Fatal(msg)
					}
					log.Print(msg)
				}
				if before != nil {
					if after, err := benchkit.Ops(t.Dir); err == nil {
						ops[t.Name][s.Name] = benchkit.OpsDelta(before, after)
					}
				}
				times[t.Name][s.Name] = append(times[t.Name][s.Name], d)
				total += d
				if s.Name == steps[0].Name && t.Journaled() {
					// The agent's prompt, untimed: the repository (the
					// installed project) exists, and what follows changes it.
					if err := benchkit.Checkpoint(t.Dir, fmt.Sprintf("run %d", r+1)); err != nil {
						benchkit.Fatalf("%s: checkpoint: %v", t.Name, err)
					}
				}
			}
			times[t.Name]["total"] = append(times[t.Name]["total"], total)
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}
	report(targets, times)
	spread(targets, times)
	daemonCPU(targets, cpu)
	if *rawJSON != "" {
		writeJSON(*rawJSON, times)
		writeJSON(strings.TrimSuffix(*rawJSON, ".json")+".cpu.json", cpu)
	}
	journalReport(targets, times)
	for _, t := range targets {
		if n := t.Denials(); n > 0 {
			fmt.Printf("\n%s: %d guard denials during the workload\n", t.Name, n)
		}
	}
	for _, t := range targets {
		if ops[t.Name] == nil {
			continue
		}
		fmt.Printf("\nFUSE requests per phase, %s (last run; includes the .rubino/metrics read)\n\n", t.Name)
		fmt.Println("| phase | requests |")
		fmt.Println("|---|---|")
		for _, s := range steps {
			fmt.Printf("| %s | %s |\n", s.Name, ops[t.Name][s.Name])
		}
	}
	for _, t := range targets {
		if t.Name == "rubinofs" && *latencyN > 0 {
			latency(t)
		}
	}
}

// report prints a markdown table of medians and ratios to native, with
// the guard's overhead and rubinofs against the bare 1 s loopback.
func report(targets []*benchkit.Target, times map[string]map[string][]time.Duration) {
	names := stepNames()
	fmt.Printf("\nmedians of %d runs, seconds (ratio to native)\n\n", *runs)
	benchkit.Table{Phases: append(names, "total"), Targets: targets, Format: "%.3f", Overheads: true,
		Value: func(t, p string) float64 { return benchkit.Median(times[t][p]).Seconds() }}.Print()
}

// spread prints, per phase and target, the fastest and the slowest of
// the runs (seconds): a difference between two targets' medians smaller
// than this spread is within the run-to-run noise.
func spread(targets []*benchkit.Target, times map[string]map[string][]time.Duration) {
	fmt.Printf("\nspread of %d runs, seconds (fastest-slowest)\n\n| phase |", *runs)
	for _, t := range targets {
		fmt.Printf(" %s |", t.Name)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("---|", len(targets)))
	for _, p := range append(stepNames(), "total") {
		fmt.Printf("| %s |", p)
		for _, t := range targets {
			ds := times[t.Name][p]
			lo, hi := slices.Min(ds), slices.Max(ds)
			fmt.Printf(" %.3f-%.3f |", lo.Seconds(), hi.Seconds())
		}
		fmt.Println()
	}
}

// daemonCPU prints, per phase, the median CPU time (user and system, all
// threads, seconds) of each bin: target's daemon over the runs, with the
// fastest and slowest run and the first build over each other one: the
// figure of two builds that the machine's load moves least. Work a daemon
// does after a phase's last request returned (the journal's flush,
// watcher events of its own changes) counts in its next phase.
func daemonCPU(targets []*benchkit.Target, cpu map[string]map[string][]time.Duration) {
	var bins []string
	for _, t := range targets {
		if t.Pid != 0 {
			bins = append(bins, t.Name)
		}
	}
	if len(bins) == 0 {
		return
	}
	fmt.Printf("\ndaemon CPU per phase, seconds, median [fastest-slowest] of %d runs (bin: targets)\n\n| phase |", *runs)
	for _, b := range bins {
		fmt.Printf(" %s |", b)
	}
	for _, b := range bins[1:] {
		fmt.Printf(" %s / %s |", bins[0], b)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("---|", 2*len(bins)-1))
	for _, s := range steps {
		fmt.Printf("| %s |", s.Name)
		for _, b := range bins {
			ds := cpu[b][s.Name]
			fmt.Printf(" %.2f [%.2f-%.2f] |", benchkit.Median(ds).Seconds(), slices.Min(ds).Seconds(), slices.Max(ds).Seconds())
		}
		for _, b := range bins[1:] {
			fmt.Printf(" %.2f× |", benchkit.Median(cpu[bins[0]][s.Name]).Seconds()/benchkit.Median(cpu[b][s.Name]).Seconds())
		}
		fmt.Println()
	}
}

// daemonTime is the CPU time a bin: target's daemon has used so far (0
// for other targets).
func daemonTime(t *benchkit.Target) time.Duration {
	if t.Pid == 0 {
		return 0
	}
	d, _ := benchkit.ProcCPU(t.Pid)
	return d
}

// stepNames is the names of steps, in order.
func stepNames() []string {
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	return names
}

// writeJSON writes times in seconds, {target: {phase: [run 1, ...]}}, to
// path (-json).
func writeJSON(path string, times map[string]map[string][]time.Duration) {
	out := map[string]map[string][]float64{}
	for t, phases := range times {
		out[t] = map[string][]float64{}
		for p, ds := range phases {
			for _, d := range ds {
				out[t][p] = append(out[t][p], d.Seconds())
			}
		}
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		log.Printf("-json: %v", err)
	}
}

// journalTarget is the journal's cost the issue sets: at most 10% of the
// workload's total time.
const journalTarget = 1.10

// journalReport prints the journal's cost in total (rubinofs over
// rubinofs-nojournal, medians) against journalTarget, and the size of the
// store of each journaled target (rubinofs, bin:) after every run.
func journalReport(targets []*benchkit.Target, times map[string]map[string][]time.Duration) {
	var on *benchkit.Target
	off := false
	for _, t := range targets {
		switch t.Name {
		case "rubinofs":
			on = t
		case "rubinofs-nojournal":
			off = true
		}
	}
	if on != nil && off {
		ratio := benchkit.Median(times["rubinofs"]["total"]).Seconds() / benchkit.Median(times["rubinofs-nojournal"]["total"]).Seconds()
		verdict := "within"
		if ratio > journalTarget {
			verdict = "over"
		}
		fmt.Printf("\njournal cost, total: %.3f× (rubinofs / rubinofs-nojournal, medians of %d runs; %s the %.2f× target)\n", ratio, *runs, verdict, journalTarget)
	}
	for _, t := range targets {
		if !t.Journaled() {
			continue
		}
		s, err := benchkit.JournalStore(t)
		if err != nil {
			log.Printf("%s: journal store: %v", t.Name, err)
			continue
		}
		fmt.Printf("%s: journal store after the workload (%d runs, a checkpoint after each clone): %s\n", t.Name, *runs, s)
	}
}

// latency measures, on the rubinofs target, the time from a write in the
// backing directory to its new mtime being seen by a stat through the mount
// (cached attributes: only the watcher's invalidation can make it visible).
func latency(t *benchkit.Target) {
	p, bp := filepath.Join(t.Dir, "latency.txt"), filepath.Join(t.Back, "latency.txt")
	if err := os.WriteFile(bp, []byte("0000000\n"), 0o644); err != nil {
		benchkit.Fatal(err)
	}
	// A read-only open is kernel passthrough, which reads the backing file
	// itself; the attributes are what the kernel caches (one hour), so a
	// stat through the mount shows the new mtime only once the watcher has
	// invalidated them.
	mtime := func(path string) time.Time {
		st, err := os.Stat(path)
		if err != nil {
			return time.Time{}
		}
		return st.ModTime()
	}
	mtime(p)
	var lat []time.Duration
	for i := 1; i <= *latencyN; i++ {
		want := fmt.Sprintf("%07d\n", i)
		start := time.Now()
		if err := os.WriteFile(bp, []byte(want), 0o644); err != nil {
			benchkit.Fatal(err)
		}
		bm := mtime(bp)
		for !mtime(p).Equal(bm) {
			if time.Since(start) > 10*time.Second {
				benchkit.Fatalf("write %d not visible after 10s", i)
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("\nexternal write -> new mtime visible through rubinofs (%d writes): p50 %v, p99 %v, max %v\n",
		len(lat), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
}
