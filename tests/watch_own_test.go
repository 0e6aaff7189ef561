package tests

import (
	"fmt"
	"strings"
	"testing"
)

// drainWatcher makes an external change (a sentinel file written in the
// backing directory, name) and waits until the watcher has applied it. Every
// event the kernel queued before the sentinel's has then been read and
// classified: the watcher decides an own change's events once its bracket
// has ended, and every bracket of a FUSE request ends before the request's
// reply, so before the tool that made it returns.
func (m *mount) drainWatcher(name string) {
	m.t.Helper()
	mark := m.appliedMark()
	m.writeBacking(name, "sentinel\n")
	m.waitApplied(mark, name)
}

// assertNoExternal fails the test when the watcher applied any change as
// external but the sentinels (names starting with "sentinel"), and when the
// status's external_events counter disagrees.
func (m *mount) assertNoExternal() {
	m.t.Helper()
	var others []string
	sentinels := 0
	for _, evs := range m.mt.Applied() {
		if evs == nil {
			others = append(others, "everything (overflow)")
		}
		for _, ev := range evs {
			if strings.HasPrefix(ev.Path, "sentinel") {
				sentinels++
				continue
			}
			others = append(others, fmt.Sprintf("%s %v", ev.Path, ev.Op))
		}
	}
	if len(others) > 0 {
		m.t.Errorf("the daemon's own changes were taken for external ones:\n  %s", strings.Join(others, "\n  "))
	}
	w, _ := m.status()["watcher"].(map[string]any)
	ext, _ := w["external_events"].(float64)
	if int(ext) != sentinels+len(others) {
		m.t.Errorf("status reports external_events %v, the mount applied %d sentinel and %d other events", w["external_events"], sentinels, len(others))
	}
	m.t.Logf("watcher status: external_events %v (sentinels %d), own_events %v, events %v", w["external_events"], sentinels, w["own_events"], w["events"])
}

// TestWatchOwnLinkThenWrite: a hard link, then a write through the first
// name, then a write through a new handle. The watcher judges the event of
// the new name by the file's identity, so the write through the other name
// is the daemon's own and the last write is not refused as stale. The sleep
// in the script is part of the reproduction: it lets the watcher deliver
// the link's and the write's events while the first handle is open.
func TestWatchOwnLinkThenWrite(t *testing.T) {
	m := newMount(t, nil, nil)
	m.mustSh(`python3 -c "import os,time; open('f1','w').write('v1\n'); fd=os.open('f1',os.O_WRONLY|os.O_APPEND); os.link('f1','f2'); os.write(fd,b'x\n'); time.sleep(0.2); os.close(fd); fd=os.open('f1',os.O_WRONLY|os.O_APPEND); os.write(fd,b'y\n')"`)
	if got := m.readBacking("f2"); got != "v1\nx\ny\n" {
		t.Fatalf("f2 = %q", got)
	}
	m.drainWatcher("sentinel")
	m.assertNoExternal()
}

// TestWatchOwnLinkExternalWrite: an external write through the second name
// of a file the mount has linked is still external: the kernel's cached
// pages of the first name are dropped and a write through it is refused as
// stale.
func TestWatchOwnLinkExternalWrite(t *testing.T) {
	m := newMount(t, map[string]string{"f1": "v1\n"}, nil)
	if got := m.mustSh("cat f1 && ln f1 f2 && echo own >> f1 && cat f1"); got != "v1\nv1\nown\n" {
		t.Fatalf("through the mount: %q", got)
	}
	mark := m.appliedMark()
	m.writeBacking("f2", "external\n")
	m.waitApplied(mark, "f2")
	m.mustFail("echo agent >> f1")
	if ds := m.denials(); len(ds) != 1 || ds[0]["code"] != "stale" {
		t.Fatalf("denials %v, want one stale", ds)
	}
	if got := m.rawRead("f1"); got != "external\n" {
		t.Fatalf("f1 through the mount after an external write to f2: %q", got)
	}
}

// renameExchange is a shell command that exchanges two names with
// renameat2(RENAME_EXCHANGE) through python3's ctypes.
func renameExchange(a, b string) string {
	return fmt.Sprintf(`python3 -c "import ctypes,os,sys; l=ctypes.CDLL(None,use_errno=True); r=l.renameat2(-100,b'%s',-100,b'%s',2); sys.exit(r and os.strerror(ctypes.get_errno()))"`, a, b)
}

