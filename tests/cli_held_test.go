package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// heldRoot is the root of a FUSE file system that serves as a stuck
// rubinofs daemon would: its .rubino directory answers, and a LOOKUP of
// .rubino/status (or, with statfs, every STATFS) is read and then held
// until release is closed (got is signalled when one arrives).
type heldRoot struct {
	fs.Inode
	statfs  bool
	got     chan struct{}
	release chan struct{}
	once    sync.Once
}

// free releases what is held, now and later. Idempotent.
func (r *heldRoot) free() { r.once.Do(func() { close(r.release) }) }

// hold signals got and waits for release.
func (r *heldRoot) hold() {
	select {
	case r.got <- struct{}{}:
	default:
	}
	<-r.release
}

// Statfs holds the request when r.statfs, else answers zeros.
func (r *heldRoot) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if r.statfs {
		r.hold()
	}
	return 0
}

// heldCtl is heldRoot's .rubino directory.
type heldCtl struct {
	fs.Inode
	root *heldRoot
}

var (
	_ fs.NodeLookuper = (*heldRoot)(nil)
	_ fs.NodeStatfser = (*heldRoot)(nil)
	_ fs.NodeLookuper = (*heldCtl)(nil)
)

// Lookup answers .rubino with a directory and every other name ENOENT.
func (r *heldRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name != ".rubino" {
		return nil, syscall.ENOENT
	}
	return r.NewInode(ctx, &heldCtl{root: r}, fs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

// Lookup holds a LOOKUP of status until the test releases it.
func (c *heldCtl) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name == "status" && !c.root.statfs {
		c.root.hold()
	}
	return nil, syscall.ENOENT
}

// TestCLIHeldRequest: when the mount's daemon has read the command's
// probe of the control tree and never answers it (a daemon stopped in the
// middle of a request, or stuck in one), the command still returns by
// itself, with exit status 1 and what to do. The probe's FUSE request is
// made by a child process: a request the daemon has read is waited for
// uninterruptibly, and a process with a thread in that wait cannot exit.
// The command used to print its message after 10 s and then never exit.
func TestCLIHeldRequest(t *testing.T) {
	mnt, root := mountHeld(t, false, "held")
	out, err := runHeld(t, root, "status", mnt)
	if code := exitCode(err); code != 1 || !strings.Contains(out, "has not answered") || !strings.Contains(out, "rubinofs unmount --lazy "+mnt) {
		t.Fatalf("rubinofs status with its request held: exit %d\n%s\nwant exit 1 naming the daemon that does not answer and the lazy unmount", code, out)
	}
	if !probeRunning(filepath.Join(mnt, ".rubino", "status")) {
		t.Errorf("no probe child holds the request: the command made it itself")
	}
}

// TestUnmountHeldRequest: `rubinofs unmount --lazy`, the way out the
// commands name for a daemon that does not answer, detaches a mount whose
// server reads its probe (a statfs of the mountpoint) and never answers,
// and exits. It used to detach the mount and then never exit: the probe
// was the command's own request.
func TestUnmountHeldRequest(t *testing.T) {
	mnt, root := mountHeld(t, true, "heldfs")
	out, err := runHeld(t, root, "unmount", "--lazy", mnt)
	if code := exitCode(err); code != 0 || !strings.Contains(out, "detached "+mnt+" lazily") {
		t.Fatalf("rubinofs unmount --lazy with its probe held: exit %d\n%s\nwant exit 0, detached lazily", code, out)
	}
	if mounted(t, mnt) {
		t.Errorf("%s is still mounted", mnt)
	}
}

// runHeld runs the CLI with args, waits for its probe to reach root's
// file system and be held there, then for the command to exit, and
// returns its combined output and Wait's error. It fails the test when
// the probe never arrives, or when the command does not exit while the
// request is held (then, as a failsafe, the request is released first so
// that the command can end).
func runHeld(t *testing.T, root *heldRoot, args ...string) (string, error) {
	t.Helper()
	var b bytes.Buffer
	cmd := exec.Command(rubinofsBin(t), args...)
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-root.got:
	case err := <-done:
		t.Fatalf("rubinofs %v ended before its probe reached the file system: %v\n%s", args, err, b.String())
	case <-time.After(cliFailsafe): // failsafe
		cmd.Process.Kill()
		t.Fatalf("the probe of rubinofs %v never reached the file system\n%s", args, b.String())
	}
	select {
	case err := <-done:
		return b.String(), err
	case <-time.After(cliFailsafe): // failsafe: it cannot exit while the request is held
		root.free()
		<-done
		t.Fatalf("rubinofs %v did not exit while the file system held its request\n%s", args, b.String())
	}
	return "", nil
}

// mountHeld mounts a heldRoot (holding STATFS when statfs, else the
// LOOKUP of .rubino/status) at a new directory name under the test's
// temporary directory, and returns the mountpoint and the root. Cleanup
// releases what is held, waits for the probe child holding it to end, and
// unmounts (when the test has not detached it).
func mountHeld(t *testing.T, statfs bool, name string) (string, *heldRoot) {
	t.Helper()
	requireFuse(t)
	mnt := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	root := &heldRoot{statfs: statfs, got: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := fs.Mount(mnt, root, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: os.Geteuid() == 0, Name: "heldtest", FsName: "heldtest"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		root.free()
		// The probe child, killed, ends once its request is answered.
		held := filepath.Join(mnt, ".rubino", "status")
		if statfs {
			held = mnt
		}
		waitFor(t, "the probe child to end", func() bool { return !probeRunning(held) })
		if mounted(t, mnt) {
			if err := srv.Unmount(); err != nil {
				t.Errorf("unmounting the held file system: %v", err)
			}
		}
		srv.Wait()
	})
	return mnt, root
}

// mounted reports whether mnt is a mountpoint in this mount namespace.
func mounted(t *testing.T, mnt string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			return true
		}
	}
	return false
}

// probeRunning reports whether a process whose command line ends with
// the argument path (the CLI's probe child of that path) is alive.
func probeRunning(path string) bool {
	want := append([]byte(path), 0)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasSuffix(b, want) {
			continue
		}
		if st, ok := procState(filepath.Join("/proc", e.Name(), "stat")); ok && st != 'Z' && st != 'X' {
			return true
		}
	}
	return false
}
