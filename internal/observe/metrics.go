package observe

// .rubino/metrics: one Prometheus registry per FS, rendered in the
// Prometheus text format (expfmt) when the file is read.
//
// The per-op families are fed by rawWrap (rawwrap.go) with observers
// resolved once per op, so a request costs two atomic counter updates and a
// histogram observation, with no label lookup and no allocation. The guard's
// and the hash cache's families are read from their own counters at scrape
// time (no double bookkeeping); the daemon registers the watcher's, the task
// registry's and the compressor's the same way (Observer.Registry).

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/rubinofs/rubinofs/ctltree"
)

// opID numbers the FUSE operations rawWrap times; opNames gives their
// label values (the opcodes' names, lower case, as JuiceFS's access log).
type opID uint8

const (
	opLookup opID = iota
	opForget
	opGetattr
	opSetattr
	opMknod
	opMkdir
	opUnlink
	opRmdir
	opRename
	opLink
	opSymlink
	opReadlink
	opAccess
	opGetxattr
	opListxattr
	opSetxattr
	opRemovexattr
	opCreate
	opTmpfile
	opOpen
	opRead
	opLseek
	opGetlk
	opSetlk
	opSetlkw
	opRelease
	opWrite
	opCopyFileRange
	opIoctl
	opFlush
	opFsync
	opFallocate
	opOpendir
	opReaddir
	opReaddirplus
	opReleasedir
	opFsyncdir
	opStatfs
	opStatx
	numOps
)

var opNames = [numOps]string{
	opLookup: "lookup", opForget: "forget", opGetattr: "getattr", opSetattr: "setattr",
	opMknod: "mknod", opMkdir: "mkdir", opUnlink: "unlink", opRmdir: "rmdir", opRename: "rename",
	opLink: "link", opSymlink: "symlink", opReadlink: "readlink", opAccess: "access",
	opGetxattr: "getxattr", opListxattr: "listxattr", opSetxattr: "setxattr", opRemovexattr: "removexattr",
	opCreate: "create", opTmpfile: "tmpfile", opOpen: "open", opRead: "read", opLseek: "lseek",
	opGetlk: "getlk", opSetlk: "setlk", opSetlkw: "setlkw", opRelease: "release", opWrite: "write",
	opCopyFileRange: "copy_file_range", opIoctl: "ioctl", opFlush: "flush", opFsync: "fsync",
	opFallocate: "fallocate", opOpendir: "opendir", opReaddir: "readdir", opReaddirplus: "readdirplus",
	opReleasedir: "releasedir", opFsyncdir: "fsyncdir", opStatfs: "statfs", opStatx: "statx",
}

// maxCachedErrno bounds the per-op error counters cached in an array;
// larger errnos (none on Linux today: EHWPOISON is 133) go through the
// vector's label lookup.
const maxCachedErrno = 136

// opBuckets are the latency histogram's upper bounds in seconds: 10 µs to
// about 2.6 s in steps of 4 (a cached getattr to a hash of a large file).
var opBuckets = prometheus.ExponentialBuckets(10e-6, 4, 10)

// fsMetrics is the observability state of one mount (Observer).
type fsMetrics struct {
	reg  *prometheus.Registry
	ops  [numOps]opMetrics
	errs *prometheus.CounterVec
	alog *accessLog

	// quiet marks the requests (by their cancel channel, unique among
	// requests in flight) whose read was served by a stream file: rawWrap
	// neither times nor logs them, since they block up to a heartbeat and
	// logging them would feed the access log its own reads. quietN counts
	// the marks, so rawWrap's Read looks at the map only while one exists.
	quiet  sync.Map
	quietN atomic.Int32
}

// opMetrics are one op's pre-resolved observers.
type opMetrics struct {
	count prometheus.Counter
	dur   prometheus.Observer
	errs  [maxCachedErrno]atomic.Pointer[prometheus.Counter]
}

