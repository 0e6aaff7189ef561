package fusefs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	rewindroom "github.com/rubinofs/rubinofs/internal/rewind"
	"github.com/rubinofs/rubinofs/journal"
)

// journalFS is a FS over a new workspace holding files, with the journal
// on in a new state directory; it returns the FS and the journal.
func journalFS(t testing.TB, mode guard.Mode, files map[string]string) (*FS, *journal.Journal, string) {
	t.Helper()
	ws := workspaceWith(t, files)
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: mode}), Journal: j,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); j.Close() })
	return f, j, ws
}

// changeRecords reads session's records without its after-notes.
func changeRecords(t testing.TB, j *journal.Journal, session string) []journal.Record {
	t.Helper()
	recs, err := j.Records(session)
	if err != nil {
		t.Fatal(err)
	}
	var out []journal.Record
	for _, r := range recs {
		if r.Op != journal.OpAfter {
			out = append(out, r)
		}
	}
	return out
}

// unlinkMutation is Node.Unlink's mutation of rel, run in ws.
func unlinkMutation(ws, rel string) mutation {
	return mutation{
		subject: subject{names: []mutName{{rel: rel, change: unlinked, pin: true}}},
		jop:     jUnlink,
		run:     func([]dirFd) syscall.Errno { return syscall.Errno(errnoOrZero(unix.Unlink(filepath.Join(ws, rel)))) },
	}
}

func errnoOrZero(err error) uintptr {
	if en, ok := err.(syscall.Errno); ok {
		return uintptr(en)
	}
	if err != nil {
		return uintptr(syscall.EIO)
	}
	return 0
}

// TestMutateJournalRecords: a journaled mutation is recorded for the
// caller's session with the name's pre-image before the backing operation
// (which then sees the record), whether or not the name is guarded;
// .git/ and .rubino paths are not journaled.
func TestMutateJournalRecords(t *testing.T) {
	for _, mode := range []guard.Mode{guard.ModeOff, guard.ModeEnforce} {
		t.Run(mode.String(), func(t *testing.T) {
			f, j, ws := journalFS(t, mode, map[string]string{"a/f": "content\n", ".git/index": "idx"})
			c := caller{session: "s1"}
			m := unlinkMutation(ws, "a/f")
			m.by = &c
			m.kind = rewind
			inner := m.run
			m.run = func(at []dirFd) syscall.Errno {
				recs := changeRecords(t, j, "s1")
				if len(recs) != 2 || recs[1].Op != jUnlink {
					t.Errorf("the record is not there before the backing operation: %+v", recs)
				}
				return inner(at)
			}
			if errno := f.mutate(context.Background(), m); errno != 0 {
				t.Fatal(errno)
			}
			recs := changeRecords(t, j, "s1")
			r := recs[1]
			if len(r.Pre) != 1 || r.Pre[0].Kind != journal.KindFile || r.Pre[0].Size != 8 || r.Pre[0].Blob == "" {
				t.Fatalf("record = %+v", r)
			}
			g := unlinkMutation(ws, ".git/index")
			g.by = &c
			if errno := f.mutate(context.Background(), g); errno != 0 {
				t.Fatal(errno)
			}
			if recs := changeRecords(t, j, "s1"); len(recs) != 2 {
				t.Fatalf(".git/index was journaled: %+v", recs[len(recs)-1])
			}
		})
	}
}

// TestMutateJournalFailureRefuses: when the record cannot be made durable
// (the journal is closed), the change is refused with EIO, the backing
// operation never runs, and the reason is in .rubino/errors.
func TestMutateJournalFailureRefuses(t *testing.T) {
	f, j, ws := journalFS(t, guard.ModeEnforce, map[string]string{"f": "x"})
	j.Close()
	c := caller{session: "s1"}
	m := unlinkMutation(ws, "f")
	m.by = &c
	ran := false
	m.run = func([]dirFd) syscall.Errno { ran = true; return 0 }
	if errno := f.mutate(context.Background(), m); errno != syscall.EIO {
		t.Fatalf("errno = %v, want EIO", errno)
	}
	if ran {
		t.Fatal("the backing operation ran without its record")
	}
	n := len(f.errs.Records(nil))
	if n != 1 {
		t.Fatalf("%d entries in .rubino/errors, want 1", n)
	}
}

