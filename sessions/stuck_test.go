package sessions

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// stuckFile replaces path with a FIFO nobody writes: opening it for reading
// blocks, as a /proc read of a task in execve does. Cleanup opens it for
// writing, so the readers left behind finish.
func stuckFile(t *testing.T, path string) {
	t.Helper()
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// O_RDWR on a FIFO never blocks; it releases the blocked opens.
		if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
			f.Close()
		}
	})
}

// within runs fn and fails the test if it has not returned after a
// generous liveness deadline (a hang, not a slow run: the bound under test
// is procfs.Bound, far below it).
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s hangs on a /proc read that does not answer", what)
		panic("unreachable")
	}
}

// TestResolveStuckProc: a caller whose /proc files do not answer (it is in
// execve) resolves within the bound: to its cached session while that is
// valid, else to Unknown; IsDescendant says no and Register says
// busy instead of hanging.
func TestResolveStuckProc(t *testing.T) {
	s := NewRegistry()
	s.procDir = fakeProc(t, map[uint32][2]uint64{100: {1, 50}, 200: {100, 60}, 300: {100, 70}})
	sess := &session{info: Info{Name: "a", RootPid: 100, RootStart: 50, Live: true}, stop: make(chan struct{})}
	s.byName["a"], s.byRoot[proc{100, 50}] = sess, sess
	s.count, s.gen = 1, 1
	if got := s.Resolve(200); got != "a" {
		t.Fatalf("child of the root: %q", got)
	}
	stuckFile(t, filepath.Join(s.procDir, "200", "stat"))
	stuckFile(t, filepath.Join(s.procDir, "300", "stat"))
	if got := within(t, "Resolve (cached)", func() Session { return s.Resolve(200) }); got != "a" {
		t.Errorf("stuck thread with a valid cache entry: %q, want a", got)
	}
	if got := within(t, "Resolve (uncached)", func() Session { return s.Resolve(300) }); got != Unknown {
		t.Errorf("stuck thread without a cache entry: %q, want %q", got, Unknown)
	}
	// A new generation (a session registered or ended) invalidates the
	// cached entry: it may name an ended session or miss a new one.
	s.mu.Lock()
	s.gen++
	s.mu.Unlock()
	if got := within(t, "Resolve (stale cache)", func() Session { return s.Resolve(200) }); got != Unknown {
		t.Errorf("stuck thread with a cache entry of another generation: %q, want %q", got, Unknown)
	}
	if within(t, "IsDescendant", func() bool { return s.IsDescendant(300, 100) }) {
		t.Error("IsDescendant of a stuck process: true")
	}
	// Register needs a live pid for its pidfd: this test's own, whose stat
	// in the fake tree does not answer.
	self := uint32(os.Getpid())
	os.MkdirAll(filepath.Join(s.procDir, strconv.Itoa(int(self))), 0o755)
	stuckFile(t, filepath.Join(s.procDir, strconv.Itoa(int(self)), "stat"))
	if err := within(t, "Register", func() error { return s.Register("b", self, "x") }); !errors.Is(err, ErrProcessBusy) {
		t.Errorf("Register of a stuck process: %v, want ErrProcessBusy", err)
	}
	err := within(t, "ReadProc", func() error {
		_, err := procfs.ReadFile(filepath.Join(s.procDir, "300", "stat"))
		return err
	})
	if !errors.Is(err, procfs.ErrSlow) {
		t.Errorf("ReadProc of a file that does not answer: %v, want procfs.ErrSlow", err)
	}
}
