package fusefs

// The observability room (internal/observe: raw-request wrapper, metrics,
// access log) as the adapter asks it, and the mount as that room asks it
// (docs/DESIGN.md#observe-room). The daemon builds the room, hands it to
// New as Config.Observe and gives it CtlHost as its host.

import (
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/sessions"
)

// Observer is the hook the FS holds into the observability room
// (*observe.Observer implements it). Every method is safe for concurrent
// use and cheap enough for the FUSE hot path.
type Observer interface {
	// CtlEntries are the room's control files (metrics, accesslog),
	// placed among the control tree's base files at New.
	ctltree.Feature
	// AccessLogActive reports whether a reader of .rubino/accesslog is
	// attached (one atomic load): guarded handles then get no kernel
	// passthrough and read-only opens no FOPEN_NOFLUSH, so the log sees
	// their reads, writes and flushes.
	AccessLogActive() bool
	// MarkQuiet marks the request whose context's Done channel is done as
	// a read served by a stream control file, which the room neither
	// times nor logs.
	MarkQuiet(done <-chan struct{})
	// Wrap wraps the raw file system the mount serves (Mount).
	Wrap(raw fuse.RawFileSystem) fuse.RawFileSystem
}

// noObserver is the Observer of an FS built without one (Config.Observe
// nil): no metrics or access-log files, nothing wrapped, never logging.
type noObserver struct{}

func (noObserver) CtlEntries() []ctltree.Entry                    { return nil }
func (noObserver) AccessLogActive() bool                          { return false }
func (noObserver) MarkQuiet(<-chan struct{})                      {}
func (noObserver) Wrap(raw fuse.RawFileSystem) fuse.RawFileSystem { return raw }

// Outside reports whether c is outside every session (sessionctl.Owners.Outside): its session is its own uid's default session.
func (h CtlHost) Outside(c ctltree.Caller) bool { return h.f.owners.Outside(c) }

// RequestSession names the session of a FUSE request's caller with pid
// pid and uid uid as the adapter resolves callers (FS.callerOf): the
// registered session of its process tree, else its uid's default session;
// sessions.Unknown when its /proc files did not answer within
// procfs.Bound (docs/DESIGN.md#no-wait-on-caller). For pid 0 it is the
// uid's default session.
func (h CtlHost) RequestSession(pid, uid uint32) string {
	sess := sessions.Default
	if pid != 0 && h.f.cfg.Sessions != nil {
		sess = string(h.f.cfg.Sessions.Resolve(pid))
	}
	if sess == sessions.Default {
		sess = h.f.owners.Default(uid)
	}
	return sess
}
