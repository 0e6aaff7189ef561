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
// .rubino/status is read and then held until release is closed (got is
// signalled when one arrives).
type heldRoot struct {
	fs.Inode
	got     chan struct{}
	release chan struct{}
}

// heldCtl is heldRoot's .rubino directory.
type heldCtl struct {
	fs.Inode
	root *heldRoot
}

var (
	_ fs.NodeLookuper = (*heldRoot)(nil)
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
	if name == "status" {
		select {
		case c.root.got <- struct{}{}:
		default:
		}
		<-c.root.release
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
	requireFuse(t)
	bin := rubinofsBin(t)
	mnt := filepath.Join(t.TempDir(), "held")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	root := &heldRoot{got: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := fs.Mount(mnt, root, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: os.Geteuid() == 0, Name: "heldtest", FsName: "heldtest"}})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { close(root.release) }) }
	t.Cleanup(func() {
		release()
		// The probe child, killed, ends once its request is answered.
		waitFor(t, "the probe child to end", func() bool { return !probeRunning(mnt) })
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmounting the held file system: %v", err)
		}
	})

	var b bytes.Buffer
	cmd := exec.Command(bin, "status", mnt)
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-root.got:
	case err := <-done:
		t.Fatalf("rubinofs status ended before its probe reached the file system: %v\n%s", err, b.String())
	case <-time.After(cliFailsafe): // failsafe
		cmd.Process.Kill()
		t.Fatalf("the probe never reached the file system\n%s", b.String())
	}
	select {
	case err = <-done:
	case <-time.After(cliFailsafe): // failsafe: it cannot exit while the request is held
		release()
		<-done
		t.Fatalf("rubinofs status did not exit while the file system held its request\n%s", b.String())
	}
	out := b.String()
	if code := exitCode(err); code != 1 || !strings.Contains(out, "has not answered") || !strings.Contains(out, "rubinofs unmount --lazy "+mnt) {
		t.Fatalf("rubinofs status with its request held: exit %d\n%s\nwant exit 1 naming the daemon that does not answer and the lazy unmount", code, out)
	}
	if !probeRunning(mnt) {
		t.Errorf("no probe child holds the request: the command made it itself")
	}
}

// probeRunning reports whether a process whose command line names the
// control tree's status file below mnt (the CLI's probe child) is alive.
func probeRunning(mnt string) bool {
	want := []byte(filepath.Join(mnt, ".rubino", "status"))
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, want) {
			continue
		}
		if st, ok := procState(filepath.Join("/proc", e.Name(), "stat")); ok && st != 'Z' && st != 'X' {
			return true
		}
	}
	return false
}
