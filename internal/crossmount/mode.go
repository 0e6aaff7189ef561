package crossmount

// Shared mode, forced or switched on by another mount of the backing
// directory on this host (docs/DESIGN.md#peer-mounts).

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rubinofs/rubinofs/guard"
)

// PeerProbe tells whether another mount shares this mount's backing
// files on this host (peers.Registry). Peer is called from request
// handlers: it must be quick (a few fcntl(2) calls on files outside any
// FUSE mount), never block, and be safe for concurrent use.
type PeerProbe interface {
	Peer() bool
}

// PeerRecheck is how long a probe that found no peer is trusted before
// the next decision probes again: a peer that appears is seen by every
// decision starting at least this long after it registered. A daemon
// waits this long between registering and serving (daemon.Start), so its
// first request is seen by every other mount's decisions after it. 20 ms:
// a burst of opens beside other mounts probes about once per 20 ms, not
// at every other request (docs/DESIGN.md#peer-mounts).
const PeerRecheck = 20 * time.Millisecond

// Config configures a Mode; fusefs.Config's fields of the same names.
type Config struct {
	// Shared forces shared mode (--shared, --watch=poll, a network
	// backing: docs/DESIGN.md#close-to-open).
	Shared bool
	// Uncached: the backing filesystem's clients cache what other hosts
	// change (docs/DESIGN.md#uncached-view). New sets Shared with it.
	Uncached bool
	// Peers, when set, finds other mounts of the backing directory on
	// this host; nil: only Shared decides.
	Peers PeerProbe
	// Workspace names the mount in the log.
	Workspace string
	// Guard is told of another mount's unreported change
	// (Mode.NoteUnseen). Required.
	Guard *guard.Guard
	// Logger receives the warnings (a peer seen, a lock timeout, no OFD
	// locks). Required.
	Logger *slog.Logger
	// LockWait overrides LockWait when > 0 (tests).
	LockWait time.Duration
}

// Mode is one mount's state towards other mounts of its backing
// directory: shared mode, the cross-mount lock's counters and the stat
// its own changes left. Its methods are safe for concurrent use and never
// block longer than LockWait.
type Mode struct {
	cfg     Config
	started time.Time

	// peerSeen: a peer was found once; the mount stays shared until it
	// is unmounted.
	peerSeen atomic.Bool
	// peerClearAt is the time (ns since started, plus 1; 0: never) of the
	// last probe that found no peer.
	peerClearAt atomic.Int64
	// peerProbes counts the probes made (PeerProbe.Peer calls).
	peerProbes atomic.Uint64

	// off: the backing filesystem refused an OFD lock other than by a
	// conflict; mutations go on without one (logged once).
	off atomic.Bool
	// locks, timeouts count the locks taken and the mutations refused
	// with EAGAIN after LockWait.
	locks, timeouts atomic.Uint64
	// unseen counts changes found by stat under the cross-mount lock that
	// came from outside this mount (NoteUnseen).
	unseen atomic.Uint64
	// own maps each file identity this mount changed to the stat its last
	// change through this mount left (NoteOwn). An entry is written and
	// compared under the identity's lock.
	own sync.Map // guard.FileID -> guard.Stat
}

// New returns the Mode of a mount configured by cfg.
func New(cfg Config) *Mode {
	if cfg.Uncached {
		cfg.Shared = true // its read handles are shared reads
	}
	return &Mode{cfg: cfg, started: time.Now()}
}

// Shared reports whether the mount is in shared mode now
// (docs/DESIGN.md#close-to-open, #cross-mount-lock): Config.Shared, or a
// peer mount of the backing directory seen by Config.Peers now or
// before. A probe that found no peer is reused for PeerRecheck. The first
// time a peer is seen it is logged. Every decision that depends on shared
// mode asks here, at the decision; handles opened before keep the mode
// they were opened in.
func (x *Mode) Shared() bool {
	if x.cfg.Shared || x.peerSeen.Load() {
		return true
	}
	if x.cfg.Peers == nil {
		return false
	}
	now := int64(time.Since(x.started)) + 1
	if at := x.peerClearAt.Load(); at != 0 && now-at < int64(PeerRecheck) {
		return false
	}
	x.peerProbes.Add(1)
	if !x.cfg.Peers.Peer() {
		x.peerClearAt.Store(now)
		return false
	}
	if x.peerSeen.CompareAndSwap(false, true) {
		x.cfg.Logger.Warn("another rubinofs mount of this backing directory: shared mode on",
			"workspace", x.cfg.Workspace)
	}
	return true
}

// OwnTracked reports whether the mount records the stat its own changes
// leave (NoteOwn): on a shared mount, and on one that may become shared
// when a peer appears (Config.Peers set), so that a change another mount
// makes afterwards ends an own-write exemption from before.
func (x *Mode) OwnTracked() bool { return x.cfg.Shared || x.cfg.Peers != nil }

// Uncached reports Config.Uncached (docs/DESIGN.md#uncached-view).
func (x *Mode) Uncached() bool { return x.cfg.Uncached }

// SharedMode reports the mount's shared mode for .rubino/status and the
// log, probing for a peer first: "on" (Config.Shared: --shared or
// --watch=poll), "peer" (another mount of the backing directory on this
// host has been seen) or "off".
func (x *Mode) SharedMode() string {
	switch {
	case x.cfg.Shared:
		return "on"
	case x.Shared():
		return "peer"
	}
	return "off"
}

// LockStats reports the cross-mount lock counters for .rubino/status:
// locks taken, mutations refused on timeout, unseen changes found, and
// whether the lock is off (no OFD locks on the backing filesystem).
func (x *Mode) LockStats() map[string]any {
	return map[string]any{
		"locks":    x.locks.Load(),
		"timeouts": x.timeouts.Load(),
		"unseen":   x.unseen.Load(),
		"disabled": x.off.Load(),
	}
}

// Status returns the three contributors to .rubino/status, as key and
// value: "shared", the mode (SharedMode: on, off or peer), "uncached"
// (Config.Uncached: docs/DESIGN.md#uncached-view), and "cross_mount", the
// cross-mount lock counters (LockStats) and the peer probes made. Each is
// cheap and safe for concurrent use.
func (x *Mode) Status() []func() (string, any) {
	return []func() (string, any){
		func() (string, any) { return "shared", x.SharedMode() },
		func() (string, any) { return "uncached", x.cfg.Uncached },
		func() (string, any) {
			st := x.LockStats()
			st["peer_probes"] = x.peerProbes.Load()
			return "cross_mount", st
		},
	}
}
