package tests

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// Every backing access is relative to the workspace root descriptor and
// never follows a symlink inside the workspace (fusefs/backing.go). These tests
// reach cached nodes of the mount through descriptors held open (so the
// kernel never resolves the swapped name again: only the daemon does), then
// replace a directory of the backing workspace by a symlink leading
// outside, and check that nothing outside is ever read or changed.

// noWatch mounts with the watcher off and hour-long kernel caches: nothing
// tells the kernel that the backing directory changed, so its dentries keep
// pointing at the node whose backing path is now a symlink.
func noWatch(c *daemon.Config) {
	c.Watch = false
	c.CacheTimeout = time.Hour
}

// randName returns a short random hex string.
func randName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// openPath opens p as an O_PATH directory descriptor, closed at cleanup.
func openPath(t *testing.T, dirfd int, p string) int {
	t.Helper()
	fd, err := unix.Openat(dirfd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// readAt reads the file name relative to dirfd.
func readAt(dirfd int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// writeAt creates name relative to dirfd (O_EXCL) with content.
func writeAt(dirfd int, name, content string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// listAt lists the directory name relative to dirfd, sorted.
func listAt(dirfd int, name string) ([]string, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// forceStat stats name relative to dirfd without following a final
// symlink, forcing a GETATTR to the daemon (AT_STATX_FORCE_SYNC) instead of
// the kernel's attribute cache.
func forceStat(dirfd int, name string) (unix.Statx_t, error) {
	var x unix.Statx_t
	err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &x)
	return x, err
}

// snapshot is a directory's entries with their content (files), link
// target (symlinks), mode and mtime, for "nothing changed" checks.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := fmt.Sprintf("%v %d", fi.Mode(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		}
		if v, err := unix.Lgetxattr(p, "user.rubinofs", make([]byte, 256)); err == nil {
			desc += fmt.Sprintf(" xattr:%d", v)
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameSnapshot fails when dir's snapshot differs from before.
func sameSnapshot(t *testing.T, dir string, before map[string]string) {
	t.Helper()
	after := snapshot(t, dir)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("outside the workspace, %s changed: %q -> %q", filepath.Join(dir, k), v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("outside the workspace, %s appeared: %q", filepath.Join(dir, k), v)
		}
	}
}

// TestBackingSymlinkSwap: the kernel has cached a directory d and a tree
// below it; then, in the backing workspace, d is replaced by a symlink to
// "/". The cached tree below d mirrors a real directory outside the
// workspace (out, holding a canary file, a symlink and an xattr), so every
// operation on a cached node names, by its backing path, a file outside. A
// daemon that followed the symlink would read or change out; each
// operation must fail instead and out must stay byte-for-byte unchanged.
func TestBackingSymlinkSwap(t *testing.T) {
	out := t.TempDir() // outside the workspace, reachable as d/<outRel>
	outRel := strings.TrimPrefix(out, "/")
	os.WriteFile(filepath.Join(out, "canary"), []byte("OUTSIDE\n"), 0o644)
	os.Symlink("outside-target", filepath.Join(out, "lnk"))
	os.Mkdir(filepath.Join(out, "sub"), 0o755)
	xattrs := unix.Lsetxattr(filepath.Join(out, "canary"), "user.rubinofs", []byte("outside"), 0) == nil

	// The mirror inside the workspace: the same names under d/<outRel>.
	inside := filepath.Join("d", outRel)
	files := map[string]string{
		filepath.Join(inside, "canary"): "inside\n",
		"d/tmp/keep":                    "inside\n", // d/tmp: a cached directory named like the host's /tmp
	}
	m := newMount(t, files, noWatch)
	os.Symlink("inside-target", m.backing(filepath.Join(inside, "lnk")))
	os.Mkdir(m.backing(filepath.Join(inside, "sub")), 0o755)

	// Cache the whole chain in the kernel and pin it with descriptors.
	root := openPath(t, unix.AT_FDCWD, m.mnt)
	dfd := openPath(t, root, inside)
	tmpfd := openPath(t, root, "d/tmp")
	subfd := openPath(t, dfd, "sub")
	// A stat, not a read: a read's handle is released asynchronously, and
	// a GETATTR arriving while it is still open is answered from that
	// handle's descriptor (the inside file: no escape, but no error).
	if x, err := forceStat(dfd, "canary"); err != nil || x.Size != uint64(len("inside\n")) {
		t.Fatalf("before the swap: canary's size = %d, %v", x.Size, err)
	}
	if _, err := forceStat(dfd, "lnk"); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, out)

	// The swap, behind the daemon's back.
	if err := os.Rename(m.backing("d"), m.backing("d.real")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", m.backing("d")); err != nil {
		t.Fatal(err)
	}

	esc := "rubinofs-escape-" + randName(t)
	t.Cleanup(func() {
		os.Remove(filepath.Join("/tmp", esc))
		os.RemoveAll(filepath.Join(out, esc))
	})
	buf := make([]byte, 64)
	ops := []struct {
		name string
		op   func() error
	}{
		{"read", func() error {
			b, err := readAt(dfd, "canary")
			if err == nil && string(b) == "OUTSIDE\n" {
				return errors.New("read the outside canary")
			}
			return err
		}},
		{"getattr", func() error {
			x, err := forceStat(dfd, "canary")
			if err == nil && x.Size == uint64(len("OUTSIDE\n")) {
				return errors.New("stat saw the outside canary's size")
			}
			return err
		}},
		{"lookup-new", func() error { _, err := forceStat(dfd, "no-such-"+esc); return err }},
		{"readlink", func() error {
			n, err := unix.Readlinkat(dfd, "lnk", buf)
			if err == nil && string(buf[:n]) == "outside-target" {
				return errors.New("readlink returned the outside link")
			}
			return err
		}},
		{"readdir", func() error { _, err := listAt(dfd, "."); return err }},
		{"readdir-sub", func() error { _, err := listAt(subfd, "."); return err }},
		{"create", func() error { return writeAt(dfd, esc, "escaped\n") }},
		{"create-tmp", func() error { return writeAt(tmpfd, esc, "escaped\n") }},
		{"mkdir", func() error { return unix.Mkdirat(dfd, esc, 0o755) }},
		{"mknod", func() error { return unix.Mknodat(dfd, esc, unix.S_IFIFO|0o644, 0) }},
		{"symlink", func() error { return unix.Symlinkat("x", dfd, esc) }},
		{"link", func() error { return unix.Linkat(dfd, "canary", dfd, esc, 0) }},
		{"rename", func() error { return unix.Renameat(dfd, "canary", dfd, esc) }},
		{"rename-exchange", func() error {
			return unix.Renameat2(dfd, "canary", dfd, "lnk", unix.RENAME_EXCHANGE)
		}},
		{"unlink", func() error { return unix.Unlinkat(dfd, "canary", 0) }},
		{"unlink-link", func() error { return unix.Unlinkat(dfd, "lnk", 0) }},
		{"rmdir", func() error { return unix.Unlinkat(dfd, "sub", unix.AT_REMOVEDIR) }},
		{"chmod", func() error { return unix.Fchmodat(dfd, "canary", 0o600, 0) }},
		{"chown", func() error { return unix.Fchownat(dfd, "canary", 1, 1, unix.AT_SYMLINK_NOFOLLOW) }},
		{"utimens", func() error {
			ts := []unix.Timespec{{Sec: 1}, {Sec: 1}}
			return unix.UtimesNanoAt(dfd, "canary", ts, unix.AT_SYMLINK_NOFOLLOW)
		}},
		{"truncate", func() error {
			return unix.Truncate(fmt.Sprintf("/proc/self/fd/%d/canary", dfd), 0)
		}},
		{"open-trunc", func() error {
			fd, err := unix.Openat(dfd, "canary", unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"setxattr", func() error {
			return unix.Lsetxattr(fmt.Sprintf("/proc/self/fd/%d/canary", dfd), "user.rubinofs", []byte("x"), 0)
		}},
		{"getxattr", func() error {
			n, err := unix.Lgetxattr(fmt.Sprintf("/proc/self/fd/%d/canary", dfd), "user.rubinofs", buf)
			if err == nil && string(buf[:n]) == "outside" {
				return errors.New("getxattr returned the outside xattr")
			}
			return err
		}},
		{"listxattr", func() error {
			n, err := unix.Llistxattr(fmt.Sprintf("/proc/self/fd/%d/canary", dfd), buf)
			if err == nil && strings.Contains(string(buf[:n]), "user.rubinofs") {
				return errors.New("listxattr listed the outside xattr")
			}
			return err
		}},
		{"removexattr", func() error {
			return unix.Lremovexattr(fmt.Sprintf("/proc/self/fd/%d/canary", dfd), "user.rubinofs")
		}},
	}
	for _, o := range ops {
		err := o.op()
		if err == nil {
			t.Errorf("%s through a swapped directory succeeded, want an error", o.name)
			continue
		}
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			t.Errorf("%s: %v (an escape)", o.name, err)
		}
	}
	sameSnapshot(t, out, before)
	if _, err := os.Lstat(filepath.Join("/tmp", esc)); err == nil {
		t.Errorf("/tmp/%s was created through the mount", esc)
	}
	if xattrs {
		if _, err := unix.Lgetxattr(filepath.Join(out, "canary"), "user.rubinofs", buf); err != nil {
			t.Errorf("the outside xattr is gone: %v", err)
		}
	}
	// /etc/hostname, when the host has one: d/etc is not cached, so this
	// is the daemon's lookup of etc under the swapped d.
	if host, err := os.ReadFile("/etc/hostname"); err == nil && len(host) > 0 {
		if b, err := os.ReadFile(m.path("d/etc/hostname")); err == nil && bytes.Equal(b, host) {
			t.Errorf("read the host's /etc/hostname through the mount")
		}
	}
}

// TestBackingSymlinkRace swaps a directory d of the workspace with a
// symlink to a directory outside (RENAME_EXCHANGE, so d always exists)
// while workers read, stat, list, create, rename and unlink through a
// descriptor of d held open in the mount. Bounded by iterations. Whatever
// interleaving happens, the outside directory must never be read (its
// marker content never reaches a worker) nor changed.
func TestBackingSymlinkRace(t *testing.T) {
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "f"), []byte("OUTSIDE\n"), 0o644)
	os.WriteFile(filepath.Join(out, "only-outside"), []byte("OUTSIDE\n"), 0o644)
	m := newMount(t, map[string]string{"d/f": "inside\n"}, noWatch)
	if err := os.Symlink(out, m.backing("d.alt")); err != nil {
		t.Fatal(err)
	}
	dfd := openPath(t, unix.AT_FDCWD, m.path("d"))
	if b, err := readAt(dfd, "f"); err != nil || string(b) != "inside\n" {
		t.Fatalf("before the race: f = %q, %v", b, err)
	}
	before := snapshot(t, out)

	const workers, iterations = 2, 150
	var (
		wg       sync.WaitGroup
		done     = make(chan struct{})
		escapeMu sync.Mutex
		escapes  []string
	)
	escape := func(format string, args ...any) {
		escapeMu.Lock()
		escapes = append(escapes, fmt.Sprintf(format, args...))
		escapeMu.Unlock()
	}
	// The swapper does a burst of swaps per worker iteration (progress),
	// so the swaps spread over the whole run whatever the speed of either.
	swaps := 0
	swapDone := make(chan struct{})
	progress := make(chan struct{}, 1)
	go func() {
		defer close(swapDone)
		for swaps < 20*workers*iterations {
			for k := 0; k < 20; k++ {
				if err := swap(m.backing("d"), m.backing("d.alt")); err != nil {
					escape("swap: %v", err)
					return
				}
				swaps++
			}
			select {
			case <-progress:
			case <-done:
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < iterations; i++ {
				if b, err := readAt(dfd, "f"); err == nil && bytes.Contains(b, []byte("OUTSIDE")) {
					escape("read the outside f")
				}
				if x, err := forceStat(dfd, "only-outside"); err == nil {
					escape("stat found only-outside (size %d)", x.Size)
				}
				if names, err := listAt(dfd, "."); err == nil {
					for _, n := range names {
						if n == "only-outside" {
							escape("readdir listed only-outside")
						}
					}
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				if err := writeAt(dfd, name, "worker\n"); err == nil {
					unix.Renameat(dfd, name, dfd, name+".moved")
					unix.Unlinkat(dfd, name+".moved", 0)
				}
				unix.Mkdirat(dfd, name+".dir", 0o755)
				unix.Unlinkat(dfd, name+".dir", unix.AT_REMOVEDIR)
				unix.Fchmodat(dfd, "f", 0o644, 0)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}(w)
	}
	wg.Wait()
	close(done)
	<-swapDone
	t.Logf("%d swaps during %d worker iterations", swaps, workers*iterations)
	for _, e := range escapes {
		t.Error(e)
	}
	sameSnapshot(t, out, before)
}

// swap exchanges the names a and b: atomically with RENAME_EXCHANGE, or
// with three renames where the backing filesystem lacks it (EINVAL).
func swap(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	if err := os.Rename(a, a+".swap"); err != nil {
		return err
	}
	if err := os.Rename(b, a); err != nil {
		return err
	}
	return os.Rename(a+".swap", b)
}

// deepName is the i-th directory name of the deep chain: 200 bytes.
func deepName(i int) string { return fmt.Sprintf("deep%03d-", i) + strings.Repeat("x", 192) }

// TestBackingDeepPaths builds, through the mount, a directory chain whose
// workspace-relative path exceeds PATH_MAX (4096 bytes), walking with
// descriptors (the kernel takes short relative names), and then works at
// that depth: create, write, read, stat, rename, link, unlink, truncate,
// chmod, setxattr, symlink, readlink, mkdir and readdir. Each result is
// compared with the backing directory, walked the same way. A loopback
// that builds absolute backing paths fails here with ENAMETOOLONG.
func TestBackingDeepPaths(t *testing.T) {
	m := newMount(t, nil, nil)
	const depth = 24 // 24 * 201 bytes > 4096
	mfd := openPath(t, unix.AT_FDCWD, m.mnt)
	bfd := openPath(t, unix.AT_FDCWD, m.ws)
	relLen := 0
	for i := 0; i < depth; i++ {
		name := deepName(i)
		if err := unix.Mkdirat(mfd, name, 0o755); err != nil {
			t.Fatalf("mkdir at depth %d (relative path %d bytes): %v", i, relLen+len(name), err)
		}
		mfd = openPath(t, mfd, name)
		bfd = openPath(t, bfd, name)
		relLen += len(name) + 1
	}
	if relLen <= unix.PathMax {
		t.Fatalf("the chain is only %d bytes deep", relLen)
	}
	const content = "deep content\n"
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s at %d bytes deep: %v", what, relLen, err)
		}
	}
	step("create", writeAt(mfd, "file", content))
	b, err := readAt(mfd, "file")
	step("read", err)
	if string(b) != content {
		t.Fatalf("read %q through the mount, want %q", b, content)
	}
	b, err = readAt(bfd, "file")
	step("read backing", err)
	if string(b) != content {
		t.Fatalf("backing has %q, want %q", b, content)
	}
	var ms, bs unix.Stat_t
	step("stat", unix.Fstatat(mfd, "file", &ms, unix.AT_SYMLINK_NOFOLLOW))
	step("stat backing", unix.Fstatat(bfd, "file", &bs, unix.AT_SYMLINK_NOFOLLOW))
	if ms.Ino != bs.Ino || ms.Size != bs.Size || ms.Mode != bs.Mode {
		t.Errorf("stat through the mount %+v differs from backing %+v", ms, bs)
	}
	x, err := forceStat(mfd, "file")
	step("getattr", err)
	if x.Size != uint64(len(content)) {
		t.Errorf("getattr size %d, want %d", x.Size, len(content))
	}
	step("rename", unix.Renameat(mfd, "file", mfd, "renamed"))
	step("link", unix.Linkat(mfd, "renamed", mfd, "hardlink", 0))
	step("stat backing link", unix.Fstatat(bfd, "hardlink", &bs, unix.AT_SYMLINK_NOFOLLOW))
	if bs.Nlink != 2 || bs.Ino != ms.Ino {
		t.Errorf("backing hardlink: nlink %d ino %d, want 2 and %d", bs.Nlink, bs.Ino, ms.Ino)
	}
	step("unlink", unix.Unlinkat(mfd, "hardlink", 0))
	step("truncate", unix.Truncate(fmt.Sprintf("/proc/self/fd/%d/renamed", mfd), 4))
	step("chmod", unix.Fchmodat(mfd, "renamed", 0o600, 0))
	step("stat backing", unix.Fstatat(bfd, "renamed", &bs, unix.AT_SYMLINK_NOFOLLOW))
	if bs.Size != 4 || bs.Mode&0o777 != 0o600 || bs.Nlink != 1 {
		t.Errorf("backing after truncate and chmod: size %d mode %o nlink %d, want 4, 600, 1", bs.Size, bs.Mode&0o777, bs.Nlink)
	}
	// xattrs: compare with what the backing filesystem does itself.
	bx := unix.Lsetxattr(fmt.Sprintf("/proc/self/fd/%d/renamed", bfd), "user.backing", []byte("b"), 0)
	mx := unix.Lsetxattr(fmt.Sprintf("/proc/self/fd/%d/renamed", mfd), "user.rubinofs", []byte("deep"), 0)
	if !errors.Is(mx, bx) && !(mx == nil && bx == nil) {
		t.Errorf("setxattr through the mount: %v, on the backing directory: %v", mx, bx)
	}
	if bx == nil {
		buf := make([]byte, 16)
		n, err := unix.Lgetxattr(fmt.Sprintf("/proc/self/fd/%d/renamed", bfd), "user.rubinofs", buf)
		step("getxattr backing", err)
		if string(buf[:n]) != "deep" {
			t.Errorf("backing xattr %q, want deep", buf[:n])
		}
		n, err = unix.Lgetxattr(fmt.Sprintf("/proc/self/fd/%d/renamed", mfd), "user.backing", buf)
		step("getxattr", err)
		if string(buf[:n]) != "b" {
			t.Errorf("xattr through the mount %q, want b", buf[:n])
		}
		step("removexattr", unix.Lremovexattr(fmt.Sprintf("/proc/self/fd/%d/renamed", mfd), "user.backing"))
	}
	step("symlink", unix.Symlinkat("renamed", mfd, "sym"))
	buf := make([]byte, 64)
	n, err := unix.Readlinkat(bfd, "sym", buf)
	step("readlink backing", err)
	if string(buf[:n]) != "renamed" {
		t.Errorf("backing symlink -> %q, want renamed", buf[:n])
	}
	n, err = unix.Readlinkat(mfd, "sym", buf)
	step("readlink", err)
	if string(buf[:n]) != "renamed" {
		t.Errorf("symlink through the mount -> %q, want renamed", buf[:n])
	}
	b, err = readAt(mfd, "sym")
	step("read through the symlink", err)
	if string(b) != content[:4] {
		t.Errorf("read through the symlink %q, want %q", b, content[:4])
	}
	step("mkdir", unix.Mkdirat(mfd, "sub", 0o755))
	step("mknod", unix.Mknodat(mfd, "fifo", unix.S_IFIFO|0o644, 0))
	mnames, err := listAt(mfd, ".")
	step("readdir", err)
	bnames, err := listAt(bfd, ".")
	step("readdir backing", err)
	if strings.Join(mnames, ",") != strings.Join(bnames, ",") || len(mnames) != 4 {
		t.Errorf("readdir through the mount %v, backing %v", mnames, bnames)
	}
	var sf unix.Statfs_t
	step("statfs", unix.Fstatfs(mfd, &sf))
	// O_TMPFILE (FUSE_TMPFILE; kernels without it answer EOPNOTSUPP).
	if tfd, err := unix.Openat(mfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600); err == nil {
		_, werr := unix.Write(tfd, []byte(content))
		unix.Close(tfd)
		step("write a tmpfile", werr)
	} else if !errors.Is(err, unix.EOPNOTSUPP) {
		step("tmpfile", err)
	}
	step("rmdir", unix.Unlinkat(mfd, "sub", unix.AT_REMOVEDIR))
	step("unlink fifo", unix.Unlinkat(mfd, "fifo", 0))
	if err := unix.Fstatat(bfd, "sub", &bs, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.ENOENT) {
		t.Errorf("backing sub after rmdir: %v, want ENOENT", err)
	}
}

// TestBackingSymlinkInside: a symlink inside the workspace is given to the
// kernel as a symlink, never followed by the daemon. readlink through the
// mount equals the backing one, lstat says S_IFLNK, O_NOFOLLOW refuses it
// (ELOOP), and following it (the kernel's job) lands on the mount's own
// target node.
func TestBackingSymlinkInside(t *testing.T) {
	m := newMount(t, map[string]string{"dir/target.txt": "hello\n"}, func(c *daemon.Config) { c.Mode = guard.ModeEnforce })
	if err := os.Symlink("dir/target.txt", m.backing("blink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target.txt", m.path("dir/mlink")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ rel, want string }{{"blink", "dir/target.txt"}, {"dir/mlink", "target.txt"}} {
		got, err := os.Readlink(m.path(c.rel))
		if err != nil || got != c.want {
			t.Errorf("readlink %s through the mount = %q, %v; want %q", c.rel, got, err, c.want)
		}
		if b, err := os.Readlink(m.backing(c.rel)); err != nil || b != got {
			t.Errorf("readlink %s in the backing directory = %q, %v; through the mount %q", c.rel, b, err, got)
		}
		fi, err := os.Lstat(m.path(c.rel))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("lstat %s through the mount: %v, %v; want a symlink", c.rel, fi, err)
		}
		if _, err := unix.Open(m.path(c.rel), unix.O_RDONLY|unix.O_NOFOLLOW, 0); !errors.Is(err, unix.ELOOP) {
			t.Errorf("open %s O_NOFOLLOW: %v, want ELOOP", c.rel, err)
		}
		out := m.mustSh("cat " + shq(c.rel))
		if out != "hello\n" {
			t.Errorf("cat %s = %q, want hello", c.rel, out)
		}
		var st, target syscall.Stat_t
		if err := syscall.Stat(m.path(c.rel), &st); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(m.path("dir/target.txt"), &target); err != nil {
			t.Fatal(err)
		}
		if st.Ino != target.Ino || st.Dev != target.Dev {
			t.Errorf("%s follows to ino %d dev %d, want the mount's target.txt %d %d", c.rel, st.Ino, st.Dev, target.Ino, target.Dev)
		}
	}
	// A symlink's own mode cannot be changed (Linux: EOPNOTSUPP for
	// fchmodat AT_SYMLINK_NOFOLLOW); chown of the link itself works.
	if err := unix.Lchown(m.path("blink"), 0, 0); err != nil {
		t.Errorf("lchown of a symlink: %v", err)
	}
}
