package fusefs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// mutFS builds a FS over a temp workspace holding files, with the guard
// enforcing; requests from a plain context are sessions.Default's.
func mutFS(t *testing.T, files map[string]string) (*FS, string) {
	t.Helper()
	ws := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, ws
}

// TestMutateOrder checks FS.mutate's sequence on a truncate by path
// (docs/DESIGN.md#mutation-path): a refusal runs nothing and notes
// nothing; an allowed change runs once under the identity lock and is
// noted after it; a failed backing operation is not noted; a name that is
// not a guarded file is run without asking.
func TestMutateOrder(t *testing.T) {
	f, ws := mutFS(t, map[string]string{"f": "x\n"})
	g := f.Guard()
	var st syscall.Stat_t
	if errno := f.bk.lstatRel("f", &st); errno != 0 {
		t.Fatal(errno)
	}
	id := guard.StatOf(&st).ID
	ran := 0
	trunc := func(errno syscall.Errno) mutation {
		return mutation{
			subject: subject{names: []mutName{{rel: "f", change: rewritten}}},
			asks:    []ask{{0, guard.OpTruncate}},
			run: func([]dirFd) syscall.Errno {
				ran++
				// The identity is locked while the operation runs.
				locked := make(chan struct{})
				go func() { g.Lock(id)(); close(locked) }()
				select {
				case <-locked:
					t.Error("the identity lock is not held during the backing operation")
				case <-time.After(20 * time.Millisecond):
				}
				return errno
			},
		}
	}
	ctx := context.Background()
	if errno := f.mutate(ctx, trunc(0)); errno != syscall.EACCES {
		t.Fatalf("unread file: %v, want EACCES", errno)
	}
	if ran != 0 || g.LastMutation(id).Seq != 0 {
		t.Fatalf("a refused mutation ran %d times, last mutation %+v", ran, g.LastMutation(id))
	}
	if err := g.NoteRead(sessions.Default, f.target("f", &st)); err != nil {
		t.Fatal(err)
	}
	if errno := f.mutate(ctx, trunc(syscall.EIO)); errno != syscall.EIO || ran != 1 {
		t.Fatalf("failing operation: %v after %d runs, want EIO after 1", errno, ran)
	}
	if m := g.LastMutation(id); m.Seq != 0 {
		t.Fatalf("a failed operation was noted: %+v", m)
	}
	if errno := f.mutate(ctx, trunc(0)); errno != 0 || ran != 2 {
		t.Fatalf("read file: %v after %d runs, want 0 after 2", errno, ran)
	}
	if m := g.LastMutation(id); m.Seq != 1 || m.Session != sessions.Default {
		t.Fatalf("last mutation %+v, want seq 1 by %s", m, sessions.Default)
	}
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := mutation{
		subject: subject{names: []mutName{{rel: "d", change: unlinked}}},
		asks:    []ask{{0, guard.OpUnlink}},
		run:     func([]dirFd) syscall.Errno { ran++; return 0 },
	}
	if errno := f.mutate(ctx, dir); errno != 0 || ran != 3 {
		t.Fatalf("directory: %v after %d runs, want 0 after 3", errno, ran)
	}
}

// TestMutateThenBeforeDone checks the pipeline's last steps
// (docs/DESIGN.md#mutation-path): a truncated name's then runs after the
// backing operation and before the guard is told, the sequence the guard
// gave the change is returned, and the session is credited with what
// the truncate left, so its next truncate passes without another read.
func TestMutateThenBeforeDone(t *testing.T) {
	f, ws := mutFS(t, map[string]string{"f": "x\n"})
	g := f.Guard()
	var st syscall.Stat_t
	if errno := f.bk.lstatRel("f", &st); errno != 0 {
		t.Fatal(errno)
	}
	id := guard.StatOf(&st).ID
	if err := g.NoteRead(sessions.Default, f.target("f", &st)); err != nil {
		t.Fatal(err)
	}
	trunc := func(then func(guardedChild)) mutation {
		return mutation{
			subject: subject{names: []mutName{{rel: "f", change: truncated}}},
			asks:    []ask{{0, guard.OpTruncate}},
			run: func([]dirFd) syscall.Errno {
				return syscall.Errno(errnoOrZero(os.Truncate(filepath.Join(ws, "f"), 0)))
			},
			then: then,
		}
	}
	thenRan := false
	seq, errno := trunc(func(g0 guardedChild) {
		thenRan = true
		if !g0.ok || g0.id != id {
			t.Errorf("then got %+v, want the locked file", g0)
		}
		if m := g.LastMutation(id); m.Seq != 0 {
			t.Errorf("the guard was told before then: %+v", m)
		}
		if !f.flux.in(id) {
			t.Error("a truncated file is not in flux before the guard is told")
		}
	}).apply(context.Background(), f)
	if errno != 0 || !thenRan || seq != 1 {
		t.Fatalf("truncate: errno %v, then ran %v, seq %d; want 0, true, 1", errno, thenRan, seq)
	}
	if f.flux.in(id) {
		t.Error("the flux outlived the mutation")
	}
	// An outside change report ends the own-write exemption: the hash
	// decides, and only a credited record has the truncated content's.
	g.NoteMutation(id, sessions.External)
	if _, errno := trunc(nil).apply(context.Background(), f); errno != 0 {
		t.Fatalf("the session's second truncate: %v, want 0 (credited with the first)", errno)
	}
}
