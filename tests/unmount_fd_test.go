package tests

import (
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/internal/mounttest"
)

// TestDoneAfterDevFuseClosed: a daemon's Done is closed only once its
// /dev/fuse descriptor is closed too. go-fuse's Server.Wait returns when
// the serve loops end, before Serve closes the descriptor, so a Done built
// on it let a caller (the test helper's leak check, with another mount of
// the same process still alive) see the descriptor as still open. Each
// round mounts the workspace a second time while the first mount lives,
// unmounts it from outside (as umount does) and looks at the descriptors
// the moment Done is closed.
func TestDoneAfterDevFuseClosed(t *testing.T) {
	first := newMount(t, map[string]string{"f": "x\n"}, nil)
	for i := 0; i < 40; i++ {
		before, err := mounttest.DaemonFds("/dev/fuse")
		if err != nil {
			t.Fatal(err)
		}
		m := newMount(t, nil, func(c *daemon.Config) { c.Workspace = first.ws })
		if err := syscall.Unmount(m.mnt, 0); err != nil {
			t.Fatalf("round %d: umount: %v", i, err)
		}
		<-m.d.Done()
		after, err := mounttest.DaemonFds("/dev/fuse")
		if err != nil {
			t.Fatal(err)
		}
		if d := mounttest.DiffFds(before, after); len(d) > 0 {
			t.Fatalf("round %d: /dev/fuse descriptors open after Done: %v", i, d)
		}
	}
}
