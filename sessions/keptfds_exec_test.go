package sessions

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// flushRoot is a one-file FUSE tree ("f") whose FLUSH blocks until release
// is closed, reporting on flushing when it starts.
type flushRoot struct {
	fs.Inode
	release  chan struct{}
	flushing chan struct{}
}

type flushFile struct {
	fs.Inode
	r *flushRoot
}

type flushHandle struct{ r *flushRoot }

func (r *flushRoot) OnAdd(ctx context.Context) {
	r.AddChild("f", r.NewPersistentInode(ctx, &flushFile{r: r}, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

func (f *flushFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = 0o644
	return 0
}

func (f *flushFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &flushHandle{r: f.r}, fuse.FOPEN_DIRECT_IO, 0
}

func (h *flushHandle) Flush(ctx context.Context) syscall.Errno {
	select {
	case h.r.flushing <- struct{}{}:
	default:
	}
	select {
	case <-h.r.release:
	case <-ctx.Done():
	}
	return 0
}

// TestKeptCommDuringExec checks on the running kernel what ReadFacts and
// Resolve rely on to check kept answers inline, without procfs.Bounded: a
// pread of a kept /proc/<pid>/comm descriptor answers while that process is
// inside execve, blocked in the FLUSH of a close-on-exec descriptor on a
// FUSE mount (holding its exec locks), the state in which its stat does
// not answer (docs/DESIGN.md#kept-proc-fds). A hang is caught by a
// liveness deadline, and the FLUSH is then released so nothing stays
// stuck.
func TestKeptCommDuringExec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts FUSE with mount(2): root only")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3 to exec with a close-on-exec descriptor")
	}
	mnt := t.TempDir()
	r := &flushRoot{release: make(chan struct{}), flushing: make(chan struct{}, 1)}
	srv, err := fs.Mount(mnt, r, &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true, Name: "keptcomm"}})
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	released := false
	releaseFlush := func() {
		if !released {
			released = true
			close(r.release)
		}
	}
	t.Cleanup(func() { releaseFlush(); srv.Unmount() })

	// python3 opens f close-on-exec, says which process it is, then execs
	// sleep: the exec's do_close_on_exec sends FLUSH, which blocks. The pid
	// comes from python itself, since python3 on PATH may be a wrapper (a
	// pyenv shim is a bash script) that has not exec'd python yet.
	cmd := exec.Command("python3", "-c", "import os, sys; os.open(sys.argv[1], os.O_RDONLY|os.O_CLOEXEC); print(os.getpid(), flush=True); sys.stdin.read(1); os.execv('/bin/sleep', ['sleep', '0'])",
		filepath.Join(mnt, "f"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseFlush(); cmd.Process.Kill(); cmd.Wait() })
	var pid uint32
	if _, err := fmt.Fscan(stdout, &pid); err != nil {
		t.Fatalf("python3 did not say its pid: %v", err)
	}

	// Keep the facts while the process runs python, as a read-only open of
	// it would.
	before := ReadFacts(pid)
	if !before.Known || !strings.HasPrefix(before.Comm, "python") {
		t.Fatalf("facts before the exec: %+v", before)
	}
	if _, ok := keptFacts(pid); !ok {
		t.Fatal("facts not kept after ReadFacts")
	}
	stdin.Write([]byte("x"))
	select {
	case <-r.flushing:
	case <-time.After(20 * time.Second):
		t.Fatal("the exec sent no FLUSH")
	}
	f := within(t, "the kept comm read of a process in execve", func() ProcFacts {
		f, _ := keptFacts(pid)
		return f
	})
	if f != before {
		t.Errorf("kept facts during the exec: %+v, want %+v", f, before)
	}
	if !within(t, "keptAlive of a process in execve", func() bool { return keptAlive(pid, before.Proc.Start) }) {
		t.Error("keptAlive during the exec: false")
	}
	releaseFlush()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the exec'd process: %v", err)
	}
	// After the exec the name changed: the kept facts no longer hold.
	if f, ok := keptFacts(pid); ok {
		t.Errorf("kept facts of an exited process: %+v", f)
	}
}