func newFSMetrics(g GuardStats) *fsMetrics {
	m := &fsMetrics{reg: prometheus.NewRegistry(), alog: newAccessLog()}
	count := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rubinofs_fuse_ops_total",
		Help: "FUSE requests served, by operation.",
	}, []string{"op"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rubinofs_fuse_op_duration_seconds",
		Help:    "Time to serve a FUSE request, by operation, in seconds (reads of stream control files excluded).",
		Buckets: opBuckets,
	}, []string{"op"})
	m.errs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rubinofs_fuse_op_errors_total",
		Help: "FUSE requests answered with an errno, by operation and errno name.",
	}, []string{"op", "errno"})
	for op := range numOps {
		m.ops[op].count = count.WithLabelValues(opNames[op])
		m.ops[op].dur = dur.WithLabelValues(opNames[op])
	}
	m.reg.MustRegister(count, dur, m.errs, m.alog.dropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if g != nil {
		m.reg.MustRegister(&guardCollector{g: g})
	}
	return m
}

// record counts one served request of op that took seconds and ended with
// st. Cheap: pre-resolved observers; a label lookup only for an errno first
// seen on this op.
func (m *fsMetrics) record(op opID, seconds float64, st fuse.Status) {
	o := &m.ops[op]
	o.count.Inc()
	o.dur.Observe(seconds)
	if st == fuse.OK {
		return
	}
	if st < 0 || int(st) >= maxCachedErrno {
		m.errs.WithLabelValues(opNames[op], errnoName(syscall.Errno(st))).Inc()
		return
	}
	c := o.errs[st].Load()
	if c == nil {
		cnt := m.errs.WithLabelValues(opNames[op], errnoName(syscall.Errno(st)))
		o.errs[st].Store(&cnt)
		c = &cnt
	}
	(*c).Inc()
}

// errnoName is ctltree.ErrnoName, for the errno label and the access log.
var errnoName = ctltree.ErrnoName

// markQuiet marks the request whose cancel channel is done as a stream read
// (see fsMetrics.quiet).
func (m *fsMetrics) markQuiet(done <-chan struct{}) {
	if done == nil {
		return
	}
	m.quiet.Store(done, struct{}{})
	m.quietN.Add(1)
}

// takeQuiet reports (and clears) the quiet mark of the request with cancel
// channel done.
func (m *fsMetrics) takeQuiet(done <-chan struct{}) bool {
	if m.quietN.Load() == 0 {
		return false
	}
	if _, ok := m.quiet.LoadAndDelete(done); ok {
		m.quietN.Add(-1)
		return true
	}
	return false
}

