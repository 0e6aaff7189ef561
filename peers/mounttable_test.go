package peers

import (
	"testing"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// TestPeerInMountTable: a rubinofs mount of the same directory, of one
// inside it or of one above it is a peer; one of a sibling or of a
// directory whose name merely begins the same is not, nor is this mount
// itself (its device), also when bind-mounted elsewhere.
func TestPeerInMountTable(t *testing.T) {
	roots := []string{"/home/dev/proj", "/data/proj"} // as given, resolved
	const self = 77
	for _, tc := range []struct {
		source string
		dev    uint64
		want   bool
	}{
		{"/home/dev/proj", 78, true},
		{"/data/proj", 78, true},             // the same directory by its resolved name
		{"/home/dev/proj/sub/dir", 78, true}, // inside
		{"/home/dev", 78, true},              // above
		{"/", 78, true},
		{"/home/dev/proj2", 78, false},  // a name that only begins the same
		{"/home/dev/other", 78, false},  // a sibling
		{"/home/dev/proj", self, false}, // this mount (or a bind mount of it)
	} {
		ms := []procfs.Mount{{Dev: 5, Source: "/elsewhere"}, {Dev: tc.dev, Mountpoint: "/mnt/x", Source: tc.source}}
		if got := len(peersIn(ms, roots, self)) == 1; got != tc.want {
			t.Errorf("source %s on device %d: peer %v, want %v", tc.source, tc.dev, got, tc.want)
		}
	}
	ms := []procfs.Mount{{Dev: 78, Mountpoint: "/mnt/a", Source: "/data/proj"}, {Dev: 79, Mountpoint: "/mnt/b", Source: "/home/dev"}}
	if got := peersIn(ms, roots, self); len(got) != 2 || got[0] != "/mnt/a" || got[1] != "/mnt/b" {
		t.Errorf("peers' mountpoints %v, want [/mnt/a /mnt/b]", got)
	}
	var nilTable *MountTable
	if nilTable.Peer() || nilTable.Peers() != nil {
		t.Error("a nil MountTable lists a peer")
	}
}
