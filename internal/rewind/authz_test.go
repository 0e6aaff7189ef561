package rewind

import (
	"os"
	"path"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/ascaller"
	"github.com/rubinofs/rubinofs/journal"
)

// dirMount is a Mount over a plain directory, walked from a descriptor
// of it opened by the test (as the mount's root descriptor is), for the
// checks that only walk and stat (Apply, LookupTarget and the rest are
// not called).
type dirMount struct {
	Mount
	root   string
	rootFd int
}

func (m dirMount) OpenParent(rel string) (int, string, func(), syscall.Errno) {
	if rel == "" {
		return m.rootFd, ".", func() {}, 0
	}
	dir, leaf := path.Split(rel)
	if dir == "" {
		return m.rootFd, leaf, func() {}, 0
	}
	fd, err := unix.Openat(m.rootFd, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, leaf, func() {}, err.(syscall.Errno)
	}
	return fd, leaf, func() { unix.Close(fd) }, 0
}

func (m dirMount) Lstat(rel string, st *syscall.Stat_t) syscall.Errno {
	if err := syscall.Lstat(filepath.Join(m.root, rel), st); err != nil {
		return err.(syscall.Errno)
	}
	return 0
}

// TestMayWriteEntry: the sticky rule: nobody may not remove root's tmp/r,
// though it may write tmp; nor write an entry in root's 0755 directory.
func TestMayWriteEntry(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the checks take another uid's credentials")
	}
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "tmp"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(filepath.Join(ws, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tmp/r", "secret"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	rootFd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rootFd)
	r := New(nil, dirMount{root: ws, rootFd: rootFd}, guard.New(guard.Config{}))
	checks := &asChecks{r: r, cr: ascaller.Creds{Uid: 65534, Gid: 65534}}
	defer checks.close()
	if err := checks.mayWriteEntry("tmp/r"); ctltree.ErrnoOf(err) != syscall.EACCES {
		t.Errorf("mayWriteEntry(nobody, tmp/r) = %v, want EACCES", err)
	}
	if err := checks.mayWriteEntry("tmp/new"); err != nil {
		t.Errorf("mayWriteEntry(nobody, tmp/new) = %v, want nil", err)
	}
	if err := checks.mayWriteEntry("secret"); ctltree.ErrnoOf(err) != syscall.EACCES {
		t.Errorf("mayWriteEntry(nobody, secret) = %v, want EACCES (root's 0755 workspace)", err)
	}
}

// The diff's inspector is a journal.ContentGate as Diff receives it.
var _ journal.ContentGate = gateInspector{}
