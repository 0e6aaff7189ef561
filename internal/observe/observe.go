// Package observe is the observability room (docs/DESIGN.md#observe-room):
// the layer over the FUSE server's raw file system that times, counts and
// logs every request (rawwrap.go), the mount's Prometheus registry that
// .rubino/metrics renders (metrics.go), and the access log that
// .rubino/accesslog streams (accesslog.go).
//
// It never imports the FUSE adapter: it asks the mount what it needs
// through a Host, and the adapter asks it through the small hook
// fusefs.Observer, which *Observer implements. The daemon assembles the
// two (New, SetHost, fusefs.Config.Observe).
package observe

import (
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// Host is the mount as the observability room asks it. Every method is
// safe for concurrent use and never waits on the calling process longer
// than procfs.Bound (docs/DESIGN.md#no-wait-on-caller).
type Host interface {
	// MayActOn reports whether c may see session's files and lines
	// (docs/DESIGN.md#sessions): an access-log reader sees the lines of
	// the sessions it may act on.
	MayActOn(c ctltree.Caller, session string) bool
	// Outside reports whether c is outside every session (its session
	// is its own uid's default session).
	Outside(c ctltree.Caller) bool
	// RequestSession names the session of a FUSE request's caller with
	// pid pid (not 0) and uid uid, as the adapter resolves it: the
	// registered session of its process tree, else its uid's default
	// session; sessions.Unknown when its /proc files did not answer
	// within procfs.Bound.
	RequestSession(pid, uid uint32) string
}

// GuardStats are the guard's counters that .rubino/metrics shows, read at
// scrape time (*guard.Guard implements it).
type GuardStats interface {
	Counts() guard.Counts
	DecisionCounts() guard.DecisionCounts
}

// Observer is one mount's observability: its registry, per-op observers,
// access log and raw-request wrapper. Build it with New and give it its
// Host (SetHost) before mounting; its methods are then safe for concurrent
// use.
type Observer struct {
	m    *fsMetrics
	host Host
}

// New builds the observability of a mount whose guard is g (nil: no guard
// families in .rubino/metrics). The per-op families, the access log's
// dropped-lines counter and the Go runtime's and process's collectors are
// registered at once.
func New(g GuardStats) *Observer {
	return &Observer{m: newFSMetrics(g)}
}

// SetHost gives the observer the mount it observes. Call it once, before
// mounting: it is not safe concurrently with requests.
func (o *Observer) SetHost(h Host) { o.host = h }

// Registry returns the mount's Prometheus registry, which .rubino/metrics
// renders at every open. Register collectors that read existing counters
// at scrape time (prometheus.NewCounterFunc, a custom Collector);
// Register's error (a duplicate or inconsistent family) is the registry's.
// Safe for concurrent use.
func (o *Observer) Registry() *prometheus.Registry { return o.m.reg }

// CtlEntries are the control files of the room, in this order: metrics
// (read-only, the registry in the Prometheus text format) and accesslog
// (a stream: one line per FUSE request). The control tree puts them among
// its base files.
func (o *Observer) CtlEntries() []ctltree.Entry {
	return []ctltree.Entry{
		{Name: "metrics", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: o.readMetrics}},   // metrics.go
		{Name: "accesslog", Node: &ctltree.File{Kind: ctltree.Stream, Open: o.openAccessLog}}, // accesslog.go
	}
}

// AccessLogActive reports whether a reader of .rubino/accesslog is
// attached: one atomic load. While one is, the adapter grants no kernel
// passthrough to guarded handles and asks for no FOPEN_NOFLUSH, so every
// read, write and flush reaches the log.
func (o *Observer) AccessLogActive() bool { return o.m.alog.active() }

// MarkQuiet marks the request whose context's Done channel is done as a
// read served by a stream control file: the wrapper neither times nor logs
// it (see fsMetrics.quiet). A nil done is ignored.
func (o *Observer) MarkQuiet(done <-chan struct{}) { o.m.markQuiet(done) }

// CloseStreams ends every reader of the access log: their blocked reads
// return end-of-file, so a `cat` exits and releases the mount. The daemon
// calls it before unmounting; the wrapper calls it when the server stops.
// Later opens read end-of-file at once. Idempotent.
func (o *Observer) CloseStreams() { o.m.alog.close() }

// Wrap returns raw wrapped in the timing, counting and logging layer
// (rawWrap). The mount serves the result.
func (o *Observer) Wrap(raw fuse.RawFileSystem) fuse.RawFileSystem {
	return &rawWrap{RawFileSystem: raw, o: o, m: o.m}
}
