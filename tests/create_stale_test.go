package tests

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// TestCreateOverStaleNegativeEntry: an open(O_CREAT) without O_EXCL of a
// name the kernel still caches as absent (a negative dentry), while the
// file exists in the backing directory, reaches the daemon as CREATE; the
// daemon's O_EXCL create fails with EEXIST and the call must become an open
// of the existing file (what open(2) does natively), never ENOENT. Without
// a watcher and with a one-hour negative timeout the stale entry is
// deterministic; with the watcher the same window is the watcher's latency.
func TestCreateOverStaleNegativeEntry(t *testing.T) {
	for _, mode := range []guard.Mode{guard.ModeOff, guard.ModeEnforce} {
		t.Run(mode.String(), func(t *testing.T) {
			m := newMount(t, nil, func(c *daemon.Config) {
				c.Mode = mode
				c.Watch = false
				c.CacheTimeout = time.Hour
			})
			for i, flags := range []int{os.O_WRONLY | os.O_APPEND, os.O_RDONLY} {
				name := []string{"appended", "read"}[i]
				if _, err := os.Lstat(m.path(name)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("lstat before the external create: %v, want ENOENT", err)
				}
				m.writeBacking(name, "external\n") // the kernel still caches the name as absent
				f, err := os.OpenFile(m.path(name), flags|os.O_CREATE, 0o644)
				if err != nil {
					t.Fatalf("open(%s, O_CREAT) of a file created outside the mount: %v (want the existing file opened)", name, err)
				}
				var st syscall.Stat_t
				if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Size != int64(len("external\n")) {
					t.Errorf("fstat: size %d, %v; want the existing file's %d bytes", st.Size, err, len("external\n"))
				}
				if flags&os.O_WRONLY != 0 && mode == guard.ModeOff {
					if _, err := f.WriteString("mount\n"); err != nil {
						t.Errorf("write: %v", err)
					}
				}
				if flags == os.O_RDONLY {
					b := make([]byte, 64)
					if n, err := f.Read(b); err != nil || string(b[:n]) != "external\n" {
						t.Errorf("read %q, %v; want the existing content", b[:n], err)
					}
				}
				if err := f.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				want := "external\n"
				if flags&os.O_WRONLY != 0 && mode == guard.ModeOff {
					want += "mount\n"
				}
				if got := m.readBacking(name); got != want {
					t.Errorf("backing %s = %q, want %q", name, got, want)
				}
				if flags == os.O_RDONLY && mode == guard.ModeEnforce {
					// The read is recorded under the file's name, not under
					// go-fuse's placeholder for a node in no directory.
					b, err := os.ReadFile(m.path(".rubino/guard/tracked"))
					if err != nil || !strings.Contains(string(b), "\t"+name+"\n") || strings.Contains(string(b), ".go-fuse") {
						t.Errorf(".rubino/guard/tracked = %q, %v; want a record of %s", b, err, name)
					}
				}
			}
		})
	}
}
