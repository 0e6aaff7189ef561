package fusefs

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// backingFS builds a FS over a temp workspace holding dir/f, a symlink
// "up" to the workspace's parent, a symlink dir/link to "/" and a chain of
// directories whose relative path is longer than PATH_MAX.
func backingFS(t *testing.T) (*FS, string, string) {
	t.Helper()
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "dir"), 0o755)
	os.WriteFile(filepath.Join(ws, "dir/f"), []byte("inside\n"), 0o644)
	os.Symlink("..", filepath.Join(ws, "up"))
	os.Symlink("/", filepath.Join(ws, "dir/link"))
	f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// The deep chain, made with mkdirat relative to descriptors.
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < 24; i++ {
		name := strings.Repeat(string(rune('a'+i%26)), 200)
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		nfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = nfd
		names = append(names, name)
	}
	if err := unix.Mknodat(fd, "leaf", unix.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	return f, ws, strings.Join(names, "/")
}

// TestBackingWalk checks the one way to a backing file, with openat2 and
// with its fallback (one openat(O_NOFOLLOW) per name): a symlink on the
// way is never followed, a ".." cannot leave the root, and a path longer
// than PATH_MAX is walked in pieces.
func TestBackingWalk(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		name := "openat2"
		if fallback {
			name = "openat"
		}
		t.Run(name, func(t *testing.T) {
			if fallback {
				old := syscallcompat.NoOpenat2.Load()
				syscallcompat.NoOpenat2.Store(true)
				t.Cleanup(func() { syscallcompat.NoOpenat2.Store(old) })
			}
			f, _, deep := backingFS(t)
			var st syscall.Stat_t
			if errno := f.bk.lstatRel("dir/f", &st); errno != 0 || st.Size != 7 {
				t.Errorf("lstat dir/f: %v, size %d", errno, st.Size)
			}
			// A final symlink is stat'ed itself.
			if errno := f.bk.lstatRel("dir/link", &st); errno != 0 || st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				t.Errorf("lstat dir/link: %v, mode %o; want the symlink itself", errno, st.Mode)
			}
			// A symlink on the way is an error, never followed.
			for _, rel := range []string{"dir/link/etc/passwd", "up/" + filepath.Base(f.cfg.Workspace) + "/dir/f", "dir/link/tmp"} {
				errno := f.bk.lstatRel(rel, &st)
				if errno != syscall.ELOOP && errno != syscall.ENOTDIR {
					t.Errorf("lstat %s: %v, want ELOOP or ENOTDIR", rel, errno)
				}
			}
			if _, errno := f.bk.openDir("dir/../.."); errno != syscall.EXDEV {
				t.Errorf("openDir dir/../..: %v, want EXDEV", errno)
			}
			if len(deep) <= unix.PathMax {
				t.Fatalf("deep path only %d bytes", len(deep))
			}
			if errno := f.bk.lstatRel(deep+"/leaf", &st); errno != 0 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
				t.Errorf("lstat of a %d-byte path: %v", len(deep)+5, errno)
			}
			h, err := f.bk.openForHashAt("dir/f")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(h)
			h.Close()
			if string(b) != "inside\n" {
				t.Errorf("openForHashAt read %q", b)
			}
			if _, err := f.bk.openForHashAt("dir/link"); !errors.Is(err, syscall.ELOOP) {
				t.Errorf("openForHashAt of a symlink: %v, want ELOOP", err)
			}
			f.Close()
			if errno := f.bk.lstatRel("dir/f", &st); errno != syscall.EBADF {
				t.Errorf("lstat after Close: %v, want EBADF", errno)
			}
		})
	}
}
