package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBackingDirMovedOut: the kernel has cached a directory d/e of the
// workspace and holds a descriptor of it; then, behind the daemon's back,
// d is renamed out of the workspace (same file system, so the directory
// and its inodes live on outside), and in one variant a symlink to the moved
// directory is put in its place. Every operation through the held
// descriptor names d/e/... by its workspace path; none may reach the moved
// directory, which is outside the workspace now: each fails, and the moved
// tree stays byte-for-byte unchanged. This is the guarantee a cache of
// directory descriptors would have to keep (docs/DESIGN.md#dirfd-walk): a
// descriptor opened while d was inside keeps pointing at it outside.
func TestBackingDirMovedOut(t *testing.T) {
	for _, withLink := range []bool{false, true} {
		t.Run(fmt.Sprintf("symlink=%v", withLink), func(t *testing.T) {
			m := newMount(t, map[string]string{"d/e/canary": "inside\n", "d/e/sub/keep": "k\n"}, noWatch)
			if err := unix.Lsetxattr(m.backing("d/e/canary"), "user.rubinofs", []byte("v"), 0); err != nil {
				t.Logf("no user xattrs on the backing file system: %v", err)
			}
			root := openPath(t, unix.AT_FDCWD, m.mnt)
			efd := openPath(t, root, "d/e")
			subfd := openPath(t, efd, "sub")
			// Make the daemon use every directory of the chain once.
			if b, err := readAt(efd, "canary"); err != nil || string(b) != "inside\n" {
				t.Fatalf("before the move: canary = %q, %v", b, err)
			}
			if _, err := listAt(subfd, "."); err != nil {
				t.Fatal(err)
			}

			moved := filepath.Join(m.tmp, "moved") // outside the workspace, same file system
			if err := os.Rename(m.backing("d"), moved); err != nil {
				t.Fatal(err)
			}
			if withLink {
				if err := os.Symlink(moved, m.backing("d")); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, moved)
			buf := make([]byte, 64)
			xpath := fmt.Sprintf("/proc/self/fd/%d/canary", efd)
			ops := []struct {
				name string
				op   func() error
			}{
				{"read", func() error { _, err := readAt(efd, "canary"); return err }},
				{"getattr", func() error { _, err := forceStat(efd, "canary"); return err }},
				{"readdir", func() error { _, err := listAt(efd, "."); return err }},
				{"readdir-sub", func() error { _, err := listAt(subfd, "."); return err }},
				{"create", func() error { return writeAt(efd, "new", "escaped\n") }},
				{"create-sub", func() error { return writeAt(subfd, "new", "escaped\n") }},
				{"mkdir", func() error { return unix.Mkdirat(efd, "newdir", 0o755) }},
				{"symlink", func() error { return unix.Symlinkat("x", efd, "newlink") }},
				{"rename", func() error { return unix.Renameat(efd, "canary", efd, "renamed") }},
				{"unlink", func() error { return unix.Unlinkat(efd, "canary", 0) }},
				{"unlink-sub", func() error { return unix.Unlinkat(subfd, "keep", 0) }},
				{"rmdir", func() error { return unix.Unlinkat(efd, "sub", unix.AT_REMOVEDIR) }},
				{"chmod", func() error { return unix.Fchmodat(efd, "canary", 0o600, 0) }},
				{"truncate", func() error { return unix.Truncate(xpath, 0) }},
				{"setxattr", func() error { return unix.Lsetxattr(xpath, "user.rubinofs", []byte("x"), 0) }},
				{"getxattr", func() error { _, err := unix.Lgetxattr(xpath, "user.rubinofs", buf); return err }},
				{"removexattr", func() error { return unix.Lremovexattr(xpath, "user.rubinofs") }},
			}
			for _, o := range ops {
				err := o.op()
				if err == nil {
					t.Errorf("%s in a directory moved out of the workspace succeeded, want an error", o.name)
					continue
				}
				var errno syscall.Errno
				if !errors.As(err, &errno) {
					t.Errorf("%s: %v", o.name, err)
				}
			}
			sameSnapshot(t, moved, before)
		})
	}
}
