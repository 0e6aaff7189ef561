package fusefs

import (
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
)

// fakePeers is a PeerProbe whose answer the test sets.
type fakePeers struct {
	peer  atomic.Bool
	calls atomic.Int64
}

func (p *fakePeers) Peer() bool { p.calls.Add(1); return p.peer.Load() }

// TestSharedFollowsPeer: without a peer a guarded read-only open is not a
// shared read and the mode is "off"; once the probe finds a peer, the next
// open is a shared read (direct I/O) and the mode is "peer", and it stays
// so when the peer is gone; without a probe only Config.Shared counts.
func TestSharedFollowsPeer(t *testing.T) {
	probe := &fakePeers{}
	var f *FS
	raw, _ := rawFSWith(t, map[string]string{"f": "hello\n"}, guard.ModeEnforce, func(fs *FS) {
		f, fs.cfg.Peers = fs, probe
	})
	cancel := make(chan struct{})
	var entry fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, "f", &entry); !st.Ok() {
		t.Fatalf("lookup: %v", st)
	}
	open := func() uint32 {
		t.Helper()
		f.peerClearAt.Store(0) // probe afresh (PeerRecheck)
		var oo fuse.OpenOut
		in := fuse.OpenIn{InHeader: hdr(entry.NodeId), Flags: syscall.O_RDONLY}
		if st := raw.Open(cancel, &in, &oo); !st.Ok() {
			t.Fatalf("open: %v", st)
		}
		raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(entry.NodeId), Fh: oo.Fh})
		return oo.OpenFlags
	}
	if fl := open(); fl&fuse.FOPEN_DIRECT_IO != 0 || f.SharedMode() != "off" {
		t.Fatalf("no peer: open flags %#x, mode %q; want no direct I/O, off", fl, f.SharedMode())
	}
	if probe.calls.Load() == 0 {
		t.Fatal("the open did not probe for a peer")
	}
	if !f.ownTracked() {
		t.Fatal("own stats not tracked on a mount that may turn shared")
	}
	probe.peer.Store(true)
	if fl := open(); fl&fuse.FOPEN_DIRECT_IO == 0 || f.SharedMode() != "peer" {
		t.Fatalf("peer: open flags %#x, mode %q; want direct I/O, peer", fl, f.SharedMode())
	}
	probe.peer.Store(false)
	if fl := open(); fl&fuse.FOPEN_DIRECT_IO == 0 || f.SharedMode() != "peer" {
		t.Fatalf("peer gone: open flags %#x, mode %q; want shared kept", fl, f.SharedMode())
	}
	f.cfg.Peers = nil
	f.peerSeen.Store(false)
	if f.shared() || f.ownTracked() || f.SharedMode() != "off" {
		t.Fatal("without a probe the mount is shared")
	}
	f.cfg.Shared = true
	if !f.shared() || f.SharedMode() != "on" {
		t.Fatal("Config.Shared is not on")
	}
}
