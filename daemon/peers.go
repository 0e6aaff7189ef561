package daemon

// Peer detection: the host-wide registry of backing roots and the mount
// table, which find other mounts of the same backing directory on this
// host (docs/DESIGN.md#peer-mounts).

import (
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/internal/crossmount"
	"github.com/rubinofs/rubinofs/peers"
)

// peerReg is a daemon's peer detection: its registration in the host's
// peer registry (reg, nil when the registry cannot be used) made at at,
// and the watch of the mount table (table, set once the mount answers).
// Peer asks both: the registry sees the mounts of this user, the table
// those of every user in this mount namespace.
type peerReg struct {
	reg     *peers.Registry
	at      time.Time
	roots   []string // the backing root, absolute as given and resolved
	table   atomic.Pointer[peers.MountTable]
	tableAt time.Time // when this mount, just made, was first in the table
}

// Peer reports whether the mount table or the registry shows a peer
// (crossmount.PeerProbe).
func (p *peerReg) Peer() bool {
	if p.table.Load().Peer() {
		return true
	}
	return p.reg != nil && p.reg.Peer()
}

// registerPeers registers root, the backing directory (before it is
// mounted over), in the host's peer registry (peers.Dir) and returns the
// probe the FS asks at its decisions, or nil when detection is off
// (Cache.NoPeerDetect, --peer-detect=false). A registry that cannot be
// used is logged: other mounts of this user are then found only in the
// mount table (watchPeerTable), and do not see this one in the registry.
// The registration is dropped by closeFd.
func (d *Daemon) registerPeers(root string) crossmount.PeerProbe {
	if d.cfg.NoPeerDetect {
		return nil
	}
	d.peers.roots = []string{root}
	if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
		d.peers.roots = append(d.peers.roots, real)
	}
	reg, err := peers.Register("", root)
	if err != nil {
		d.cfg.Slog.Warn("peer registry not usable: other mounts of this backing directory are found in the mount table only (not those of another mount namespace); pass --shared if there are any",
			"registry", peers.Dir(), "err", err)
	} else {
		d.peers.reg, d.peers.at = reg, time.Now()
	}
	return &d.peers
}

// watchPeerTable starts the watch of the mount table for peers, once the
// mount answers (its root's device tells this mount from the others).
// Logged when it cannot: peers of other users are then not found.
func (d *Daemon) watchPeerTable() {
	if d.cfg.NoPeerDetect {
		return
	}
	d.peers.tableAt = time.Now() // the mount is in the table: others' watches wake
	var st syscall.Stat_t
	err := syscall.Stat(d.cfg.Mountpoint, &st)
	var t *peers.MountTable
	if err == nil {
		t, err = peers.WatchMountTable(d.peers.roots, st.Dev)
	}
	if err != nil {
		d.cfg.Slog.Warn("not watching the mount table for peers: another user's mount of this backing directory is not detected; pass --shared if there is one", "err", err)
		return
	}
	d.peers.table.Store(t)
	// Which mounts made this one shared, for people: the registry knows
	// only that there is one.
	d.FS.AddStatus(func() (string, any) { return "peer_mounts", d.peers.table.Load().Peers() })
}

// awaitPeers waits, before the mount serves its first request, until
// crossmount.PeerRecheck has passed since the registration: another mount
// that probed just before it and found no peer probes again before this
// mount can change anything (at most 20 ms, once, at mount time; usually
// less, as the watcher's start has taken part of it).
func (d *Daemon) awaitPeers() {
	if d.peers.reg != nil {
		time.Sleep(time.Until(d.peers.at.Add(crossmount.PeerRecheck)))
	}
}

// awaitPeerTable waits, before Start reports the mount ready, until
// crossmount.PeerRecheck has passed since the mount entered the mount
// table: another user's mount of the same directory, which finds this one
// only there, has by then read the table and no longer trusts a probe
// from before it, so the first change this mount's users make is seen as
// a peer's (at most 20 ms, once; Start's own work after the mount usually
// takes part of it).
func (d *Daemon) awaitPeerTable() {
	if !d.peers.tableAt.IsZero() {
		time.Sleep(time.Until(d.peers.tableAt.Add(crossmount.PeerRecheck)))
	}
}

// closePeers drops the registration (registerPeers) and stops the mount
// table's watch, once the server has stopped: other mounts stop seeing
// this one in the registry (in the table once it is unmounted).
func (d *Daemon) closePeers() {
	d.peers.table.Swap(nil).Close()
	if d.peers.reg != nil {
		d.peers.reg.Close()
		d.peers.reg = nil
	}
}