// TestWatchOwnExchange: RENAME_EXCHANGE of two files and of two directories
// through the mount raises no external event (nor do the entries of the
// exchanged directories), and both directories stay watched: an external
// write below each is applied where it was made.
func TestWatchOwnExchange(t *testing.T) {
	m := newMount(t, map[string]string{"a": "a\n", "b": "bb\n", "d1/x": "x\n", "d1/sub/z": "z\n", "d2/y": "y\n"}, nil)
	m.mustSh("cat a b d1/x d1/sub/z d2/y >/dev/null && " + renameExchange("a", "b") + " && echo more >> a && " +
		renameExchange("d1", "d2") + " && echo more >> d2/x && " + renameExchange("d1", "d2") + " && " + renameExchange("d1", "d2"))
	if got := m.readBacking("a"); got != "bb\nmore\n" {
		t.Fatalf("a = %q", got)
	}
	if got := m.readBacking("d2/x"); got != "x\nmore\n" {
		t.Fatalf("d2/x = %q", got)
	}
	m.drainWatcher("sentinel")
	m.assertNoExternal()

	for _, rel := range []string{"d2/x", "d2/sub/z", "d1/y"} {
		mark := m.appliedMark()
		m.writeBacking(rel, "external\n")
		m.waitApplied(mark, rel)
		if got := m.rawRead(rel); got != "external\n" {
			t.Fatalf("%s through the mount after an external write: %q", rel, got)
		}
	}
}

// ownStressScript runs a few thousand mixed operations through the mount,
// in one process that only touches files it made or read: create, append,
// pwrite, link, rename (away and over), RENAME_EXCHANGE of files and of
// directories, chmod, utime, truncate, unlink, mkdir, rmdir and directory
// renames. It prints the operations done and the ones refused.
const ownStressScript = `
import ctypes, errno, os, random, sys
libc = ctypes.CDLL(None, use_errno=True)
rnd = random.Random(int(sys.argv[1]))
dirs = ['.', 'p', 'q', 'p/r']
for d in dirs[1:]:
    os.makedirs(d, exist_ok=True)
def name():
    return os.path.join(rnd.choice(dirs), 'f%d' % rnd.randrange(12))
def files():
    out = []
    for d in dirs:
        try:
            out += [os.path.join(d, e) for e in os.listdir(d) if os.path.isfile(os.path.join(d, e))]
        except FileNotFoundError:
            pass
    return out
def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
def touch_read(p):
    with open(p, 'rb') as f:
        f.read()
done = refused = 0
for i in range(int(sys.argv[2])):
    fs = files()
    op = rnd.choice(['create', 'append', 'pwrite', 'link', 'rename', 'exchange', 'xdir', 'chmod', 'utime', 'truncate', 'unlink', 'mkdir', 'rmdir', 'mvdir'])
    try:
        if op == 'create' or not fs:
            p = name()
            if not os.path.exists(p):
                with open(p, 'wb') as f:
                    f.write(os.urandom(rnd.randrange(1, 300)))
        else:
            p = rnd.choice(fs)
            touch_read(p)
            if op == 'append':
                with open(p, 'ab') as f:
                    f.write(b'x' * rnd.randrange(1, 100))
            elif op == 'pwrite':
                fd = os.open(p, os.O_WRONLY)
                os.pwrite(fd, b'y' * 10, rnd.randrange(0, 50))
                os.close(fd)
            elif op == 'link':
                q = name()
                if not os.path.exists(q):
                    os.link(p, q)
            elif op == 'rename':
                q = name()
                if os.path.isfile(q):
                    touch_read(q)
                if not os.path.isdir(q):
                    os.rename(p, q)
            elif op == 'exchange':
                q = rnd.choice(fs)
                touch_read(q)
                exchange(p, q)
            elif op == 'xdir':
                a, b = rnd.sample(dirs[1:], 2)
                if not a.startswith(b + '/') and not b.startswith(a + '/'):
                    exchange(a, b)
            elif op == 'chmod':
                os.chmod(p, rnd.choice([0o600, 0o644, 0o755]))
            elif op == 'utime':
                os.utime(p, (rnd.randrange(1 << 30), rnd.randrange(1 << 30)))
            elif op == 'truncate':
                os.truncate(p, rnd.randrange(0, 200))
            elif op == 'unlink':
                os.unlink(p)
            elif op == 'mkdir':
                os.makedirs(os.path.join(rnd.choice(dirs), 'tmpdir'), exist_ok=True)
            elif op == 'rmdir':
                os.rmdir(os.path.join(rnd.choice(dirs), 'tmpdir'))
            elif op == 'mvdir':
                d = rnd.choice(dirs)
                os.rename(os.path.join(d, 'tmpdir'), os.path.join(d, 'tmpdir2'))
                os.rename(os.path.join(d, 'tmpdir2'), os.path.join(d, 'tmpdir'))
        done += 1
    except PermissionError as e:
        refused += 1
        print('refused', op, e, file=sys.stderr)
    except OSError:
        done += 1  # a name that was not there, or not of the right type
print(done, refused)
`

// TestWatchOwnStress: mixed operations of the daemon's own making in a
// fresh mount raise no external event: the status counter stays at the
// sentinel's count. The run is kept well inside the watcher's 30 s record
// lifetime (ownTTL): past it, an entry of a directory moved much later may
// be reported when the moved directory is scanned.
func TestWatchOwnStress(t *testing.T) {
	m := newMount(t, nil, nil)
	out := m.mustSh("python3 -c " + shq(ownStressScript) + " 1 1500")
	t.Logf("operations done, refused: %s", strings.TrimSpace(out))
	m.drainWatcher("sentinel")
	m.assertNoExternal()
}
