package fusefs

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// rawFS builds a FS over a temp workspace and returns go-fuse's raw file
// system for it, without mounting (fs.NewNodeFS): the FUSE protocol level,
// driven request by request.
func rawFS(t testing.TB, files map[string]string) (fuse.RawFileSystem, string) {
	t.Helper()
	return rawFSMode(t, files, guard.ModeEnforce)
}

// rawFSMode is rawFS with the guard in mode.
func rawFSMode(t testing.TB, files map[string]string, mode guard.Mode) (fuse.RawFileSystem, string) {
	t.Helper()
	return rawFSWith(t, files, mode, nil)
}

// workspaceWith makes a temporary workspace holding files (path:
// content, directories made as needed) and returns its path.
func workspaceWith(t testing.TB, files map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// plainFS is an FS over a workspace holding files, the guard in mode, no
// journal; closed when the test ends.
func plainFS(t testing.TB, files map[string]string, mode guard.Mode) (*FS, string) {
	t.Helper()
	ws := workspaceWith(t, files)
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: mode}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, ws
}

// rawFSWith is rawFSMode calling setup (when set) on the FS before the
// node tree is built.
func rawFSWith(t testing.TB, files map[string]string, mode guard.Mode, setup func(*FS)) (fuse.RawFileSystem, string) {
	t.Helper()
	f, ws := plainFS(t, files, mode)
	if setup != nil {
		setup(f)
	}
	sec := time.Second
	raw := fs.NewNodeFS(f.Root(), &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec})
	raw.Init(nil)
	return raw, ws
}

func hdr(node uint64) fuse.InHeader {
	return fuse.InHeader{NodeId: node, Caller: fuse.Caller{Owner: fuse.Owner{Uid: 0, Gid: 0}, Pid: uint32(os.Getpid())}}
}

// TestRawGuard drives the guard through FUSE requests: a truncating open of
// an unread file is EACCES with the file intact; after a read-only open and
// a READ, the same open succeeds.
func TestRawGuard(t *testing.T) {
	raw, ws := rawFS(t, map[string]string{"f": "hello\n"})
	cancel := make(chan struct{})
	var entry fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, "f", &entry); !st.Ok() {
		t.Fatalf("lookup: %v", st)
	}
	var oo fuse.OpenOut
	in := fuse.OpenIn{InHeader: hdr(entry.NodeId), Flags: syscall.O_WRONLY | syscall.O_TRUNC}
	if st := raw.Open(cancel, &in, &oo); st != fuse.Status(syscall.EACCES) {
		t.Fatalf("blind O_TRUNC open: %v, want EACCES", st)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "hello\n" {
		t.Fatalf("refused open changed the file: %q", b)
	}
	// A read-only open registers the read.
	in = fuse.OpenIn{InHeader: hdr(entry.NodeId), Flags: syscall.O_RDONLY}
	if st := raw.Open(cancel, &in, &oo); !st.Ok() {
		t.Fatalf("read-only open: %v", st)
	}
	raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(entry.NodeId), Fh: oo.Fh})
	in = fuse.OpenIn{InHeader: hdr(entry.NodeId), Flags: syscall.O_WRONLY | syscall.O_TRUNC}
	if st := raw.Open(cancel, &in, &oo); !st.Ok() {
		t.Fatalf("O_TRUNC open after a read: %v", st)
	}
	raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(entry.NodeId), Fh: oo.Fh})

	// The control tree is reachable and .rubino/status is read-only.
	var ctl, status fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, ctltree.DirName, &ctl); !st.Ok() {
		t.Fatalf("lookup .rubino: %v", st)
	}
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: ctl.NodeId}, "status", &status); !st.Ok() {
		t.Fatalf("lookup status: %v", st)
	}
	in = fuse.OpenIn{InHeader: hdr(status.NodeId), Flags: syscall.O_WRONLY}
	if st := raw.Open(cancel, &in, &oo); st != fuse.Status(syscall.EACCES) {
		t.Fatalf("writable open of status: %v, want EACCES", st)
	}
	if _, err := os.Stat(filepath.Join(ws, ctltree.DirName)); !os.IsNotExist(err) {
		t.Fatalf(".rubino was created in the workspace: %v", err)
	}
}
