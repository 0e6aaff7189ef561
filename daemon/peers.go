package daemon

// Registration in the host-wide registry of backing roots, which finds
// other mounts of the same backing directory on this host
// (docs/DESIGN.md#peer-mounts).

import (
	"time"

	"github.com/rubinofs/rubinofs/internal/crossmount"
	"github.com/rubinofs/rubinofs/peers"
)

// peerReg is a daemon's registration in the host's peer registry: reg
// (nil with detection off), made at at.
type peerReg struct {
	reg *peers.Registry
	at  time.Time
}

// registerPeers registers root, the backing directory (before it is
// mounted over), in the host's peer registry (peers.Dir) and returns the
// probe the FS asks at its decisions, or nil when detection is off
// (Cache.NoPeerDetect, --peer-detect=false) or the registry cannot be
// used (logged: the mount then neither sees nor is seen by its peers, as
// with detection off). The registration is dropped by closeFd.
func (d *Daemon) registerPeers(root string) crossmount.PeerProbe {
	if d.cfg.NoPeerDetect {
		return nil
	}
	reg, err := peers.Register("", root)
	if err != nil {
		d.cfg.Slog.Warn("peer detection off: other mounts of this backing directory on this host are not detected; pass --shared if there are any",
			"registry", peers.Dir(), "err", err)
		return nil
	}
	d.peers = peerReg{reg: reg, at: time.Now()}
	return reg
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

// closePeers drops the registration (registerPeers), once the server has
// stopped: other mounts stop seeing this one.
func (d *Daemon) closePeers() {
	if d.peers.reg != nil {
		d.peers.reg.Close()
		d.peers.reg = nil
	}
}
