package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// TestMain removes the built CLI binary after all tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// rubinofsBin builds the CLI once per test run and returns its path.
func rubinofsBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "rubinofs-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "rubinofs")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/rubinofs").CombinedOutput()
		if err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	if binErr != nil {
		t.Fatalf("building rubinofs: %v\n%s", binErr, binPath)
	}
	return binPath
}

// cli runs the rubinofs binary and returns its combined output and error.
func cli(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(rubinofsBin(t), args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestCLIDemo runs `rubinofs demo` and checks the tour shows a refused blind
// write, an allowed read-then-edit and the denial log.
func TestCLIDemo(t *testing.T) {
	requireFuse(t)
	out, err := cli(t, t.TempDir(), "demo")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"refused", "Permission denied", "read it first", "-> ok", `"code":"unread"`, `"code":"stale"`, "unmounted"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestCLIMountDaemon mounts with --daemon, reads status through the CLI and
// unmounts, and checks the clear errors of bad invocations.
func TestCLIMountDaemon(t *testing.T) {
	requireFuse(t)
	tmp := t.TempDir()
	ws, mnt, state := filepath.Join(tmp, "ws"), filepath.Join(tmp, "mnt"), filepath.Join(tmp, "state")
	os.Mkdir(ws, 0o755)
	os.Mkdir(mnt, 0o755)
	os.WriteFile(filepath.Join(ws, "f"), []byte("x\n"), 0o644)

	out, err := cli(t, tmp, "mount", "--daemon", "--state-dir", state, ws, mnt)
	if err != nil {
		t.Fatalf("mount --daemon: %v\n%s", err, out)
	}
	unmounted := false
	t.Cleanup(func() {
		if !unmounted {
			cli(t, tmp, "unmount", mnt)
		}
	})
	// The mount answers as soon as --daemon returned.
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "x\n" {
		t.Fatalf("reading through the daemon mount: %q %v", b, err)
	}
	out, err = cli(t, tmp, "status", mnt)
	if err != nil || !strings.Contains(out, "mode:       enforce") || !strings.Contains(out, ws) {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = cli(t, mnt, "status")
	if err != nil {
		t.Fatalf("status from inside the mount: %v\n%s", err, out)
	}
	// Mounting again on the same mountpoint is a clear error.
	out, err = cli(t, tmp, "mount", "--state-dir", state, ws, mnt)
	if err == nil || !strings.Contains(out, "already a mount point") {
		t.Fatalf("double mount: %v\n%s", err, out)
	}
	out, err = cli(t, tmp, "unmount", mnt)
	if err != nil {
		t.Fatalf("unmount: %v\n%s", err, out)
	}
	unmounted = true
	if mounted := isMounted(t, mnt); mounted {
		t.Fatal("still mounted after rubinofs unmount")
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", filepath.Join(tmp, "nope"), mnt}, "workspace"},
		{[]string{"mount", ws, filepath.Join(tmp, "nope")}, "does not exist"},
		{[]string{"mount", ws, ws + "/.."}, "not empty"},
		{[]string{"mount", "--mode", "bogus", ws, mnt}, "mode"},
		{[]string{"mount", ws}, "usage"},
	} {
		out, err := cli(t, tmp, append([]string{c.args[0], "--state-dir", state}, c.args[1:]...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("rubinofs %v: err=%v, want an error mentioning %q:\n%s", c.args, err, c.want, out)
		}
	}
	if out, err := cli(t, tmp, "version"); err != nil || !strings.HasPrefix(out, "rubinofs ") {
		t.Errorf("version: %v %q", err, out)
	}
}

// isMounted reports whether path is a mount point.
func isMounted(t testing.TB, path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
