package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// TestCtlSnapshotsBoundedPerUID: uid 65534, in a session of its own that
// read 2,000 files, opens its session's guard/tracked (about 100 KB of
// records) over and over and holds each handle after one read: the reads
// fail with EMFILE once its handles hold 64 MiB of snapshots
// (docs/DESIGN.md#fd-budget), the reason is in .rubino/errors, and root
// still reads the status. Before, each handle held a copy until released:
// 2,000 handles of a 2,000-record tracked took the daemon from 26 MB to
// 263 MB.
func TestCtlSnapshotsBoundedPerUID(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	m := newMount(t, nil, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		for i := range 2000 {
			name := fmt.Sprintf("file-with-a-longer-name-%04d.txt", i)
			if err := os.WriteFile(filepath.Join(c.Workspace, name), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	openUp(t, m.tmp)
	bin := sharedBin(t)
	script := `
import glob, os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
for p in glob.glob("file-with-*"):
    open(p).read()
fds, err = [], 0
while len(fds) < 4000:
    fd = os.open(".rubino/self/tracked", os.O_RDONLY)
    try:
        b = os.read(fd, 64)
    except OSError as e:
        err = e.errno
        os.close(fd)
        break
    fds.append(fd)
print(len(fds), err)
`
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "run", "--mount", m.mnt, "--", "/usr/bin/python3", "-c", script)
	cmd.Dir = m.mnt
	cmd.Env = testEnv(m.tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the holder: %v\n%s", err, out)
	}
	var held, errno int
	if _, err := fmt.Sscan(string(out), &held, &errno); err != nil {
		t.Fatalf("the holder said %q", out)
	}
	t.Logf("uid 65534 held %d handles of its tracked, then errno %d", held, errno)
	if errno != 24 || held < 100 || held >= 4000 {
		t.Errorf("uid 65534 held %d handles of tracked and then got errno %d, want EMFILE (24) after at least 100", held, errno)
	}
	if errs := m.mustSh("cat .rubino/errors"); !strings.Contains(errs, "bytes of content") {
		t.Errorf(".rubino/errors does not give the reason:\n%s", errs)
	}
	if st := m.status(); st["mode"] == nil {
		t.Errorf("root's status: %v", st)
	}
}
