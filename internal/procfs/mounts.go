package procfs

// The kernel's mount tables: where the cgroup v2 hierarchy is mounted
// (docs/DESIGN.md#cgroup-sessions), and the octal escapes of their fields.
// Parsing mountinfo is github.com/moby/sys/mountinfo's.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
)

// ErrNoCgroup2 is returned when no cgroup v2 (unified) hierarchy is
// mounted in the daemon's mount namespace.
var ErrNoCgroup2 = errors.New("no cgroup v2 hierarchy is mounted (want a cgroup2 entry in /proc/self/mountinfo)")

// Cgroup2Mount returns the mount point of the cgroup v2 hierarchy, found
// once from /proc/self/mountinfo (the first mount of type cgroup2 whose
// root is the hierarchy's root; /sys/fs/cgroup on most hosts,
// /sys/fs/cgroup/unified on hybrid ones). Errors: ErrNoCgroup2 (wrapping
// the cause when the table could not be read). Safe for concurrent use.
func Cgroup2Mount() (string, error) {
	cg2Once.Do(func() { cg2Mount, cg2Err = findCgroup2("/proc/self/mountinfo") })
	return cg2Mount, cg2Err
}

var (
	cg2Once  sync.Once
	cg2Mount string
	cg2Err   error
)

// findCgroup2 reads the mountinfo file at path for the cgroup2 mount.
func findCgroup2(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCgroup2, err)
	}
	defer f.Close()
	ms, err := mountinfo.GetMountsFromReader(f, func(m *mountinfo.Info) (skip, stop bool) {
		ok := m.FSType == "cgroup2" && m.Root == "/"
		return !ok, ok
	})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCgroup2, err)
	}
	if len(ms) == 0 {
		return "", ErrNoCgroup2
	}
	return ms[0].Mountpoint, nil
}

// UnescapeMountField undoes the kernel's octal escapes (\NNN: \040 for a
// space, \011 tab, \012 newline, \134 backslash) of a field of a mount
// table: /proc/PID/mounts, whose format github.com/moby/sys/mountinfo does
// not parse, or a mountinfo field read by hand. A backslash not followed by
// three octal digits of a byte value stays as it is. Pure.
func UnescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
