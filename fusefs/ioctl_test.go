package fusefs

import (
	"context"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

// recIoctl is an fs.FileIoctler that records the commands it ran.
type recIoctl struct{ cmds []uint32 }

func (r *recIoctl) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	r.cmds = append(r.cmds, cmd)
	return 0, 0
}

// TestIoctlTTYProbe: TCGETS, isatty(3)'s probe, is answered ENOTTY with
// neither an own-change bracket nor a backing ioctl; any other command is
// run on the backing descriptor inside a bracket.
func TestIoctlTTYProbe(t *testing.T) {
	f, _, _ := journalFS(t, guard.ModeEnforce, map[string]string{"a/f": "x"})
	var bracketed []string
	f.oc.begin = func(rels ...string) func() {
		bracketed = append(bracketed, rels...)
		return func() {}
	}
	h := &recIoctl{}
	if _, errno := f.ownIoctl("a/f", h, context.Background(), unix.TCGETS, 0, nil, nil); errno != syscall.ENOTTY {
		t.Errorf("TCGETS: %v, want ENOTTY", errno)
	}
	if len(h.cmds) != 0 || len(bracketed) != 0 {
		t.Errorf("TCGETS ran %x on the backing descriptor, bracketed %q; want neither", h.cmds, bracketed)
	}
	if _, errno := f.ownIoctl("a/f", h, context.Background(), unix.FS_IOC_GETFLAGS, 0, nil, nil); errno != 0 {
		t.Fatal(errno)
	}
	if len(h.cmds) != 1 || h.cmds[0] != unix.FS_IOC_GETFLAGS || len(bracketed) != 1 || bracketed[0] != "a/f" {
		t.Errorf("FS_IOC_GETFLAGS ran %x, bracketed %q; want it run once inside a bracket of a/f", h.cmds, bracketed)
	}
}
