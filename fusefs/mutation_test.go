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
			names: []mutName{{rel: "f", change: rewritten}},
			asks:  []ask{{0, guard.OpTruncate}},
			run: func() syscall.Errno {
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
		names: []mutName{{rel: "d", change: unlinked}},
		asks:  []ask{{0, guard.OpUnlink}},
		run:   func() syscall.Errno { ran++; return 0 },
	}
	if errno := f.mutate(ctx, dir); errno != 0 || ran != 3 {
		t.Fatalf("directory: %v after %d runs, want 0 after 3", errno, ran)
	}
}

// TestNoteChange checks what the guard is told for each change.
func TestNoteChange(t *testing.T) {
	f, _ := mutFS(t, nil)
	g := f.Guard()
	for i, c := range []struct {
		name   string
		ch     change
		nlink  uint64
		noted  bool // NoteMutation: the sequence grows
		forget bool // NoteLastNameGone without open handles: the identity is forgotten
	}{
		{"unchanged", unchanged, 1, false, false},
		{"rewritten", rewritten, 1, true, false},
		{"unlinked last", unlinked, 1, false, true},
		{"unlinked one of two", unlinked, 2, true, false},
		{"replaced last", replaced, 1, false, true},
		{"replaced one of two", replaced, 2, false, false},
	} {
		id := guard.FileID{Dev: 1, Ino: uint64(100 + i)}
		g.NoteMutation(id, "other") // seq 1
		f.noteChange(id, "s", c.ch, c.nlink)
		m := g.LastMutation(id)
		switch {
		case c.forget && m.Seq != 0:
			t.Errorf("%s: %+v, want the identity forgotten", c.name, m)
		case c.noted && (m.Seq != 2 || m.Session != "s"):
			t.Errorf("%s: %+v, want seq 2 by s", c.name, m)
		case !c.forget && !c.noted && (m.Seq != 1 || m.Session != "other"):
			t.Errorf("%s: %+v, want it untouched", c.name, m)
		}
	}
}