// BenchmarkMutateJournal measures a fresh mutation (as mkdir or a create
// of a new name: no lock step) whose backing operation is a no-op, with
// the journal off and on: the journal's share (a record, fdatasync'ed,
// and an after-note) per change.
func BenchmarkMutateJournal(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			f, _, _ := journalFS(b, guard.ModeEnforce, map[string]string{"a/b/keep": ""})
			if !on {
				f.jh = nil
			}
			c := caller{session: "bench"}
			m := mutation{kind: fresh, subject: subject{names: []mutName{{rel: "a/b/new"}}}, jop: jMkdir, by: &c,
				run: func([]dirFd) syscall.Errno { return 0 }}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if errno := f.mutate(context.Background(), m); errno != 0 {
					b.Fatal(errno)
				}
			}
		})
	}
}

// TestRewindApplierSteps: each Applier step makes the workspace what the
// pre-image says and is journaled as the session's own change.
func TestRewindApplierSteps(t *testing.T) {
	f, j, ws := journalFS(t, guard.ModeEnforce, map[string]string{
		"edited": "new bytes\n", "created": "made by the session\n", "a": "A", "b": "B", "renamed-to": "R",
	})
	// The pre-image of "edited": its old bytes, mode 0755.
	old := filepath.Join(t.TempDir(), "old")
	if err := os.WriteFile(old, []byte("old bytes\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(old, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := j.Blobs().PutFromFd(fd, 10)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	a := rewindroom.NewApplier(f.RewindMount(), rewindroom.By{Session: "s1", Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	steps := []func() error{
		func() error {
			return a.Restore("edited", journal.PreImage{Kind: journal.KindFile, Mode: syscall.S_IFREG | 0o755, Size: 10, Blob: blob.Addr}, j.Blobs())
		},
		func() error { return a.Restore("created", journal.PreImage{Kind: journal.KindAbsent}, j.Blobs()) },
		func() error {
			return a.Restore("dir", journal.PreImage{Kind: journal.KindDir, Mode: syscall.S_IFDIR | 0o750}, j.Blobs())
		},
		func() error {
			return a.Restore("link", journal.PreImage{Kind: journal.KindSymlink, Target: "edited"}, j.Blobs())
		},
		func() error { return a.Exchange("a", "b") },
		func() error { return a.Rename("renamed-to", "renamed-from") },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	read := func(rel string) string { b, _ := os.ReadFile(filepath.Join(ws, rel)); return string(b) }
	if read("edited") != "old bytes\n" {
		t.Errorf("edited = %q", read("edited"))
	}
	if st, err := os.Stat(filepath.Join(ws, "edited")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("edited's mode: %v %v", st.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "created")); !os.IsNotExist(err) {
		t.Errorf("created still there: %v", err)
	}
	if st, err := os.Stat(filepath.Join(ws, "dir")); err != nil || !st.IsDir() || st.Mode().Perm() != 0o750 {
		t.Errorf("dir: %v %v", st, err)
	}
	if tgt, err := os.Readlink(filepath.Join(ws, "link")); err != nil || tgt != "edited" {
		t.Errorf("link: %q %v", tgt, err)
	}
	if read("a") != "B" || read("b") != "A" || read("renamed-from") != "R" {
		t.Errorf("a=%q b=%q renamed-from=%q", read("a"), read("b"), read("renamed-from"))
	}
	recs := changeRecords(t, j, "s1")
	var ops []string
	for _, r := range recs[1:] {
		ops = append(ops, r.Op+" "+r.Path)
	}
	want := []string{"write edited", "unlink created", "mkdir dir", "symlink link", "exchange a", "rename renamed-to"}
	if len(ops) != len(want) {
		t.Fatalf("journaled %q, want %q", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("journaled %q, want %q", ops, want)
		}
	}
	if got := a.Touched(); len(got) != 8 {
		t.Errorf("touched %q", got)
	}
}
