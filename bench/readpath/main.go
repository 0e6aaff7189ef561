// Command readpath counts, per phase of the agent workload's read side,
// the FUSE requests and the daemon CPU of a bare go-fuse loopback (1 s
// caches, counted by internal/observe's wrapper) and of rubinofs
// in-process (its .rubino/metrics), one target at a time so the process's
// CPU time is the target's. The bare loopback has no .rubino/metrics, so
// bench/agent cannot count its requests; this does, with the same phases
// (less edit, status-dirty and restore).
//
// Usage (as root): go run ./bench/readpath [-runs 2] [-only loop,rubinofs]
// [-nojournal] [-paged N] [-cpuprofile FILE]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/observe"
)

var (
	runs    = flag.Int("runs", 1, "runs")
	cpuprof = flag.String("cpuprofile", "", "write a CPU profile of this process (both in-process targets) to `FILE`")
	which   = flag.String("only", "loop,rubinofs", "targets")
	nojour  = flag.Bool("nojournal", false, "rubinofs without its journal")
	paged   = flag.Int("paged", -1, "cache.paged_read_max of the rubinofs target (-1: the shipped default)")
	phases  = flag.String("profile-phases", "", "with -cpuprofile: profile only these comma-separated phases, one file per phase, target and run (`FILE.PHASE.TARGET.RUN`; pprof merges several)")
)

// steps are the read-side phases of the agent workload (and the clone
// and rm around them).
var steps = benchkit.Steps(benchkit.AgentSteps, "clone", "status", "git-grep", "grep-rn", "read-all", "find", "diff", "rm")

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	flag.Parse()
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	tmp, err := benchkit.TempDir("rubinofs-readpath-")
	if err != nil {
		log.Fatal(err)
	}
	origin := filepath.Join(tmp, "origin")
	if err := benchkit.MakeOrigin(benchkit.Module, origin); err != nil {
		benchkit.Fatal(err)
	}
	type tgt struct {
		name string
		dir  string
		ops  func() map[string]float64
	}
	var ts []tgt
	if strings.Contains(*which, "loop") {
		back, mnt := filepath.Join(tmp, "loop-back"), filepath.Join(tmp, "loop")
		os.MkdirAll(back, 0o755)
		os.MkdirAll(mnt, 0o755)
		root, _ := fs.NewLoopbackRoot(back)
		sec := time.Second
		opts := &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec, NegativeTimeout: &sec,
			MountOptions: fuse.MountOptions{DirectMount: true, FsName: back, Name: "loopback"}}
		o := observe.New(nilStats{})
		srv, err := fuse.NewServer(o.Wrap(fs.NewNodeFS(root, opts)), mnt, &opts.MountOptions)
		if err != nil {
			benchkit.Fatal(err)
		}
		go srv.Serve()
		srv.WaitMount()
		benchkit.AtExit(func() { srv.Unmount() })
		ts = append(ts, tgt{"loop-1s", mnt, func() map[string]float64 { return benchkit.OpCounts(o.Registry()) }})
	}
	if strings.Contains(*which, "rubinofs") {
		t, err := benchkit.Rubinofs(tmp, "rubinofs", guard.ModeEnforce, func(c *daemon.Config) {
			if *nojour {
				benchkit.NoJournal(c)
			}
			if *paged >= 0 {
				c.Cache.PagedReadMax = *paged
			}
		})
		if err != nil {
			benchkit.Fatal(err)
		}
		ts = append(ts, tgt{"rubinofs", t.Dir, func() map[string]float64 { m, _ := benchkit.Ops(t.Dir); return m }})
	}
	if *cpuprof != "" && *phases == "" {
		pf, _ := os.Create(*cpuprof)
		pprof.StartCPUProfile(pf)
		defer pprof.StopCPUProfile()
	}
	for r := 0; r < *runs; r++ {
		for _, t := range ts {
			fmt.Printf("\n%s run %d\n| phase | wall s | cpu s | requests |\n|---|---|---|---|\n", t.name, r+1)
			for _, s := range steps {
				b := t.ops()
				stop := profilePhase(s.Name, t.name, r)
				c0 := cpu()
				d, err := benchkit.Run(t.dir, s.Script, "ORIGIN="+origin)
				c := cpu() - c0
				stop()
				if err != nil {
					benchkit.Fatal(err)
				}
				fmt.Printf("| %s | %.3f | %.3f | %s |\n", s.Name, d.Seconds(), c.Seconds(), benchkit.OpsDelta(b, t.ops()))
			}
		}
	}
}

// profilePhase starts a CPU profile of phase of target in run r when
// -profile-phases names it, and returns what stops it.
func profilePhase(phase, target string, r int) func() {
	if *cpuprof == "" || !slices.Contains(strings.Split(*phases, ","), phase) {
		return func() {}
	}
	pf, err := os.Create(fmt.Sprintf("%s.%s.%s.%d", *cpuprof, phase, target, r+1))
	if err != nil {
		benchkit.Fatal(err)
	}
	pprof.StartCPUProfile(pf)
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}
}

type nilStats struct{}

func (nilStats) Counts() guard.Counts                 { return guard.Counts{} }
func (nilStats) DecisionCounts() guard.DecisionCounts { return guard.DecisionCounts{} }