// readMetrics renders .rubino/metrics: every family of the registry in the
// Prometheus text exposition format (version 0.0.4). A collector's error
// is EIO to the reader (via ctltree's error mapping), with the reason in
// the handle's "error:" line and .rubino/errors.
func (o *Observer) readMetrics(_ context.Context, _ ctltree.Caller) ([]byte, error) {
	mfs, err := o.m.reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// guardCollector exposes the guard's and the hash cache's counters, read at
// scrape time.
type guardCollector struct{ g GuardStats }

var (
	descDecisions = prometheus.NewDesc("rubinofs_guard_decisions_total",
		"Mutations of existing files decided by the guard, by code: allow, or why it refused (unread, stale; in warn mode the mutation proceeds but is counted under its code).",
		[]string{"code"}, nil)
	descDenials = prometheus.NewDesc("rubinofs_guard_denials_total",
		"Mutations refused (enforce mode).", nil, nil)
	descWarnings = prometheus.NewDesc("rubinofs_guard_warnings_total",
		"Mutations that enforce mode would have refused (warn mode).", nil, nil)
	descReads = prometheus.NewDesc("rubinofs_guard_reads_total",
		"Reads registered by the guard.", nil, nil)
	descWrites = prometheus.NewDesc("rubinofs_guard_writes_total",
		"Own writes credited by the guard.", nil, nil)
	descSessions = prometheus.NewDesc("rubinofs_guard_sessions",
		"Sessions with a read tracker.", nil, nil)
	descHashHits = prometheus.NewDesc("rubinofs_hash_cache_hits_total",
		"Hash-cache lookups answered without reading the file.", nil, nil)
	descHashMisses = prometheus.NewDesc("rubinofs_hash_cache_misses_total",
		"Hash-cache lookups that read (hashed) the file.", nil, nil)
	descHashRacy = prometheus.NewDesc("rubinofs_hash_cache_racy_total",
		"Hash-cache entries found but not trusted (racy timestamp).", nil, nil)
	descHashBytes = prometheus.NewDesc("rubinofs_hash_cache_hashed_bytes_total",
		"Bytes read for hashing.", nil, nil)
	descHashReadBack = prometheus.NewDesc("rubinofs_hash_read_back_bytes_total",
		"Bytes read back to credit own writes (part of rubinofs_hash_cache_hashed_bytes_total).", nil, nil)
	descHashStreamed = prometheus.NewDesc("rubinofs_hash_streamed_writes_total",
		"Own writes credited from the bytes hashed as they were written, without reading the file back.", nil, nil)
	descHashStreamedBytes = prometheus.NewDesc("rubinofs_hash_streamed_bytes_total",
		"Bytes of the own writes credited without reading the file back.", nil, nil)
	descHashDeferred = prometheus.NewDesc("rubinofs_hash_deferred_reads_total",
		"Reads registered with their content hash deferred (docs/DESIGN.md#lazy-hash).", nil, nil)
	descHashDeferredLost = prometheus.NewDesc("rubinofs_hash_deferred_lost_total",
		"Deferred read hashes not attributed to the read because the file changed first.", nil, nil)
	descHashFingerprinted = prometheus.NewDesc("rubinofs_hash_fingerprinted_total",
		"Hashes of files over guard.max_hash_size that their stat stood for, without reading (docs/DESIGN.md#hash-bound).", nil, nil)
	descHashEntries = prometheus.NewDesc("rubinofs_hash_cache_entries",
		"Entries in the hash cache.", nil, nil)
	descHashRatio = prometheus.NewDesc("rubinofs_hash_cache_hit_ratio",
		"hits / (hits + misses) since the mount started; 0 before the first lookup.", nil, nil)
)

// Describe implements prometheus.Collector.
func (g *guardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDecisions, descDenials, descWarnings, descReads, descWrites,
		descSessions, descHashHits, descHashMisses, descHashRacy, descHashBytes, descHashEntries, descHashRatio,
		descHashReadBack, descHashStreamed, descHashStreamedBytes, descHashDeferred, descHashDeferredLost, descHashFingerprinted} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *guardCollector) Collect(ch chan<- prometheus.Metric) {
	gd := g.g
	c, dc := gd.Counts(), gd.DecisionCounts()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descDecisions, dc.Allowed, "allow")
	counter(descDecisions, dc.Unread, "unread")
	counter(descDecisions, dc.Stale, "stale")
	counter(descDenials, c.Denials)
	counter(descWarnings, c.Warnings)
	counter(descReads, c.Reads)
	counter(descWrites, c.Writes)
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(c.Sessions))
	counter(descHashHits, c.Hash.Hits)
	counter(descHashMisses, c.Hash.Misses)
	counter(descHashRacy, c.Hash.Racy)
	counter(descHashBytes, c.Hash.HashedBytes)
	counter(descHashReadBack, c.Hash.ReadBackBytes)
	counter(descHashStreamed, c.Hash.Streamed)
	counter(descHashStreamedBytes, c.Hash.StreamedBytes)
	counter(descHashDeferred, c.Hash.Deferred)
	counter(descHashDeferredLost, c.Hash.DeferredLost)
	counter(descHashFingerprinted, c.Hash.Fingerprinted)
	ch <- prometheus.MustNewConstMetric(descHashEntries, prometheus.GaugeValue, float64(c.Hash.Entries))
	ratio := 0.0
	if n := c.Hash.Hits + c.Hash.Misses; n > 0 {
		ratio = float64(c.Hash.Hits) / float64(n)
	}
	ch <- prometheus.MustNewConstMetric(descHashRatio, prometheus.GaugeValue, ratio)
}
