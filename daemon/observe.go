package daemon

// Logging and metrics of a mount: the structured logger (log/slog), the
// guard's denial log line, and the collectors that expose the watcher's, the task registry's
// and the compressor's counters in .rubino/metrics, read at scrape time.

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/tasks"
)

// setupLoggers defaults cfg.Slog, the one logger of the daemon, fusefs,
// the watcher, compaction and the task runner, to text records on stderr.
func setupLoggers(cfg *Config) {
	if cfg.Slog == nil {
		cfg.Slog = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
}

// denialLogger returns the guard's OnDenial hook: one structured record per
// refusal or, in warn mode, per would-be refusal (both level warn),
// with the fields session, pid, comm, op, path and code. At most
// denialLogRate records a second are written (a burst of
// denialLogBurst): a process retrying a refused write in a loop (10,000
// a second) would otherwise fill the log and rotate every earlier
// record out of it. The records left out are counted and said in one
// record before the next one written; .rubino/guard/denials keeps the
// latest refusals whatever the rate. now is the clock (time.Now; tests
// give their own). Safe for concurrent use.
func denialLogger(l *slog.Logger, now func() time.Time) func(guard.Denial) {
	lim := rate.NewLimiter(denialLogRate, denialLogBurst)
	var dropped atomic.Uint64
	return func(d guard.Denial) {
		if !lim.AllowN(now(), 1) {
			dropped.Add(1)
			return
		}
		if n := dropped.Swap(0); n > 0 {
			l.LogAttrs(context.Background(), slog.LevelWarn, "guard refusals not logged: over the rate limit",
				slog.Uint64("count", n), slog.Int("per_second", int(denialLogRate)), slog.String("see", ".rubino/guard/denials"))
		}
		level, msg := slog.LevelWarn, "guard refused a mutation"
		if d.Warned {
			// Warn, not info: warn mode exists to surface these, and
			// --log-level warn must not hide them.
			msg = "guard would refuse a mutation (warn mode, allowed)"
		}
		l.LogAttrs(context.Background(), level, msg,
			slog.String("session", d.Session), slog.Uint64("pid", uint64(d.Pid)), slog.String("comm", d.Comm),
			slog.String("op", string(d.Op)), slog.String("path", d.Path), slog.String("code", string(d.Code)))
	}
}

// denialLogRate and denialLogBurst bound the refusal records denialLogger
// writes: records a second, and how many may come at once.
const (
	denialLogRate  rate.Limit = 50
	denialLogBurst            = 500
)

// EnableURingParam is the fuse module's switch for FUSE over io_uring
// (Linux 6.14 and later, root may write it): without Y the kernel offers
// no io_uring to any mount, whatever cache.io_uring says
// (docs/DESIGN.md#fuse-io-uring).
const EnableURingParam = "/sys/module/fuse/parameters/enable_uring"

// logTransport logs how requests reach the daemon and, when io_uring was
// asked for but the kernel has it switched off, how to switch it on.
func (d *Daemon) logTransport(asked bool) {
	name, _ := d.FS.Transport()
	l := d.cfg.Slog
	if name == "io_uring" || !asked {
		l.Info("FUSE transport", "transport", name)
		return
	}
	if b, err := os.ReadFile(EnableURingParam); err == nil && bytes.HasPrefix(b, []byte("N")) {
		l.Info("FUSE transport", "transport", name,
			"io_uring", "off in the kernel: as root, echo Y > "+EnableURingParam+" before mounting")
		return
	}
	l.Info("FUSE transport", "transport", name, "io_uring", "not offered by this kernel (Linux 6.14 or later)")
}

// registerMetrics adds the FUSE transport's, the watcher's, the task
// registry's and the compressor's collectors to the mount's registry (.rubino/metrics).
func (d *Daemon) registerMetrics() {
	reg := d.Obs.Registry()
	fsys := d.FS
	reg.MustRegister(scrape(func(ch chan<- prometheus.Metric) {
		name, n := fsys.Transport()
		gauge(ch, descTransport, 1, name)
		counter(ch, descURingRequests, uint64(n))
	}))
	if d.Watcher != nil {
		w, inv := d.Watcher, d.Invalidation
		reg.MustRegister(scrape(func(ch chan<- prometheus.Metric) {
			st := w.Stats()
			counter(ch, descWatchEvents, st.Events)
			counter(ch, descWatchExternal, st.External)
			counter(ch, descWatchOwn, st.Own)
			counter(ch, descWatchBatches, st.Batches)
			counter(ch, descWatchOverflows, st.Overflows)
			gauge(ch, descWatches, float64(st.Watches))
			gauge(ch, descUnwatched, float64(len(st.Unwatched)))
			gauge(ch, descOwnRecordsBytes, float64(st.OwnBytes))
			counter(ch, descOwnRecordsDropped, st.OwnDropped)
			is := inv.Stats()
			if v, ok := is["full_invalidations"].(uint64); ok {
				counter(ch, descFullInvalidations, v)
			}
		}))
	}
	if d.Tasks != nil {
		rn := d.Tasks
		reg.MustRegister(scrape(func(ch chan<- prometheus.Metric) {
			counts := rn.Stats()
			for _, s := range taskStatuses {
				gauge(ch, descTasks, float64(counts[string(s)]), string(s))
				delete(counts, string(s))
			}
			for s, n := range counts { // a status added to tasks later
				gauge(ch, descTasks, float64(n), s)
			}
		}))
	}
	if d.Compact != nil && d.Compact.Compressor() != nil {
		comp := d.Compact.Compressor()
		reg.MustRegister(scrape(func(ch chan<- prometheus.Metric) {
			rs := comp.RunStats()
			counter(ch, descCompactions, rs.Compacted, "compacted")
			counter(ch, descCompactions, rs.Noops, "noop")
			counter(ch, descCompactions, rs.Failures, "failed")
		}))
	}
}

// taskStatuses are shown even at zero, so a dashboard's series exist.
var taskStatuses = []tasks.Status{tasks.StatusRunning, tasks.StatusNeedsApproval, tasks.StatusBlockedOnHuman,
	tasks.StatusBlockedOnParent, tasks.StatusStopping, tasks.StatusStopped, tasks.StatusDone, tasks.StatusFailed}

var (
	descTransport = prometheus.NewDesc("rubinofs_fuse_transport",
		"How the kernel's FUSE requests reach the daemon: io_uring (one queue per CPU) or /dev/fuse (read and write).", []string{"transport"}, nil)
	descURingRequests = prometheus.NewDesc("rubinofs_fuse_uring_requests_total",
		"FUSE requests answered over io_uring.", nil, nil)
	descWatchEvents = prometheus.NewDesc("rubinofs_watcher_events_total",
		"fsnotify events received by the watcher.", nil, nil)
	descWatchExternal = prometheus.NewDesc("rubinofs_watcher_external_changes_total",
		"Coalesced external changes delivered (made outside the mount).", nil, nil)
	descWatchOwn = prometheus.NewDesc("rubinofs_watcher_own_changes_total",
		"Coalesced changes recognised as the daemon's own.", nil, nil)
	descWatchBatches = prometheus.NewDesc("rubinofs_watcher_batches_total",
		"Batches of changes delivered by the watcher.", nil, nil)
	descWatchOverflows = prometheus.NewDesc("rubinofs_watcher_overflows_total",
		"Times the watcher lost events (inotify queue overflow).", nil, nil)
	descFullInvalidations = prometheus.NewDesc("rubinofs_watcher_full_invalidations_total",
		"Times everything cached was invalidated (lost events, or a full invalidation queue).", nil, nil)
	descWatches = prometheus.NewDesc("rubinofs_watcher_watches",
		"Directories watched.", nil, nil)
	descUnwatched = prometheus.NewDesc("rubinofs_watcher_unwatched_subtrees",
		"Subtrees without watches (skipped, or out of inotify watches).", nil, nil)
	descOwnRecordsBytes = prometheus.NewDesc("rubinofs_watcher_own_records_bytes",
		"Bytes the records of the daemon's own changes hold, estimated (bounded: docs/DESIGN.md#own-records-bound).", nil, nil)
	descOwnRecordsDropped = prometheus.NewDesc("rubinofs_watcher_own_records_dropped_total",
		"Own-change records dropped before their TTL because the records passed their bound.", nil, nil)
	descTasks = prometheus.NewDesc("rubinofs_tasks",
		"Background tasks (.rubino/agents) by status: live ones and the terminal ones still listed.", []string{"status"}, nil)
	descCompactions = prometheus.NewDesc("rubinofs_compactions_total",
		"Compaction requests by outcome: compacted, noop (below the threshold, thrashing, ...) or failed.", []string{"outcome"}, nil)
)

// scrape is a collector whose metrics fn emits at every scrape, from
// counters kept elsewhere; its descriptors come from one collection at
// registration (prometheus.DescribeByCollect).
type scrape func(ch chan<- prometheus.Metric)

// Describe implements prometheus.Collector.
func (s scrape) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(s, ch) }

// Collect implements prometheus.Collector.
func (s scrape) Collect(ch chan<- prometheus.Metric) { s(ch) }

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}
