package peers

// Peers in the mount table: the rubinofs mounts any user made of the same
// backing directory (docs/DESIGN.md#peer-mounts).

import (
	"strings"
	"sync/atomic"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// FSType is the file system type every rubinofs mount shows in the mount
// table (FUSE's "fuse." and the server's name); its source is the
// workspace the mount serves.
const FSType = "fuse.rubinofs"

// MountTable finds peers in this mount namespace's mount table: a rubinofs
// mount, other than this one, whose source is this mount's backing root,
// lies inside it or holds it. Any user's mount is listed there, where the
// registry (Register) is one user's: a mount by root and one by a user of
// one directory find each other only here. The table is read again after
// each change of it (procfs.WatchTable), from a goroutine, so Peer is one
// atomic load; a mount of another namespace (a container's) is not seen.
// A dead mount (its daemon killed, not yet unmounted) still counts: shared
// mode costs speed, never an update. Concurrency: Peer is safe for
// concurrent use; Close must not race with it.
type MountTable struct {
	roots []string                 // the backing root's names: absolute as given, and resolved
	self  uint64                   // this mount's device: never its own peer
	peers atomic.Pointer[[]string] // the peers' mountpoints at the last read
	stop  func()
}

// WatchMountTable reads the table now, and again after each change, for
// mounts related to roots (the backing root's names, absolute and
// cleaned) other than the one on device self (st_dev of this mount's
// root). Call it once the mount answers. Errors: those of
// procfs.WatchTable; an unreadable table at a later change keeps the
// previous answer.
func WatchMountTable(roots []string, self uint64) (*MountTable, error) {
	t := &MountTable{roots: roots, self: self}
	t.scan()
	stop, err := procfs.WatchTable(func() bool { t.scan(); return true })
	if err != nil {
		return nil, err
	}
	t.stop = stop
	return t, nil
}

// scan reads the table and stores whether it lists a peer.
func (t *MountTable) scan() {
	ms, err := procfs.MountsOfType(FSType)
	if err != nil {
		return
	}
	found := peersIn(ms, t.roots, t.self)
	t.peers.Store(&found)
}

// peersIn returns the mountpoints of the mounts in ms, on a device other
// than self, whose source is related to one of roots (related).
func peersIn(ms []procfs.Mount, roots []string, self uint64) []string {
	var found []string
	for _, m := range ms {
		if m.Dev == self {
			continue // this mount, or a bind mount of it
		}
		for _, r := range roots {
			if related(m.Source, r) {
				found = append(found, m.Mountpoint)
				break
			}
		}
	}
	return found
}

// related reports whether the absolute paths a and b are the same
// directory by name, or one lies beneath the other.
func related(a, b string) bool {
	return a == b || beneath(a, b) || beneath(b, a)
}

// beneath reports whether path a lies strictly below directory b.
func beneath(a, b string) bool {
	if b == "/" {
		return a != "/" && strings.HasPrefix(a, "/")
	}
	return strings.HasPrefix(a, b+"/")
}

// Peer reports whether the table listed a peer at its last change. A nil
// MountTable lists none.
func (t *MountTable) Peer() bool { return len(t.Peers()) > 0 }

// Peers returns the mountpoints of the peers the table listed at its last
// change (nil for none, and for a nil MountTable). The caller must not
// change the slice.
func (t *MountTable) Peers() []string {
	if t == nil {
		return nil
	}
	if p := t.peers.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops watching the table. Idempotent.
func (t *MountTable) Close() {
	if t != nil && t.stop != nil {
		t.stop()
	}
}
