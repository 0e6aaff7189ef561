package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/tasks"
)

// umaskScript creates one entry of every kind a caller's umask applies to,
// with real tools (python3's os.open, os.mkdir, os.mkfifo, os.mknod, an
// O_TMPFILE open, a unix socket bind; touch, mkdir, mkfifo and ln -s from
// the shell), then lists each entry's permission bits and type. $1 is the
// umask.
const umaskScript = `umask "$1" || exit 1
python3 - <<'PY' || exit 1
import os, socket, stat
os.close(os.open('c666', os.O_CREAT | os.O_WRONLY, 0o666))
os.close(os.open('c777', os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o777))
os.close(os.open('c4777', os.O_CREAT | os.O_RDWR, 0o4777))
os.mkdir('d777', 0o777)
os.mkdir('d1777', 0o1777)
os.mkfifo('fifo666', 0o666)
os.mknod('fifo777', 0o777 | stat.S_IFIFO)
s = socket.socket(socket.AF_UNIX)
s.bind('sock')
s.close()
fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o666)
print('tmpfile %o' % stat.S_IMODE(os.fstat(fd).st_mode))
os.close(fd)
PY
touch t && mkdir d && mkfifo p && ln -s t l || exit 1
stat -c '%n %a %F' c666 c777 c4777 d777 d1777 fifo666 fifo777 sock t d p l`

// runUmaskScript runs umaskScript in dir with umask u (working directory
// outside the mount: golang/go#11155) and returns its output.
func runUmaskScript(t *testing.T, dir string, u string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "cd \"$0\" && "+umaskScript, dir, u)
	cmd.Dir = "/"
	cmd.Env = testEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("umask %s in %s: %v\n%s", u, dir, err, out)
	}
	return string(out)
}

// TestUmaskModesMatchNative creates files, directories, fifos, a socket,
// an O_TMPFILE file and a symlink under several umasks, natively and
// through the mount (guard off and enforcing), and asserts the same
// permission bits: the caller's umask applies exactly once. The daemon's
// own umask (022 in a usual shell) must not be applied on top of it; with
// umask 0, touch and mkdir give 666 and 777 natively.
func TestUmaskModesMatchNative(t *testing.T) {
	for _, mode := range []guard.Mode{guard.ModeOff, guard.ModeEnforce} {
		t.Run(mode.String(), func(t *testing.T) {
			m := newMount(t, nil, func(c *daemon.Config) { c.Mode = mode })
			for i, u := range []string{"0", "022", "077", "027", "002"} {
				native := filepath.Join(m.tmp, fmt.Sprintf("native%d", i))
				mounted := m.path(fmt.Sprintf("mounted%d", i))
				for _, d := range []string{native, mounted} {
					if err := os.Mkdir(d, 0o777); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(d, 0o777); err != nil { // the test's own umask
						t.Fatal(err)
					}
				}
				want := runUmaskScript(t, native, u)
				got := runUmaskScript(t, mounted, u)
				if got != want {
					t.Errorf("umask %s: native and mount differ\nnative:\n%s\nmount:\n%s", u, want, got)
				}
				if u == "0" && (!containsLine(got, "t 666 regular empty file") || !containsLine(got, "d 777 directory")) {
					t.Errorf("umask 0: want touch 666 and mkdir 777, got:\n%s", got)
				}
			}
		})
	}
}

// containsLine reports whether out has line as one of its lines.
func containsLine(out, line string) bool {
	return slices.Contains(strings.Split(out, "\n"), line)
}

// TestUmaskTasksGetTheirOwn runs an sh task through the mount: the daemon
// runs with umask 0, but a task starts with the umask it is configured
// with (by default the one the daemon was started with), so its touch and
// mkdir give 640 and 750 under umask 027, not 666 and 777.
func TestUmaskTasksGetTheirOwn(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) { c.Agents.Umask = "027" })
	id := m.spawnSh("umask; touch made; mkdir madedir")
	m.waitStatus(id, tasks.StatusDone)
	out := m.mustSh("cat .rubino/agents/" + id + "/output; stat -c '%n %a' made madedir")
	for _, line := range []string{"0027", "made 640", "madedir 750"} {
		if !containsLine(strings.TrimSpace(out), line) {
			t.Errorf("want line %q:\n%s", line, out)
		}
	}
}
