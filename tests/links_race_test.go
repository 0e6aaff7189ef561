package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// linksRaceScript: three processes keep adding and removing hard links of
// the file "b" (link, unlink, or rename then unlink), while two others open
// "b" O_WRONLY and stat it, $2 times each (no write: with the guard
// enforcing, a write would make the linkers' unlinks stale-refused). "b" itself exists all
// along, so every open and stat of it must succeed, as natively. It prints
// the failures and a last line "failed N".
const linksRaceScript = `
import os, sys, multiprocessing as mp
os.chdir(sys.argv[1])
iters = int(sys.argv[2])
with open('b', 'w') as f:
    f.write('x')
with open('b') as f:  # read it: the whole run is one session that read it
    f.read()

def linker(k):
    me, moved = 'a%d' % k, 'r%d' % k
    for i in range(iters):
        try:
            os.link('b', me)
        except (FileExistsError, FileNotFoundError):
            # FileNotFoundError: the kernel's own link count of a FUSE
            # inode can reach 0 in such a race (vfs_link); not asserted.
            pass
        try:
            if i % 2:
                os.rename(me, moved)
                os.unlink(moved)
            else:
                os.unlink(me)
        except FileNotFoundError:
            pass

def opener(k):
    failed = 0
    for i in range(iters):
        for what in ('open', 'stat'):
            try:
                if what == 'open':
                    os.close(os.open('b', os.O_WRONLY))
                else:
                    os.stat('b')
            except OSError as e:
                failed += 1
                if failed <= 5:
                    print('opener %d, round %d, %s: %s' % (k, i, what, e), flush=True)
    return failed

if __name__ == '__main__':
    ls = [mp.Process(target=linker, args=(k,)) for k in range(3)]
    for p in ls:
        p.start()
    with mp.Pool(2) as pool:
        failed = sum(pool.map(opener, range(2)))
    for p in ls:
        p.join()
    print('failed', failed)
`

// TestLinksOpenByAnotherNameNeverENOENT runs linksRaceScript through the
// mount, with the watcher on, guard off and enforcing. Before name changes
// were ordered with operations by node (fusefs/names.go), a few hundred
// of its 4000 opens of "b" failed with ENOENT: the daemon reached the file
// by another name, just unlinked, that go-fuse's tree still recorded. It
// runs 600 rounds (1200 opens) a mode: at that bug's rate about sixty
// would fail, and it takes under a third of the CI time 2000 rounds took
// (about 18 s of 60).
func TestLinksOpenByAnotherNameNeverENOENT(t *testing.T) {
	for _, mode := range []guard.Mode{guard.ModeOff, guard.ModeEnforce} {
		t.Run(mode.String(), func(t *testing.T) {
			m := newMount(t, nil, func(c *daemon.Config) { c.Mode = mode })
			m.mustSh("mkdir d")
			m.raceScript("opens and stats of a name that existed all along", linksRaceScript, m.path("d"), "600")
		})
	}
}

// raceScript runs the Python race script script with args (the first a
// directory the script chdirs into) and fails the test, as what failed,
// unless its last line is "failed 0". It runs from outside the mount
// (golang/go#11155).
func (m *mount) raceScript(what, script string, args ...string) {
	m.t.Helper()
	cmd := exec.Command("python3", append([]string{"-c", script}, args...)...)
	cmd.Dir = m.tmp
	cmd.Env = testEnv(m.tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := lines[len(lines)-1]; last != "failed 0" {
		m.t.Errorf("%s failed:\n%s", what, out)
	}
}
