package fusefs

// Shared mode switched on by another mount of the backing directory on
// this host (docs/DESIGN.md#peer-mounts).

import (
	"sync/atomic"
	"time"
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
// first request is seen by every other mount's decisions after it.
const PeerRecheck = time.Millisecond

// peerState is the FS's view of peer mounts. Concurrency: atomics.
type peerState struct {
	// peerSeen: a peer was found once; the mount stays shared until it
	// is unmounted.
	peerSeen atomic.Bool
	// peerClearAt is the time (ns since FS.started, plus 1; 0: never) of
	// the last probe that found no peer.
	peerClearAt atomic.Int64
	// peerProbes counts the probes made (PeerProbe.Peer calls).
	peerProbes atomic.Uint64
}

// shared reports whether the mount is in shared mode now
// (docs/DESIGN.md#close-to-open, #cross-mount-lock): Config.Shared, or a
// peer mount of the backing directory seen by Config.Peers now or
// before. A probe that found no peer is reused for PeerRecheck. The first
// time a peer is seen it is logged. Every decision that depends on shared
// mode asks here, at the decision; handles opened before keep the mode
// they were opened in.
func (f *FS) shared() bool {
	if f.cfg.Shared || f.peerSeen.Load() {
		return true
	}
	if f.cfg.Peers == nil {
		return false
	}
	now := int64(time.Since(f.started)) + 1
	if at := f.peerClearAt.Load(); at != 0 && now-at < int64(PeerRecheck) {
		return false
	}
	f.peerProbes.Add(1)
	if !f.cfg.Peers.Peer() {
		f.peerClearAt.Store(now)
		return false
	}
	if f.peerSeen.CompareAndSwap(false, true) {
		f.log.Warn("another rubinofs mount of this backing directory: shared mode on",
			"workspace", f.cfg.Workspace)
	}
	return true
}

// ownTracked reports whether the mount records the stat its own changes
// leave (FS.noteOwn): on a shared mount, and on one that may become
// shared when a peer appears (Config.Peers set), so that a change another
// mount makes afterwards ends an own-write exemption from before.
func (f *FS) ownTracked() bool { return f.cfg.Shared || f.cfg.Peers != nil }

// SharedMode reports the mount's shared mode for .rubino/status and the
// log, probing for a peer first: "on" (Config.Shared: --shared or
// --watch=poll), "peer" (another mount of the backing directory on this
// host has been seen) or "off".
func (f *FS) SharedMode() string {
	switch {
	case f.cfg.Shared:
		return "on"
	case f.shared():
		return "peer"
	}
	return "off"
}

// addSharedStatus adds three keys to .rubino/status: "shared", the mode
// (SharedMode: on, off or peer), "uncached" (Config.Uncached), and "cross_mount", the cross-mount lock
// counters (CrossLockStats) and the peer probes made.
func (f *FS) addSharedStatus() {
	f.AddStatus(func() (string, any) { return "shared", f.SharedMode() })
	f.AddStatus(func() (string, any) { return "uncached", f.cfg.Uncached }) // docs/DESIGN.md#uncached-view
	f.AddStatus(func() (string, any) {
		st := f.CrossLockStats()
		st["peer_probes"] = f.peerProbes.Load()
		return "cross_mount", st
	})
}
