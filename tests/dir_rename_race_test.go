package tests

import (
	"fmt"
	"strings"
	"testing"
)

// dirRenameRaceScript: in each of $2 rounds a directory pN holding x and u
// is renamed to qN by one thread while another, through a descriptor of
// the directory it opened before (so the rename of the directory does not
// change what it names), renames x to y, unlinks u, makes the directory m
// and creates the file c in it. Every one of those succeeds natively
// whichever comes first. It prints each failure and a last line
// "failed N".
const dirRenameRaceScript = `
import os, sys, threading
os.chdir(sys.argv[1])
rounds = int(sys.argv[2])
failed = 0
for i in range(rounds):
    d = 'p%d' % i
    os.mkdir(d)
    for n in ('x', 'u'):
        with open(d + '/' + n, 'w') as f:
            f.write(n)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    bar = threading.Barrier(2)
    errs = []
    def mover():
        bar.wait()
        os.rename(d, 'q%d' % i)
    def inside():
        bar.wait()
        for what, op in (
                ('rename', lambda: os.rename('x', 'y', src_dir_fd=fd, dst_dir_fd=fd)),
                ('unlink', lambda: os.unlink('u', dir_fd=fd)),
                ('mkdir', lambda: os.mkdir('m', dir_fd=fd)),
                ('create', lambda: os.close(os.open('c', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)))):
            try:
                op()
            except OSError as e:
                errs.append('round %d, %s: %s' % (i, what, e))
    ts = [threading.Thread(target=mover), threading.Thread(target=inside)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    os.close(fd)
    got = sorted(os.listdir('q%d' % i))
    if got != ['c', 'm', 'y']:
        errs.append('round %d: q%d holds %s, want c, m, y' % (i, i, got))
    failed += len(errs)
    for e in errs[:3]:
        print(e, flush=True)
print('failed', failed)
`

// TestDirRenameRaceOpsInside: a rename, unlink, mkdir and create inside a
// directory, made through a descriptor of it while the directory itself is
// renamed, all succeed, as natively (the guard enforcing, the journal on:
// the mount as shipped).
// The daemon reaches the backing directory by the path go-fuse's tree
// records, which for a moment after the directory's rename still names
// the old path; before the retry of a name change that a finished rename
// made stale (fusefs/names.go), some failed with ENOENT and some renames
// with EIO (the journal could not open the old parent path) and an entry
// in .rubino/errors.
func TestDirRenameRaceOpsInside(t *testing.T) {
	m := newMount(t, nil, nil)
	m.raceScript("operations inside a directory being renamed", dirRenameRaceScript, m.mnt, "100")
	if errs := m.readMount(".rubino/errors"); strings.TrimSpace(errs) != "" {
		t.Errorf(".rubino/errors:\n%s", errs)
	}
}

// dirRenameLookupScript: in each of $2 rounds a directory pN holding x,
// which no one has looked up through the mount yet, is renamed to qN by
// one thread while another stats x, opens the directory again and
// chmods x through a descriptor of it; then qN/x is stat'ed by path. Both succeed natively. It prints each
// failure and a last line "failed N".
const dirRenameLookupScript = `
import os, sys, threading
os.chdir(sys.argv[1])
rounds = int(sys.argv[2])
failed = 0
for i in range(rounds):
    d = 'p%d' % i
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    bar = threading.Barrier(2)
    errs = []
    def mover():
        bar.wait()
        os.rename(d, 'q%d' % i)
    def inside():
        bar.wait()
        try:
            os.stat('x', dir_fd=fd)
        except OSError as e:
            errs.append('round %d, stat by descriptor: %s' % (i, e))
        try:
            os.close(os.open('.', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd))
        except OSError as e:
            errs.append('round %d, opendir by descriptor: %s' % (i, e))
        try:
            os.chmod('x', 0o600, dir_fd=fd)
        except OSError as e:
            errs.append('round %d, chmod by descriptor: %s' % (i, e))
    ts = [threading.Thread(target=mover), threading.Thread(target=inside)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    os.close(fd)
    try:
        mode = os.stat('q%d/x' % i).st_mode & 0o777
        if mode != 0o600:
            errs.append('round %d: q%d/x has mode %o, want 600' % (i, i, mode))
    except OSError as e:
        errs.append('round %d, stat by path afterwards: %s' % (i, e))
    failed += len(errs)
    for e in errs[:3]:
        print(e, flush=True)
print('failed', failed)
`

// TestDirRenameRaceLookup: a lookup of a name inside a directory being
// renamed finds it, as natively, and leaves no negative entry behind (the
// daemon answered ENOENT for the old path, and the kernel kept that
// answer for the mount's negative timeout, so the file seemed gone); an
// open of the directory and a chmod in it succeed (they failed with
// ENOENT).
func TestDirRenameRaceLookup(t *testing.T) {
	const rounds = 150
	files := map[string]string{}
	for i := range rounds {
		files[fmt.Sprintf("p%d/x", i)] = "x\n"
	}
	m := newMount(t, files, nil)
	m.raceScript("lookups inside a directory being renamed", dirRenameLookupScript, m.mnt, fmt.Sprint(rounds))
}
