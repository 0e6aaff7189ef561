package fusefs

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/peers"
	"github.com/rubinofs/rubinofs/sessions"
)

// BenchmarkRawOpenRelease measures the daemon's cost of one read-only OPEN
// and its RELEASE of a guarded file, the whole of what `git grep` sends per
// file now that reads are kernel passthrough. The files are small, so each
// open's read is registered with a hash taken at once (or found in the hash
// cache), as for most files of a source tree.
//
// The "off" run is the same with the guard off: the difference is the
// guard's cost per open and release.
func BenchmarkRawOpenRelease(b *testing.B) {
	b.Run("enforce", func(b *testing.B) { benchOpenRelease(b, guard.ModeEnforce, nil) })
	b.Run("off", func(b *testing.B) { benchOpenRelease(b, guard.ModeOff, nil) })
	// The caller belongs to a registered session: every open also
	// resolves it (Sessions.Resolve).
	b.Run("enforce-session", func(b *testing.B) {
		benchOpenRelease(b, guard.ModeEnforce, func(f *FS) {
			s := sessions.NewRegistry()
			if err := s.Register("agent", uint32(os.Getpid()), "bench"); err != nil {
				b.Fatal(err)
			}
			f.cfg.Sessions = s
		})
	})
	// The caller's cgroup roots a session (docs/DESIGN.md#cgroup-sessions):
	// a cache hit costs what a pid root's does.
	b.Run("enforce-cgroup-session", func(b *testing.B) {
		benchOpenRelease(b, guard.ModeEnforce, func(f *FS) {
			s := sessions.NewRegistry()
			cg, err := s.CgroupOf(uint32(os.Getpid()))
			if err != nil {
				b.Skip(err)
			}
			if err := s.RegisterCgroup("agent", cg, "bench", false); err != nil {
				b.Skip(err)
			}
			f.cfg.Sessions = s
		})
	})
	// Peer detection on (the default: docs/DESIGN.md#peer-mounts), no peer:
	// alone on the host (one fcntl per probe), and beside an unrelated
	// registration (one fcntl per key file, 1 + the root's depth).
	b.Run("enforce-peer-detect", func(b *testing.B) { benchOpenRelease(b, guard.ModeEnforce, peerSetup(b, false)) })
	b.Run("enforce-peer-detect-others", func(b *testing.B) { benchOpenRelease(b, guard.ModeEnforce, peerSetup(b, true)) })
}

// peerSetup returns a setup that registers the FS's backing root in a
// temporary peer registry and makes it the FS's probe, with another
// registration of an unrelated directory when others.
func peerSetup(b *testing.B, others bool) func(*FS) {
	return func(f *FS) {
		dir := b.TempDir()
		reg, err := peers.Register(dir, f.cfg.BackingPath)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { reg.Close() })
		if others {
			o, err := peers.Register(dir, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { o.Close() })
		}
		setPeers(f, reg)
	}
}

func benchOpenRelease(b *testing.B, mode guard.Mode, setup func(*FS)) {
	const n = 64
	files := map[string]string{}
	for i := 0; i < n; i++ {
		files[fmt.Sprintf("f%02d", i)] = fmt.Sprintf("package p // %d\n", i)
	}
	raw, _ := rawFSWith(b, files, mode, setup)
	cancel := make(chan struct{})
	ids := make([]uint64, n)
	for i := range ids {
		var entry fuse.EntryOut
		if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, fmt.Sprintf("f%02d", i), &entry); !st.Ok() {
			b.Fatalf("lookup: %v", st)
		}
		ids[i] = entry.NodeId
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		node := ids[i%n]
		var oo fuse.OpenOut
		in := fuse.OpenIn{InHeader: hdr(node), Flags: syscall.O_RDONLY}
		if st := raw.Open(cancel, &in, &oo); !st.Ok() {
			b.Fatalf("open: %v", st)
		}
		raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(node), Fh: oo.Fh})
	}
}
