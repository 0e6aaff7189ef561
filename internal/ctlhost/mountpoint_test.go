package ctlhost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
)

// TestMountpointOtherNames: a path under the mountpoint or one of its
// other names resolves to the same workspace-relative path; the control
// tree under either is refused, and so is a path under neither, naming
// the mountpoint. A relative path joins the caller's cwd, which under an
// other name resolves the same way.
func TestMountpointOtherNames(t *testing.T) {
	var m Mountpoint
	m.Set("/s/branches/b/mnt", "/ws", "/backing/ws")
	self := ctltree.Caller{Pid: uint32(os.Getpid())}
	for p, want := range map[string]string{
		"/s/branches/b/mnt/a/f": "a/f", "/ws/a/f": "a/f", "/backing/ws/a": "a", "/ws": ".", "/ws/../ws/x": "x",
	} {
		if got, err := m.CallerRel(self, p); err != nil || got != want {
			t.Errorf("CallerRel(%s) = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"/wsx/f", "/", "/backing", "/ws/" + ctltree.DirName + "/status", "/ws/../etc/passwd"} {
		_, err := m.CallerRel(self, p)
		if err == nil || !strings.Contains(err.Error(), "/s/branches/b/mnt") && !strings.Contains(err.Error(), "control file") {
			t.Errorf("CallerRel(%s): %v, want a refusal", p, err)
		}
	}
	// A relative path: this process's cwd, under an other name.
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(sub); err != nil {
		t.Fatal(err)
	}
	m.Set("/elsewhere/mnt", dir)
	if got, err := m.CallerRel(self, "f.txt"); err != nil || got != "sub/f.txt" {
		t.Errorf("CallerRel(f.txt) from %s = %q, %v; want sub/f.txt", sub, got, err)
	}
	var none Mountpoint
	if _, err := none.CallerRel(self, "/ws/f"); err == nil {
		t.Error("a zero Mountpoint resolved a path")
	}
}
