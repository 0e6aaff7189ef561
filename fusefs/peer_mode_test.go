package fusefs

import (
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/crossmount"
)

// fakePeers is a PeerProbe whose answer the test sets.
type fakePeers struct {
	peer  atomic.Bool
	calls atomic.Int64
}

func (p *fakePeers) Peer() bool { p.calls.Add(1); return p.peer.Load() }

// setPeers makes p the probe of f, a FS not mounted yet, with a fresh
// crossmount.Mode (no probe made yet, no peer seen).
func setPeers(f *FS, p crossmount.PeerProbe) {
	f.cfg.Peers = p
	f.cross = crossmount.New(crossmount.Config{Shared: f.cfg.Shared, Uncached: f.cfg.Uncached, Peers: p,
		Workspace: f.cfg.Workspace, Guard: f.cfg.Guard, Logger: f.log})
}

// TestSharedFollowsPeer: without a peer a guarded read-only open is not a
// shared read and the mode is "off"; once the probe finds a peer, the next
// open is a shared read (direct I/O) and the mode is "peer", and it stays
// so when the peer is gone (the mode's own transitions:
// internal/crossmount TestSharedMode).
func TestSharedFollowsPeer(t *testing.T) {
	probe := &fakePeers{}
	var f *FS
	raw, _ := rawFSWith(t, map[string]string{"f": "hello\n"}, guard.ModeEnforce, func(fs *FS) {
		f = fs
		setPeers(fs, probe)
	})
	cancel := make(chan struct{})
	var entry fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, "f", &entry); !st.Ok() {
		t.Fatalf("lookup: %v", st)
	}
	open := func() uint32 {
		t.Helper()
		var oo fuse.OpenOut
		in := fuse.OpenIn{InHeader: hdr(entry.NodeId), Flags: syscall.O_RDONLY}
		if st := raw.Open(cancel, &in, &oo); !st.Ok() {
			t.Fatalf("open: %v", st)
		}
		raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(entry.NodeId), Fh: oo.Fh})
		return oo.OpenFlags
	}
	mode := func() string { return f.CrossMount().SharedMode() }
	if fl := open(); fl&fuse.FOPEN_DIRECT_IO != 0 || mode() != "off" {
		t.Fatalf("no peer: open flags %#x, mode %q; want no direct I/O, off", fl, mode())
	}
	if probe.calls.Load() == 0 {
		t.Fatal("the open did not probe for a peer")
	}
	if !f.cross.OwnTracked() {
		t.Fatal("own stats not tracked on a mount that may turn shared")
	}
	probe.peer.Store(true)
	setPeers(f, probe) // probe afresh (crossmount.PeerRecheck)
	if fl := open(); fl&fuse.FOPEN_DIRECT_IO == 0 || mode() != "peer" {
		t.Fatalf("peer: open flags %#x, mode %q; want direct I/O, peer", fl, mode())
	}
	probe.peer.Store(false)
	if fl := open(); fl&fuse.FOPEN_DIRECT_IO == 0 || mode() != "peer" {
		t.Fatalf("peer gone: open flags %#x, mode %q; want shared kept", fl, mode())
	}
}
