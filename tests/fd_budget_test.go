package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// TestFdBudgetPerUID: uid 65534 opens files through the mount and holds
// them until an open fails; it gets EMFILE at its share of the daemon's
// descriptors (docs/DESIGN.md#fd-budget), and while it holds them root
// still reads a file and lists the directory through the mount. Before
// the budget, the other uid's opens used up the daemon's descriptor
// table (its RLIMIT_NOFILE) and every caller's open failed.
func TestFdBudgetPerUID(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	m := newMount(t, nil, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		for i := range 50 {
			if err := os.WriteFile(filepath.Join(c.Workspace, fmt.Sprintf("f%d", i)), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	openUp(t, m.tmp)
	h, _ := m.status()["handles"].(map[string]any)
	perUID, _ := h["per_uid"].(float64)
	if perUID <= 0 {
		t.Fatalf("status has no handles.per_uid: %v", h)
	}
	// The holder may open as many files as its own limit allows: the
	// daemon's limit is this process's, so only the budget stops it first.
	script := `
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds = []
err = "none"
try:
    while True:
        fds.append(os.open("f%d" % (len(fds) % 50), os.O_RDONLY))
except OSError as e:
    err = e.errno
print(len(fds), err, flush=True)
sys.stdin.read()
`
	line := holdAsNobody(t, m.mnt, m.tmp, script)
	f := strings.Fields(line)
	held, _ := strconv.Atoi(f[0])
	t.Logf("uid 65534 held %d handles, then errno %s (per_uid %v)", held, f[1], perUID)
	if f[1] != "24" || held > int(perUID) {
		t.Errorf("uid 65534 held %d handles and then got errno %s, want EMFILE (24) at most at its share, %v", held, f[1], perUID)
	}
	if got := m.mustSh("cat f1"); got != "x\n" {
		t.Errorf("root read %q through the mount while 65534 held its handles", got)
	}
	if got := m.mustSh("ls | wc -l"); strings.TrimSpace(got) != "50" {
		t.Errorf("root listed %q entries while 65534 held its handles", got)
	}
	h, _ = m.status()["handles"].(map[string]any)
	if r, _ := h["refused"].(float64); r < 1 {
		t.Errorf("status handles.refused = %v after a refused open", h["refused"])
	}
}

// holdAsNobody starts script with /usr/bin/python3 as uid and gid 65534
// in dir and returns the first line it prints; the script then holds what
// it opened until its standard input ends, which the test's cleanup
// closes (and waits for the script to exit).
func holdAsNobody(t *testing.T, dir, tmp, script string) string {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script)
	cmd.Dir = dir
	cmd.Env = testEnv(tmp)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the holder said %q: %v", line, err)
	}
	return line
}
