package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

// probes are the files and mounts the round-trip costs are measured on.
type probes struct {
	nativeFile string
	rtt, pair  *loop // zero timeouts (GETATTR); the floor's options (OPEN+RELEASE)
}

// setupProbes mounts the two probe loopbacks under tmp and makes a probe
// file in each backing directory and in a native one.
func setupProbes(tmp string) (*probes, error) {
	nat := filepath.Join(tmp, "probe-native")
	if err := os.MkdirAll(nat, 0o755); err != nil {
		return nil, err
	}
	p := &probes{}
	var err error
	if p.nativeFile, err = probeFile(nat); err != nil {
		return nil, err
	}
	if p.rtt, err = mountLoop(tmp, "probe-rtt", nil, false); err != nil {
		return nil, err
	}
	if p.pair, err = mountLoop(tmp, "probe-pair", benchkit.Ptr(time.Hour), true); err != nil {
		return nil, err
	}
	for _, l := range []*loop{p.rtt, p.pair} {
		if _, err := probeFile(l.back); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// costRound is one round of the probes: native and mount figures, and
// the requests each mount call sent, per call.
type costRound struct {
	natStat, mntStat, natOpen, mntOpen probeResult
	statReqs, openReqs                 string
}

// measure runs one round of the probes, n calls each.
func (p *probes) measure(n int) costRound {
	var r costRound
	var err error
	must := func(res probeResult, e error) probeResult {
		if e != nil && err == nil {
			err = e
		}
		return res
	}
	r.natStat = must(probe("fstat", p.nativeFile, n))
	b := benchkit.OpCounts(p.rtt.reg)
	r.mntStat = must(probe("fstat", filepath.Join(p.rtt.dir, "probe"), n))
	r.statReqs = perCall(delta(b, benchkit.OpCounts(p.rtt.reg)), n)
	r.natOpen = must(probe("open", p.nativeFile, n))
	b = benchkit.OpCounts(p.pair.reg)
	r.mntOpen = must(probe("open", filepath.Join(p.pair.dir, "probe"), n))
	r.openReqs = perCall(delta(b, benchkit.OpCounts(p.pair.reg)), n)
	if err != nil {
		benchkit.Fatal(err)
	}
	return r
}

// perCall renders counts divided by the timed calls, n (the probe's 100
// untimed calls and its own open and close included in the counts).
func perCall(counts map[string]float64, n int) string {
	per := map[string]float64{}
	for op, v := range counts {
		per[op] = v / float64(n)
	}
	return formatf(per, "%.3f")
}

// printCosts prints every round and returns the costs: per kind, the
// median over the rounds of (mount median less native median).
func printCosts(rounds []costRound) Costs {
	fmt.Printf("\nround-trip probes, µs per call (median of -n %d calls; mean in brackets), %d rounds\n\n", *probeN, len(rounds))
	fmt.Print("| round | fstat native | fstat, zero-timeout mount | GETATTR | open+close native | open+close, floor mount | OPEN+RELEASE | requests per fstat | requests per open+close |\n|---|---|---|---|---|---|---|---|---|\n")
	var gs, ps []time.Duration
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	for i, r := range rounds {
		g, p := r.mntStat.Median-r.natStat.Median, r.mntOpen.Median-r.natOpen.Median
		gs, ps = append(gs, g), append(ps, p)
		fmt.Printf("| %d | %.2f [%.2f] | %.2f [%.2f] | %.2f | %.2f [%.2f] | %.2f [%.2f] | %.2f | %s | %s |\n", i+1,
			us(r.natStat.Median), us(r.natStat.Mean), us(r.mntStat.Median), us(r.mntStat.Mean), us(g),
			us(r.natOpen.Median), us(r.natOpen.Mean), us(r.mntOpen.Median), us(r.mntOpen.Mean), us(p), r.statReqs, r.openReqs)
	}
	c := Costs{Getattr: median(gs), OpenPair: median(ps)}
	fmt.Printf("\ncosts used: GETATTR %.2f µs, OPEN+RELEASE %.2f µs (medians of the rounds)\n", us(c.Getattr), us(c.OpenPair))
	return c
}
