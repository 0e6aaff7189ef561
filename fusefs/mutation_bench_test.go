package fusefs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// BenchmarkMutateUnlink measures the daemon's cost of one guarded unlink
// by name (FS.mutate: lock, fresh stat, decision, pin, note) on a file
// the session wrote itself, as `git checkout -- .` after an edit: the
// backing operation is a no-op, so the figure is the guard's share.
func BenchmarkMutateUnlink(b *testing.B) {
	for _, mode := range []guard.Mode{guard.ModeOff, guard.ModeEnforce} {
		b.Run(mode.String(), func(b *testing.B) {
			ws := b.TempDir()
			dir := filepath.Join(ws, "a", "b")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "f.go"), []byte("package p\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: mode}),
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if t, err := f.LookupTarget("a/b/f.go"); err == nil {
				f.Guard().NoteWriteHashed(sessions.Default, t, guard.Hash{})
			}
			ctx := context.Background()
			m := mutation{
				subject: subject{names: []mutName{{rel: "a/b/f.go", change: unchanged, pin: true}}},
				asks:    []ask{{0, guard.OpUnlink}},
				run:     func([]dirFd) syscall.Errno { return 0 },
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if errno := f.mutate(ctx, m); errno != 0 {
					b.Fatal(errno)
				}
			}
		})
	}
}
