package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/config"
)

// TestStartFailureReleasesState: a Start that fails after taking the state
// directory's lock (here at the watcher, on a malformed --watch-skip glob)
// releases everything it acquired, so the next mount may take the lock.
func TestStartFailureReleasesState(t *testing.T) {
	old := syscall.Umask(0o022) // reads the umask; put back at once
	syscall.Umask(old)
	t.Cleanup(func() { syscall.Umask(old) }) // Start sets the daemon's umask 0
	dir := t.TempDir()
	ws, mnt, state := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt"), filepath.Join(dir, "state")
	for _, d := range []string{ws, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Workspace: ws, Mountpoint: mnt, StateDir: state,
		Cache: config.Cache{Watch: true, WatchSkip: []string{"["}}}
	d, err := Start(cfg)
	if err == nil {
		d.Close()
		t.Fatal("Start with a malformed --watch-skip glob succeeded")
	}
	if d != nil {
		t.Errorf("a failed Start returned a daemon")
	}
	if !strings.Contains(err.Error(), "--watch-skip") {
		t.Errorf("error %q does not name --watch-skip", err)
	}
	lock, err := lockState(state, mnt)
	if err != nil {
		t.Fatalf("the state directory is still held after a failed Start: %v", err)
	}
	lock.Close()
}
