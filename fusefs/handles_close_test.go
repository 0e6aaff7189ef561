package fusefs

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
)

// fdsInto lists this process's descriptors that point into dir.
func fdsInto(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (target == dir || strings.HasPrefix(target, dir+"/")) {
			out = append(out, e.Name()+" -> "+target)
		}
	}
	return out
}

// TestCloseClosesUnreleasedHandles: handles whose RELEASE (RELEASEDIR)
// never arrives, as when the mount is torn down right after the last close
// (the kernel sends RELEASE asynchronously), keep their backing
// descriptors until FS.Close, which closes every one of them: a read-only
// and a read-write open, a created file and a directory handle.
func TestCloseClosesUnreleasedHandles(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "dir/f"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			f.Close()
		}
	})
	sec := time.Second
	raw := fs.NewNodeFS(f.Root(), &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec})
	raw.Init(nil)
	cancel := make(chan struct{})
	var dir, file fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, "dir", &dir); !st.Ok() {
		t.Fatalf("lookup dir: %v", st)
	}
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: dir.NodeId}, "f", &file); !st.Ok() {
		t.Fatalf("lookup dir/f: %v", st)
	}
	for _, flags := range []uint32{syscall.O_RDONLY, syscall.O_RDWR} {
		var oo fuse.OpenOut
		if st := raw.Open(cancel, &fuse.OpenIn{InHeader: hdr(file.NodeId), Flags: flags}, &oo); !st.Ok() {
			t.Fatalf("open dir/f (flags %#x): %v", flags, st)
		}
	}
	var co fuse.CreateOut
	if st := raw.Create(cancel, &fuse.CreateIn{InHeader: hdr(dir.NodeId), Flags: syscall.O_WRONLY, Mode: 0o644}, "new", &co); !st.Ok() {
		t.Fatalf("create dir/new: %v", st)
	}
	var od fuse.OpenOut
	if st := raw.OpenDir(cancel, &fuse.OpenIn{InHeader: hdr(dir.NodeId)}, &od); !st.Ok() {
		t.Fatalf("opendir dir: %v", st)
	}
	if open := fdsInto(t, ws); len(open) < 4 {
		t.Fatalf("descriptors into the workspace with 4 handles open: %v", open)
	}
	f.Close()
	closed = true
	if left := fdsInto(t, ws); len(left) > 0 {
		t.Fatalf("descriptors left open after FS.Close: %v", left)
	}
}
