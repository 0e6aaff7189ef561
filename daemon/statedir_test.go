package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStateLock: a state directory is held by one lock at a time; the
// refusal names --state-dir, the holder's pid and mountpoint; closing the
// holder frees it; Check sees a held lock without taking it.
func TestStateLock(t *testing.T) {
	dir := t.TempDir()
	ws, mnt := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt")
	os.Mkdir(ws, 0o755)
	os.Mkdir(mnt, 0o755)
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o700)
	cfg := Config{Workspace: ws, Mountpoint: mnt, StateDir: state}
	if err := Check(cfg); err != nil {
		t.Fatalf("Check of a free state directory: %v", err)
	}
	first, err := lockState(state, "/first")
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"lockState": func() error { _, err := lockState(state, "/second"); return err }(), "Check": Check(cfg)} {
		if err == nil {
			t.Fatalf("%s: a held state directory was taken again", name)
		}
		for _, want := range []string{"--state-dir " + state, "pid " + strconv.Itoa(os.Getpid()), "/first"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", name, err, want)
			}
		}
	}
	first.Close()
	again, err := lockState(state, "/again")
	if err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	again.Close()
}

// TestCheckCreatesNothing: Check refuses a missing workspace, a missing
// mountpoint and a relative state directory, and creates nothing.
func TestCheckCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	ws, mnt := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt")
	os.Mkdir(ws, 0o755)
	os.Mkdir(mnt, 0o755)
	state := filepath.Join(dir, "state")
	for want, cfg := range map[string]Config{
		"workspace":     {Workspace: filepath.Join(dir, "nope"), Mountpoint: mnt, StateDir: state},
		"does not":      {Workspace: ws, Mountpoint: filepath.Join(dir, "nope"), StateDir: state},
		"--state-dir r": {Workspace: ws, Mountpoint: mnt, StateDir: "rel"},
		"--in-place":    {Workspace: ws, Mountpoint: mnt, InPlace: true, StateDir: state},
	} {
		if err := Check(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%+v) = %v, want an error with %q", cfg, err, want)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("Check created %s", state)
	}
}
