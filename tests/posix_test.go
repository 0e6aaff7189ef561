package tests

import (
	"os"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// posixtestNotPOSIX are posixtest cases that assert go-fuse's own lock
// forwarding rather than POSIX: the mount keeps locks in the kernel
// (EnableLocks off), where they behave as natively (TestPosixCompare).
var posixtestNotPOSIX = map[string]string{
	"FcntlFlockLocksFile": "expects a second F_SETLK of the same process to conflict (go-fuse forwards fcntl locks " +
		"as OFD locks); under POSIX, and natively, it succeeds: see TestPosixCompare/fcntl_locks_between_processes",
}

// TestPosix runs go-fuse's exported POSIX suite (posixtest.All) against the
// mount with the guard off and enforcing. In enforce mode the suite only
// touches files it created itself, which the guard credits to its session,
// so every case must pass unchanged. One mount per mode (gocryptfs' "mount
// once per topic"); each case gets its own directory.
func TestPosix(t *testing.T) {
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, mode := range []guard.Mode{guard.ModeOff, guard.ModeEnforce} {
		t.Run(mode.String(), func(t *testing.T) {
			m := newMount(t, nil, func(c *daemon.Config) { c.Mode = mode })
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					if why, ok := posixtestNotPOSIX[name]; ok {
						t.Skip(why)
					}
					dir := m.path("posix-" + name)
					if err := os.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					posixtest.All[name](t, dir)
				})
			}
		})
	}
}
