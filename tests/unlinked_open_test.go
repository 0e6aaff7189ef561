package tests

// Attribute changes and writes through a file handle whose name is gone or
// names another file by now (docs/POSIX.md; the POSIX comparison cases
// fchmod_unlinked_open_file and write_unlinked_open_file cover the plain
// unlinked file).

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
)

// TestSetattrNameReplacedOutside: a file open through the mount is
// replaced in the backing workspace (another file renamed over its name).
// fchmod, fchown and futimens through the open descriptor (which the kernel
// sends without a file handle) change the open file, never the new file
// that now has the name. With the watcher (once it has applied the rename,
// chmod by name reaches the new file and leaves the open one alone) and
// without it (the tree still maps the name to the old node: once that has
// no open handle, chmod by name gets ESTALE, which the kernel retries with
// a fresh lookup that reaches the new file).
func TestSetattrNameReplacedOutside(t *testing.T) {
	for _, watch := range []bool{true, false} {
		name := "watch"
		if !watch {
			name = "nowatch"
		}
		t.Run(name, func(t *testing.T) {
			m := newMount(t, map[string]string{"a": "old\n"}, func(c *daemon.Config) { c.Watch = watch })
			if err := os.Chmod(m.backing("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(m.path("a"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			fdOpen := true
			defer func() {
				if fdOpen {
					unix.Close(fd)
				}
			}()
			// Replace a in the backing workspace, behind the mount.
			mark := m.appliedMark()
			m.writeBacking("a.new", "new\n")
			if err := os.Chmod(m.backing("a.new"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(m.backing("a.new"), m.backing("a")); err != nil {
				t.Fatal(err)
			}

			if err := unix.Fchmod(fd, 0o600); err != nil {
				t.Fatalf("fchmod of the open file: %v", err)
			}
			if err := unix.Fchown(fd, nobody, nobody); err != nil {
				t.Fatalf("fchown of the open file: %v", err)
			}
			if err := unix.Futimes(fd, []unix.Timeval{{Sec: 1_000_000_000}, {Sec: 1_000_000_000}}); err != nil {
				t.Fatalf("futimes of the open file: %v", err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&0o7777 != 0o600 || st.Uid != nobody || st.Mtim.Sec != 1_000_000_000 {
				t.Fatalf("open file after fchmod/fchown/futimes: mode %o uid %d mtime %d", st.Mode&0o7777, st.Uid, st.Mtim.Sec)
			}
			var nst unix.Stat_t
			if err := unix.Stat(m.backing("a"), &nst); err != nil {
				t.Fatal(err)
			}
			if nst.Mode&0o7777 != 0o644 || nst.Uid != 0 || nst.Mtim.Sec == 1_000_000_000 {
				t.Fatalf("the new file under the name was changed: mode %o uid %d mtime %d", nst.Mode&0o7777, nst.Uid, nst.Mtim.Sec)
			}

			newMode := func() uint32 {
				if err := unix.Stat(m.backing("a"), &nst); err != nil {
					t.Fatal(err)
				}
				return nst.Mode & 0o7777
			}
			if watch {
				// chmod by name reaches the file the name has now.
				m.waitApplied(mark, "a")
				if err := unix.Chmod(m.path("a"), 0o640); err != nil {
					t.Fatalf("chmod by name: %v", err)
				}
				if got := newMode(); got != 0o640 {
					t.Fatalf("chmod by name: the new file has mode %o, want 640", got)
				}
				if err := unix.Fstat(fd, &st); err != nil {
					t.Fatal(err)
				}
				if st.Mode&0o7777 != 0o600 {
					t.Fatalf("chmod by name changed the old open file: mode %o", st.Mode&0o7777)
				}
				return
			}
			// Without the watcher the kernel's dentry still names the old
			// node. Once its handle is released (RELEASE follows close(2)
			// asynchronously: poll), chmod by name gets ESTALE from the
			// daemon and the kernel's retry reaches the new file.
			fdOpen = false
			if err := unix.Close(fd); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if err := unix.Chmod(m.path("a"), 0o640); err != nil {
					t.Fatalf("chmod by name: %v", err)
				}
				if newMode() == 0o640 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("chmod by name never reached the new file: mode %o", newMode())
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestUnlinkedOpenFileRecordsForgottenAtRelease: the session's record of a
// file unlinked while open stays (writes through the handle are allowed)
// until the last handle is released, and is dropped then, so a new file
// reusing the inode number inherits nothing.
func TestUnlinkedOpenFileRecordsForgottenAtRelease(t *testing.T) {
	m := newMount(t, nil, nil)
	if err := os.WriteFile(m.path("f"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(m.path("f"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			unix.Close(fd)
		}
	}()
	if err := unix.Unlink(m.path("f")); err != nil {
		t.Fatal(err)
	}
	// guard/tracked: one "state<TAB>hash<TAB>path" line per record.
	tracked := func() string {
		b, err := os.ReadFile(m.path(".rubino/guard/tracked"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	hasF := func(text string) bool { return strings.Contains("\n"+text, "\tf\n") }
	if got := tracked(); !hasF(got) {
		t.Fatalf("record of the unlinked open file dropped while open: %q", got)
	}
	if _, err := unix.Pwrite(fd, []byte("MINE"), 0); err != nil {
		t.Fatalf("write through the handle after unlink: %v", err)
	}
	if err := unix.Ftruncate(fd, 2); err != nil {
		t.Fatalf("ftruncate through the handle after unlink: %v", err)
	}
	closed = true
	if err := unix.Close(fd); err != nil {
		t.Fatal(err)
	}
	// RELEASE reaches the daemon after close(2) returns: poll.
	deadline := time.Now().Add(10 * time.Second)
	for hasF(tracked()) {
		if time.Now().After(deadline) {
			t.Fatalf("record still tracked after the last close: %q", tracked())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
