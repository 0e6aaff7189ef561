package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Costs are the measured round-trip costs of the floor model, each the
// time a request adds over the same system call on the backing directory
// (the mount's median less native's), in nanoseconds as time.Duration.
type Costs struct {
	// Getattr is one GETATTR: fstat(2) of an open file on a mount with zero
	// attribute timeout, less native fstat. It prices every request that
	// gets a reply and opens nothing.
	Getattr time.Duration
	// OpenPair is an OPEN and its RELEASE: open(2) and close(2) of one file
	// on the floor mount (long timeouts, FOPEN_NOFLUSH: nothing else is
	// sent), less native. It prices each OPEN, OPENDIR and CREATE, the
	// RELEASE or RELEASEDIR that closes it included.
	OpenPair time.Duration
}

// Cost is the floor model's price of one request of op (the lower-case
// opcode names of .rubino/metrics): nothing for FORGET (no reply, batched)
// and for RELEASE and RELEASEDIR (priced with the open they close), the
// pair for an open, a GETATTR's round trip for everything else (READ and
// WRITE included: the data they carry is not priced).
func (c Costs) Cost(op string) time.Duration {
	switch op {
	case "forget", "release", "releasedir":
		return 0
	case "open", "opendir", "create":
		return c.OpenPair
	}
	return c.Getattr
}

// Floor is a phase's floor time: its native time plus, for every request
// the floor mount received in it, that request's Cost. counts are
// requests by op, as from benchkit.OpCounts.
func (c Costs) Floor(native time.Duration, counts map[string]float64) time.Duration {
	d := native
	for op, n := range counts {
		d += time.Duration(n * float64(c.Cost(op)))
	}
	return d
}

// total is the number of requests in counts, FORGET left out (it is no
// round trip).
func total(counts map[string]float64) float64 {
	n := 0.0
	for op, v := range counts {
		if op != "forget" {
			n += v
		}
	}
	return n
}

// delta returns after minus before, ops that did not change left out.
func delta(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for op, n := range after {
		if x := n - before[op]; x != 0 {
			d[op] = x
		}
	}
	return d
}

// medianCounts is, per op, the median (the upper one of an even count)
// of the runs' counts; an op missing from a run counts 0 there.
func medianCounts(runs []map[string]float64) map[string]float64 {
	ops := map[string]bool{}
	for _, r := range runs {
		for op := range r {
			ops[op] = true
		}
	}
	out := map[string]float64{}
	for op := range ops {
		var v []float64
		for _, r := range runs {
			v = append(v, r[op])
		}
		sort.Float64s(v)
		if m := v[len(v)/2]; m != 0 {
			out[op] = m
		}
	}
	return out
}

// format renders counts as "op=N ..." largest first, ties by name.
func format(counts map[string]float64) string { return formatf(counts, "%.0f") }

// formatf is format with the counts in verb (a float verb).
func formatf(counts map[string]float64, verb string) string {
	type kv struct {
		op string
		n  float64
	}
	var d []kv
	for op, n := range counts {
		if n != 0 {
			d = append(d, kv{op, n})
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i].n > d[j].n || d[i].n == d[j].n && d[i].op < d[j].op })
	var parts []string
	for _, e := range d {
		parts = append(parts, e.op+"="+fmt.Sprintf(verb, e.n))
	}
	return strings.Join(parts, " ")
}

// excess is, per op, how many more requests more has than less (ops where
// it has as many or fewer left out).
func excess(more, less map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for op, n := range more {
		if x := n - less[op]; x > 0 {
			out[op] = x
		}
	}
	return out
}
