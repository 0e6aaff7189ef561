package tests

import (
	"bytes"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeMetrics reads .rubino/metrics through the mount and parses it with
// the Prometheus text parser (legacy name validation: the strictest).
func scrapeMetrics(t *testing.T, m *mount) map[string]*dto.MetricFamily {
	t.Helper()
	b, err := os.ReadFile(m.path(".rubino/metrics"))
	if err != nil {
		t.Fatalf("reading .rubino/metrics: %v", err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf(".rubino/metrics does not parse as Prometheus text: %v\n%s", err, b)
	}
	return fams
}

// metricValue returns the value of the sample of family name whose labels
// include labels (name, value pairs): a counter's or gauge's value, a
// histogram's sample count. ok is false when there is no such sample.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, mt := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case mt.Counter != nil:
			return mt.Counter.GetValue(), true
		case mt.Gauge != nil:
			return mt.Gauge.GetValue(), true
		case mt.Histogram != nil:
			return float64(mt.Histogram.GetSampleCount()), true
		case mt.Untyped != nil:
			return mt.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// sumFamily adds up every sample of a counter family whose labels include
// labels.
func sumFamily(fams map[string]*dto.MetricFamily, name string, label, value string) float64 {
	var sum float64
	for _, mt := range fams[name].GetMetric() {
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == label && lp.GetValue() == value {
				sum += mt.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestMetrics drives a real mount (reads, an allowed edit, a refused blind
// write, an external change seen by the watcher) and checks that
// .rubino/metrics parses with the Prometheus text parser and that the
// families moved as the operations imply.
func TestMetrics(t *testing.T) {
	m := newMount(t, map[string]string{"read.txt": "hello\n", "blind.txt": "keep\n"}, nil)

	before := scrapeMetrics(t, m)
	for _, fam := range []struct {
		name string
		typ  dto.MetricType
	}{
		{"rubinofs_fuse_ops_total", dto.MetricType_COUNTER},
		{"rubinofs_fuse_op_duration_seconds", dto.MetricType_HISTOGRAM},
		{"rubinofs_guard_decisions_total", dto.MetricType_COUNTER},
		{"rubinofs_guard_denials_total", dto.MetricType_COUNTER},
		{"rubinofs_hash_cache_hits_total", dto.MetricType_COUNTER},
		{"rubinofs_hash_cache_misses_total", dto.MetricType_COUNTER},
		{"rubinofs_hash_cache_hit_ratio", dto.MetricType_GAUGE},
		{"rubinofs_watcher_events_total", dto.MetricType_COUNTER},
		{"rubinofs_watcher_overflows_total", dto.MetricType_COUNTER},
		{"rubinofs_watcher_batches_total", dto.MetricType_COUNTER},
		{"rubinofs_watcher_own_records_bytes", dto.MetricType_GAUGE},
		{"rubinofs_watcher_own_records_dropped_total", dto.MetricType_COUNTER},
		{"rubinofs_tasks", dto.MetricType_GAUGE},
		{"rubinofs_compactions_total", dto.MetricType_COUNTER},
		{"rubinofs_accesslog_dropped_lines_total", dto.MetricType_COUNTER},
	} {
		f := before[fam.name]
		if f == nil {
			t.Errorf("family %s is missing from .rubino/metrics", fam.name)
			continue
		}
		if f.GetType() != fam.typ {
			t.Errorf("family %s has type %v, want %v", fam.name, f.GetType(), fam.typ)
		}
	}
	if _, ok := metricValue(before, "rubinofs_tasks", "status", "running"); !ok {
		t.Errorf("rubinofs_tasks has no status=\"running\" series (zero-filled statuses)")
	}
	for _, outcome := range []string{"compacted", "noop", "failed"} {
		if _, ok := metricValue(before, "rubinofs_compactions_total", "outcome", outcome); !ok {
			t.Errorf("rubinofs_compactions_total has no outcome=%q series", outcome)
		}
	}

	// A read, then an allowed append; a refused blind overwrite; an
	// external write the watcher reports.
	m.mustSh("cat read.txt >/dev/null && echo more >> read.txt")
	m.mustFail("echo blind > blind.txt")
	if got := m.readBacking("blind.txt"); got != "keep\n" {
		t.Fatalf("refused write changed blind.txt: %q", got)
	}
	mark := m.appliedMark()
	m.writeBacking("external.txt", "from outside\n")
	m.waitApplied(mark, "external.txt")

	after := scrapeMetrics(t, m)
	delta := func(name string, labels ...string) float64 {
		a, ok := metricValue(after, name, labels...)
		if !ok {
			t.Errorf("no sample %s%v after the operations", name, labels)
		}
		b, _ := metricValue(before, name, labels...)
		return a - b
	}
	for _, op := range []string{"lookup", "open", "read", "write", "flush", "release"} {
		if d := delta("rubinofs_fuse_ops_total", "op", op); d < 1 {
			t.Errorf("rubinofs_fuse_ops_total{op=%q} moved by %v, want >= 1", op, d)
		}
		if d := delta("rubinofs_fuse_op_duration_seconds", "op", op); d < 1 {
			t.Errorf("rubinofs_fuse_op_duration_seconds{op=%q} count moved by %v, want >= 1", op, d)
		}
	}
	if d := sumFamily(after, "rubinofs_fuse_op_errors_total", "errno", "EACCES") -
		sumFamily(before, "rubinofs_fuse_op_errors_total", "errno", "EACCES"); d < 1 {
		t.Errorf("rubinofs_fuse_op_errors_total{errno=\"EACCES\"} moved by %v, want >= 1 (the refused write)", d)
	}
	if d := delta("rubinofs_guard_decisions_total", "code", "unread"); d != 1 {
		t.Errorf("rubinofs_guard_decisions_total{code=\"unread\"} moved by %v, want 1", d)
	}
	if d := delta("rubinofs_guard_decisions_total", "code", "allow"); d < 1 {
		t.Errorf("rubinofs_guard_decisions_total{code=\"allow\"} moved by %v, want >= 1 (the append)", d)
	}
	if d := delta("rubinofs_guard_denials_total"); d != 1 {
		t.Errorf("rubinofs_guard_denials_total moved by %v, want 1", d)
	}
	if d := delta("rubinofs_hash_cache_hits_total") + delta("rubinofs_hash_cache_misses_total"); d < 1 {
		t.Errorf("the hash cache was not consulted (hits+misses moved by %v)", d)
	}
	if d := delta("rubinofs_watcher_events_total"); d < 1 {
		t.Errorf("rubinofs_watcher_events_total moved by %v, want >= 1", d)
	}
	if d := delta("rubinofs_watcher_batches_total"); d < 1 {
		t.Errorf("rubinofs_watcher_batches_total moved by %v, want >= 1", d)
	}
	if d := delta("rubinofs_watcher_external_changes_total"); d < 1 {
		t.Errorf("rubinofs_watcher_external_changes_total moved by %v, want >= 1", d)
	}

	// The file is read-only, also for root, and renders per open.
	if err := os.WriteFile(m.path(".rubino/metrics"), []byte("x"), 0o644); err == nil {
		t.Errorf("writing .rubino/metrics succeeded, want EACCES")
	}
	if b, _ := os.ReadFile(m.path(".rubino/README")); !strings.Contains(string(b), "metrics") {
		t.Errorf(".rubino/README does not describe metrics:\n%s", b)
	}
}
