package tests

import (
	"errors"
	"fmt"
	"io"
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
			// Make the daemon use every directory of the chain once. A
			// stat, not a read: a read's handle is released asynchronously
			// (RELEASE follows close(2)), and a GETATTR arriving while it
			// is still open is answered from that handle's descriptor, as
			// go-fuse does for every GETATTR without a handle: the file
			// opened while it was inside, no escape, but no error either.
			if x, err := forceStat(efd, "canary"); err != nil || x.Size != uint64(len("inside\n")) {
				t.Fatalf("before the move: canary's size = %d, %v", x.Size, err)
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

// TestBackingMovedOutWhileOpen: as TestBackingDirMovedOut, but a handle of
// d/e/canary stays open across the move (a reader still holding it, or a
// close whose RELEASE has not reached the daemon yet). The kernel names
// the file's node in a chmod, truncate or xattr change by its old name,
// and the daemon answers those through an open handle only while the
// handle's file is inside the workspace or has no name left
// (docs/DESIGN.md#handle-fallback): out there, each fails as by name and
// the moved tree stays unchanged. Unlinked while open, the same changes
// still go through the handle (the contrast case, so the test cannot pass
// by refusing everything).
func TestBackingMovedOutWhileOpen(t *testing.T) {
	m := newMount(t, map[string]string{"d/e/canary": "inside\n", "gone": "g\n"}, noWatch)
	xattrs := unix.Lsetxattr(m.backing("d/e/canary"), "user.rubinofs", []byte("v"), 0) == nil
	held, err := os.Open(filepath.Join(m.mnt, "d/e/canary"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	efd := openPath(t, unix.AT_FDCWD, filepath.Join(m.mnt, "d/e"))
	xpath := fmt.Sprintf("/proc/self/fd/%d/canary", efd)

	moved := filepath.Join(m.tmp, "moved")
	if err := os.Rename(m.backing("d"), moved); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, moved)
	type namedOp struct {
		name string
		op   func() error
	}
	ops := []namedOp{
		{"chmod", func() error { return unix.Fchmodat(efd, "canary", 0o600, 0) }},
		{"truncate", func() error { return unix.Truncate(xpath, 0) }},
		{"fchmod of the held descriptor", func() error { return unix.Fchmod(int(held.Fd()), 0o600) }},
	}
	if xattrs {
		ops = append(ops,
			namedOp{"setxattr", func() error { return unix.Lsetxattr(xpath, "user.rubinofs", []byte("x"), 0) }},
			namedOp{"removexattr", func() error { return unix.Lremovexattr(xpath, "user.rubinofs") }})
	}
	for _, o := range ops {
		if err := o.op(); err == nil {
			t.Errorf("%s of a file moved out of the workspace while open succeeded, want an error", o.name)
		}
	}
	sameSnapshot(t, moved, before)
	if b, err := io.ReadAll(held); err != nil || string(b) != "inside\n" {
		t.Errorf("the held descriptor reads %q, %v; want the file as it was", b, err)
	}

	// Contrast: a file unlinked while open is changed through its handle.
	g, err := os.OpenFile(filepath.Join(m.mnt, "gone"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := io.ReadAll(g); err != nil { // read: the guard lets the session remove it
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(m.mnt, "gone")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fchmod(int(g.Fd()), 0o600); err != nil {
		t.Errorf("fchmod of a file unlinked while open: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(g.Fd()), &st); err != nil || st.Mode&0o777 != 0o600 {
		t.Errorf("after fchmod of the unlinked file: mode %o, %v; want 600", st.Mode&0o777, err)
	}
}
