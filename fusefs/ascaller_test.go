package fusefs

import (
	"errors"
	"github.com/rubinofs/rubinofs/internal/ascaller"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

// asCallerFS is an FS over a workspace of root's files: open (0644), secret
// (0600), grp (0640, group 100), locked/in (0644 in the 0700 directory
// locked) and the sticky 1777
// directory tmp holding root's file r.
func asCallerFS(t *testing.T) *FS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the checks take another uid's credentials")
	}
	ws := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(ws, "open"), []byte("o"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "secret"), []byte("s"), 0o600))
	must(os.Mkdir(filepath.Join(ws, "locked"), 0o700))
	must(os.WriteFile(filepath.Join(ws, "locked/in"), []byte("i"), 0o644))
	must(os.Mkdir(filepath.Join(ws, "tmp"), 0o777))
	must(syscall.Chmod(filepath.Join(ws, "tmp"), 0o1777)) // os.Chmod would want os.ModeSticky
	must(os.WriteFile(filepath.Join(ws, "tmp/r"), []byte("r"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "grp"), []byte("g"), 0o640))
	must(os.Chown(filepath.Join(ws, "grp"), 0, 100))
	must(os.Chmod(ws, 0o755))
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)})
	must(err)
	t.Cleanup(func() { f.Close() })
	return f
}

// TestAccessAs: the kernel's answer for uid 65534 and for root.
func TestAccessAs(t *testing.T) {
	f := asCallerFS(t)
	nobody, root := creds{Uid: 65534, Gid: 65534}, creds{}
	for _, c := range []struct {
		cr   creds
		rel  string
		mode uint32
		want error
	}{
		{nobody, "open", unix.R_OK, nil},
		{nobody, "open", unix.W_OK, syscall.EACCES},
		{nobody, "secret", unix.R_OK, syscall.EACCES},
		{nobody, "locked/in", unix.R_OK, syscall.EACCES}, // the directory is not searchable
		{nobody, "tmp", unix.W_OK | unix.X_OK, nil},
		{nobody, "missing", unix.R_OK, syscall.ENOENT},
		{root, "secret", unix.R_OK | unix.W_OK, nil},
		{root, "locked/in", unix.R_OK, nil},
		{creds{Uid: 65534, Gid: 65534, Groups: []uint32{100}}, "grp", unix.R_OK, nil}, // a supplementary group
		{nobody, "grp", unix.R_OK, syscall.EACCES},
	} {
		if err := accessAs(f, c.cr, c.rel, c.mode); !errors.Is(err, c.want) && err != c.want {
			t.Errorf("accessAs(%d, %s, %o) = %v, want %v", c.cr.Uid, c.rel, c.mode, err, c.want)
		}
	}
}

// TestAsCallerRestores: many concurrent checks leave every thread of the
// daemon with its own credentials (fs ids 0, its groups).
func TestAsCallerRestores(t *testing.T) {
	f := asCallerFS(t)
	groups, err := unix.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				accessAs(f, creds{Uid: 65534, Gid: 65534, Groups: []uint32{7, 8}}, "secret", unix.R_OK)
			}
		}()
	}
	wg.Wait()
	// Every thread the runtime now uses must be root's again: check on
	// many goroutines, each on some thread.
	var bad sync.Map
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
			gid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
			g, _ := unix.Getgroups()
			if uid != 0 || gid != 0 || len(g) != len(groups) {
				bad.Store(i, [3]any{uid, gid, g})
			}
			if err := unix.Access(filepath.Join(f.cfg.Workspace, "secret"), unix.R_OK); err != nil {
				bad.Store(i, err)
			}
		}()
	}
	wg.Wait()
	bad.Range(func(k, v any) bool {
		t.Errorf("goroutine %v ran on a thread with %v", k, v)
		return true
	})
}

// BenchmarkAccessAs: one as-caller check of a file one directory down, as
// uid 65534 (a thread switch, the walk and faccessat2).
func BenchmarkAccessAs(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	ws := b.TempDir()
	os.Mkdir(filepath.Join(ws, "d"), 0o755)
	os.WriteFile(filepath.Join(ws, "d/f"), []byte("x"), 0o644)
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cr := creds{Uid: 65534, Gid: 65534}
	b.Run("one", func(b *testing.B) {
		for range b.N {
			if err := accessAs(f, cr, "d/f", unix.R_OK); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch100", func(b *testing.B) {
		rels := make([]string, 100)
		for i := range rels {
			rels[i] = "d/f"
		}
		for range b.N {
			accessAll(f, cr, rels, unix.R_OK, func(int, error) {})
		}
	})
}

// creds, accessAs and accessAll are the as-caller checks over f's
// workspace (internal/ascaller), as the tests here name them.
type creds = ascaller.Creds

func accessAs(f *FS, cr creds, rel string, mode uint32) error {
	return ascaller.Access(journalMount{f}, cr, rel, mode)
}

func accessAll(f *FS, cr creds, rels []string, mode uint32, res func(i int, err error)) {
	ascaller.AccessAll(journalMount{f}, cr, rels, mode, res)
}
