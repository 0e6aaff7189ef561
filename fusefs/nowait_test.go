package fusefs

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// switchResolver answers the session stored in it, for every pid.
type switchResolver struct{ name atomic.Value }

func (r *switchResolver) Resolve(uint32) sessions.Session {
	return sessions.Session(r.name.Load().(string))
}

// TestRawUnknownCaller: a caller the resolver could not resolve in time
// (sessions.Unknown, docs/DESIGN.md#no-wait-on-caller) may read and
// create, but a guarded mutation is EAGAIN, even with unregistered callers
// allowed, and its read credits nobody: the session it really belongs to
// is still refused a blind overwrite afterwards.
func TestRawUnknownCaller(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := &switchResolver{}
	res.name.Store(sessions.Unknown)
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Sessions: res, AllowUnregistered: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sec := time.Second
	raw := fs.NewNodeFS(f.Root(), &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec})
	raw.Init(nil)
	cancel := make(chan struct{})
	var entry fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, "f", &entry); !st.Ok() {
		t.Fatalf("lookup: %v", st)
	}
	var oo fuse.OpenOut
	in := fuse.OpenIn{InHeader: hdr(entry.NodeId), Flags: syscall.O_RDONLY}
	if st := raw.Open(cancel, &in, &oo); !st.Ok() {
		t.Fatalf("read-only open by an unknown caller: %v", st)
	}
	buf := make([]byte, 64)
	if _, st := raw.Read(cancel, &fuse.ReadIn{InHeader: hdr(entry.NodeId), Fh: oo.Fh, Size: 64}, buf); !st.Ok() {
		t.Fatalf("read by an unknown caller: %v", st)
	}
	raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(entry.NodeId), Fh: oo.Fh})
	in = fuse.OpenIn{InHeader: hdr(entry.NodeId), Flags: syscall.O_WRONLY | syscall.O_TRUNC}
	if st := raw.Open(cancel, &in, &oo); st != fuse.Status(syscall.EAGAIN) {
		t.Fatalf("O_TRUNC open by an unknown caller: %v, want EAGAIN", st)
	}
	var co fuse.CreateOut
	cin := fuse.CreateIn{InHeader: hdr(1), Flags: syscall.O_WRONLY | syscall.O_CREAT, Mode: 0o644}
	if st := raw.Create(cancel, &cin, "new", &co); !st.Ok() {
		t.Fatalf("create by an unknown caller: %v", st)
	}
	raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(co.NodeId), Fh: co.Fh})
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "hello\n" {
		t.Fatalf("refused open changed the file: %q", b)
	}
	// The unknown caller's read was credited to no session.
	res.name.Store("a")
	if st := raw.Open(cancel, &in, &oo); st != fuse.Status(syscall.EACCES) {
		t.Fatalf("O_TRUNC open by session a after the unknown read: %v, want EACCES", st)
	}
}
