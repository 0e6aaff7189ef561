package ascaller

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
)

// TestOf: the groups come from the caller's status when its fs ids
// match the request's, and not otherwise.
func TestOf(t *testing.T) {
	gs, _ := unix.Getgroups()
	c := ctltree.Caller{Pid: uint32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	if got := Of(c); len(got.Groups) != len(gs) {
		t.Errorf("Of(self) groups %v, want %v", got.Groups, gs)
	}
	c.Uid++ // a reused pid: another uid's process
	if got := Of(c); got.Groups != nil {
		t.Errorf("credsOf with a mismatching uid took groups %v", got.Groups)
	}
	if got := Of(ctltree.Caller{Uid: 5, Gid: 6}); got.Uid != 5 || got.Gid != 6 || got.Groups != nil {
		t.Errorf("Of(no pid) = %+v", got)
	}
}

// TestModeGrants: the pre-image rule's mode-bit check.
func TestModeGrants(t *testing.T) {
	nobody := Creds{Uid: 65534, Gid: 65534, Groups: []uint32{100}}
	for _, c := range []struct {
		uid, gid, mode uint32
		want           bool
	}{
		{0, 0, 0o600, false},
		{0, 0, 0o604, true},
		{65534, 0, 0o400, true},
		{65534, 0, 0o044, false}, // the owner class decides for the owner
		{0, 100, 0o640, true},
		{0, 65534, 0o604, false}, // the group class decides for the group
	} {
		if got := ModeGrants(nobody, c.uid, c.gid, c.mode, 4); got != c.want {
			t.Errorf("ModeGrants(%d:%d %o) = %v, want %v", c.uid, c.gid, c.mode, got, c.want)
		}
	}
}
