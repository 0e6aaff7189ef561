package daemon

// Registration in the host-wide registry of backing roots, which finds
// other mounts of the same backing directory on this host
// (docs/DESIGN.md#peer-mounts).

import (
	"github.com/rubinofs/rubinofs/fusefs"
	"github.com/rubinofs/rubinofs/peers"
)

// registerPeers registers root, the backing directory (before it is
// mounted over), in the host's peer registry (peers.Dir) and returns the
// probe the FS asks at its decisions, or nil when detection is off
// (Cache.NoPeerDetect, --peer-detect=false) or the registry cannot be
// used (logged: the mount then neither sees nor is seen by its peers, as
// with detection off). The registration is dropped by closeFd.
func (d *Daemon) registerPeers(root string) fusefs.PeerProbe {
	if d.cfg.NoPeerDetect {
		return nil
	}
	reg, err := peers.Register("", root)
	if err != nil {
		d.cfg.Slog.Warn("peer detection off: other mounts of this backing directory on this host are not detected; pass --shared if there are any",
			"registry", peers.Dir(), "err", err)
		return nil
	}
	d.peers = reg
	return reg
}

// closePeers drops the registration (registerPeers), once the server has
// stopped: other mounts stop seeing this one.
func (d *Daemon) closePeers() {
	if d.peers != nil {
		d.peers.Close()
		d.peers = nil
	}
}
