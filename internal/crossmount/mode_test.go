package crossmount

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/guard"
)

type fakePeers struct{ peer atomic.Bool }

func (p *fakePeers) Peer() bool { return p.peer.Load() }

func newMode(cfg Config) *Mode {
	cfg.Guard = guard.New(guard.Config{Mode: guard.ModeEnforce})
	cfg.Logger = slog.New(slog.DiscardHandler)
	return New(cfg)
}

// TestSharedMode: without a probe only Config.Shared makes a mount shared
// and own stats are not tracked; with a probe they are, the mode is "off"
// until the probe finds a peer, then "peer" for good, also once the peer
// is gone; Config.Uncached implies Shared.
func TestSharedMode(t *testing.T) {
	if x := newMode(Config{}); x.Shared() || x.OwnTracked() || x.SharedMode() != "off" {
		t.Fatal("without a probe the mount is shared")
	}
	if x := newMode(Config{Shared: true}); !x.Shared() || x.SharedMode() != "on" {
		t.Fatal("Config.Shared is not on")
	}
	if x := newMode(Config{Uncached: true}); x.SharedMode() != "on" || x.HashFlags() != syscall.O_DIRECT {
		t.Fatal("Config.Uncached does not imply Shared, or hashes without O_DIRECT")
	}
	p := &fakePeers{}
	x := newMode(Config{Peers: p})
	if x.Shared() || !x.OwnTracked() || x.SharedMode() != "off" {
		t.Fatal("no peer: want off, own stats tracked")
	}
	p.peer.Store(true)
	x.peerClearAt.Store(0) // probe afresh (PeerRecheck)
	if !x.Shared() || x.SharedMode() != "peer" {
		t.Fatal("peer: want shared, peer")
	}
	p.peer.Store(false)
	x.peerClearAt.Store(0)
	if !x.Shared() || x.SharedMode() != "peer" || x.peerProbes.Load() != 2 {
		t.Fatalf("peer gone: want shared kept, 2 probes (made %d)", x.peerProbes.Load())
	}
}

// TestLockAcrossModes: two mounts' Modes (two open file descriptions of one
// file) exclude each other: the second LockFd waits out LockWait and is
// refused with EAGAIN, a read lock too; after the unlock both succeed, and
// read locks share. An unshared mount locks nothing.
func TestLockAcrossModes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	open := func() int {
		fd, err := syscall.Open(p, syscall.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		return fd
	}
	a := newMode(Config{Shared: true, LockWait: time.Millisecond})
	b := newMode(Config{Shared: true, LockWait: time.Millisecond})
	fa, fb := open(), open()
	unlock, errno := a.LockFd(fa, "f")
	if errno != 0 {
		t.Fatalf("first lock: %v", errno)
	}
	if _, errno := b.LockFd(fb, "f"); errno != syscall.EAGAIN {
		t.Fatalf("second lock: %v, want EAGAIN", errno)
	}
	if _, ok := b.ReadLock(fb); ok {
		t.Fatal("read lock granted beside a write lock")
	}
	if st := b.LockStats(); st["timeouts"] != uint64(1) {
		t.Fatalf("stats %v, want one timeout", st)
	}
	unlock()
	ur, ok := a.ReadLock(fa)
	if _, ok2 := b.ReadLock(fb); !ok || !ok2 {
		t.Fatal("read locks do not share")
	}
	ur()
	if u, errno := newMode(Config{}).LockFd(fb, "f"); errno != 0 || u == nil {
		t.Fatalf("unshared: %v", errno)
	}
}

// TestNoteUnseen: a stat with another size or mtime than the one this
// mount's own change left counts as another mount's change, once; an
// attribute change (same size and mtime) does not; a file this mount never
// changed is not reported.
func TestNoteUnseen(t *testing.T) {
	x := newMode(Config{Shared: true})
	id := guard.FileID{Dev: 1, Ino: 2}
	own := guard.Stat{ID: id, Size: 3, MtimeNs: 4, CtimeNs: 5}
	x.NoteUnseen(id, guard.Stat{ID: id, Size: 9})
	x.NoteOwn(id, own)
	x.NoteUnseen(id, guard.Stat{ID: id, Size: 3, MtimeNs: 4, CtimeNs: 6})
	if n := x.unseen.Load(); n != 0 {
		t.Fatalf("%d unseen changes, want 0", n)
	}
	x.NoteUnseen(id, guard.Stat{ID: id, Size: 4, MtimeNs: 7})
	x.NoteUnseen(id, guard.Stat{ID: id, Size: 4, MtimeNs: 7})
	if n := x.unseen.Load(); n != 1 {
		t.Fatalf("%d unseen changes, want 1", n)
	}
}
