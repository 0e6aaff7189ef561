package benchkit

import (
	"log"

	"github.com/prometheus/client_golang/prometheus"
)

// OpCounts reads the requests served so far, by op (lower-case opcode
// names, zero counts left out), from reg's rubinofs_fuse_ops_total: a bare
// loopback wrapped in internal/observe, or an in-process rubinofs
// daemon's registry, with no request of its own. A failed gather is
// logged and what was read is returned.
func OpCounts(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		log.Printf("gathering op counts: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rubinofs_fuse_ops_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && m.GetCounter().GetValue() != 0 {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
