package tests

// A file a session creates is its own from the moment of creation: while
// the creating descriptor is still open, the session may delete, truncate,
// overwrite or replace the file by path (the temp-file pattern, and what
// stress-ng's and fsx's workloads do), as long as every change to it is the
// session's own. A change by another session or outside the mount makes
// the session's view stale as for any file it read.

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// creatorPy is a python3 command loop run in the mount root: each stdin
// line is one command, answered "ok" or "err ERRNO" (the errno's name).
// "create NAME" makes NAME with O_CREAT|O_EXCL and keeps the descriptor;
// "write DATA", "fsync" and "close" use it; the other commands act by path.
const creatorPy = `
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = None
for line in sys.stdin:
    op, _, arg = line.rstrip("\n").partition(" ")
    try:
        if op == "create":
            fd = os.open(arg, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
        elif op == "write":
            os.write(fd, arg.encode() + b"\n")
        elif op == "fsync":
            os.fsync(fd)
        elif op == "close":
            os.close(fd)
        elif op == "unlink":
            os.unlink(arg)
        elif op == "truncate":
            os.truncate(arg, 0)
        elif op == "otrunc":
            name, _, data = arg.partition(" ")
            g = os.open(name, os.O_WRONLY | os.O_TRUNC)
            os.write(g, data.encode() + b"\n")
            os.close(g)
        elif op == "mkfile":
            name, _, data = arg.partition(" ")
            g = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
            os.write(g, data.encode() + b"\n")
            os.close(g)
        elif op == "rename":
            src, dst = arg.split(" ")
            os.rename(src, dst)
        elif op == "exchange":
            src, dst = arg.split(" ")
            AT_FDCWD, RENAME_EXCHANGE = -100, 2
            if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), RENAME_EXCHANGE) != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
        else:
            raise OSError(errno.EINVAL, "unknown command " + op)
        print("ok", flush=True)
    except OSError as e:
        print("err", errno.errorcode.get(e.errno, str(e.errno)), flush=True)
`

// creator is a python3 process in the mount (the default session) driven
// one command at a time by creatorPy, so each step is ordered by its answer.
type creator struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startCreator starts the command loop in the mount's directory dir.
func (m *mount) startCreator(t *testing.T, dir string) *creator {
	t.Helper()
	cmd := exec.Command("python3", "-c", creatorPy)
	cmd.Dir = m.path(dir)
	cmd.Env = testEnv(m.tmp)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("python3: %v", err)
	}
	c := &creator{t: t, cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		c.in.Close()
		c.cmd.Wait()
	})
	return c
}

// do runs one command and returns its answer ("ok" or "err ERRNO").
func (c *creator) do(command string) string {
	c.t.Helper()
	if _, err := io.WriteString(c.in, command+"\n"); err != nil {
		c.t.Fatalf("%s: %v", command, err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		c.t.Fatalf("%s: no answer: %v", command, err)
	}
	return strings.TrimSpace(line)
}

// ok runs command and fails the test unless it succeeds.
func (c *creator) ok(command string) {
	c.t.Helper()
	if got := c.do(command); got != "ok" {
		c.t.Fatalf("%s: %s, want ok", command, got)
	}
}

// backingState returns the content of rel in the backing directory, or
// "(absent)".
func (m *mount) backingState(rel string) string {
	m.t.Helper()
	b, err := os.ReadFile(m.backing(rel))
	if os.IsNotExist(err) {
		return "(absent)"
	}
	if err != nil {
		m.t.Fatal(err)
	}
	return string(b)
}

// TestOwnFileTempOneLiner runs the temp-file pattern as a one-liner:
// create, write, unlink while the descriptor is open, then close. It used
// to be refused as "unread".
func TestOwnFileTempOneLiner(t *testing.T) {
	m := newMount(t, nil, nil)
	cmd := exec.Command("python3", "-c", `import os; fd=os.open('t', os.O_CREAT|os.O_RDWR|os.O_EXCL, 0o600); os.write(fd,b'x'); os.unlink('t'); os.close(fd)`)
	cmd.Dir = m.mnt
	cmd.Env = testEnv(m.tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("create, write, unlink while open: %v\n%s", err, out)
	}
	if got := m.backingState("t"); got != "(absent)" {
		t.Errorf("backing t = %q, want it deleted", got)
	}
	if d := m.denials(); len(d) != 0 {
		t.Errorf("denials: %v, want none", d)
	}
}

// TestOwnFileMknod: an empty regular file made by mknod(2) is the session's
// own as one made by open(O_CREAT) is: the session may remove it, truncate
// it, write it with O_TRUNC and rename another file over it without reading
// it, and make it again at the same name (stress-ng's mknod stressor). Its
// unlink used to be refused as "unread", so the next mknod failed with
// EEXIST. Made outside the mount, the same file stays guarded.
func TestOwnFileMknod(t *testing.T) {
	m := newMount(t, nil, nil)
	cmd := exec.Command("python3", "-c", `
import os, stat
for i in range(3):
    os.mknod("n", stat.S_IFREG | 0o600)
    os.unlink("n")
os.mknod("n", stat.S_IFREG | 0o600)
os.truncate("n", 0)
fd = os.open("n", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"mine\n")
os.close(fd)
os.mknod("o", stat.S_IFREG | 0o600)
os.rename("o", "n")
os.mknod("p", stat.S_IFIFO | 0o600)
os.unlink("p")
`)
	cmd.Dir = m.mnt
	cmd.Env = testEnv(m.tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mknod, then unlink, truncate, O_TRUNC write and rename over by path: %v\n%s", err, out)
	}
	if got := m.backingState("n"); got != "" {
		t.Errorf("backing n = %q, want the empty file renamed over it", got)
	}
	if d := m.denials(); len(d) != 0 {
		t.Errorf("denials: %v, want none", d)
	}
	// Contrast: the session did not make this one, and has not read it.
	mark := m.appliedMark()
	if err := unix.Mknod(m.backing("x"), unix.S_IFREG|0o600, 0); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "x")
	if err := os.Remove(m.path("x")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("unlink of a file made outside and never read: %v, want EACCES", err)
	}
	if got := m.backingState("x"); got != "" {
		t.Errorf("backing x = %q, want it kept", got)
	}
}

// TestOwnFileByPathWhileCreatingHandleOpen: every by-path mutation of a
// file the session created, while the creating descriptor is still open
// (before any write, after writes, after fsync), is allowed and does what
// it does natively; the descriptor keeps working afterwards, and nothing is
// logged as refused.
func TestOwnFileByPathWhileCreatingHandleOpen(t *testing.T) {
	preps := []struct {
		name    string
		cmds    []string
		content string // t's content after the prep
	}{
		{"empty", nil, ""},
		{"written", []string{"write one", "write two"}, "one\ntwo\n"},
		{"written_fsync", []string{"write one", "fsync"}, "one\n"},
	}
	ops := []struct {
		name string
		cmds []string
		// want is the backing content of t and u after the op and the
		// creating descriptor's close; before is t's content before.
		want func(before string) (t, u string)
	}{
		{"unlink", []string{"unlink t", "write after unlink"}, func(string) (string, string) {
			return "(absent)", "(absent)"
		}},
		{"truncate", []string{"truncate t"}, func(string) (string, string) {
			return "", "(absent)"
		}},
		{"otrunc", []string{"otrunc t replaced"}, func(string) (string, string) {
			return "replaced\n", "(absent)"
		}},
		{"rename_over", []string{"mkfile u other", "rename u t"}, func(string) (string, string) {
			return "other\n", "(absent)"
		}},
		{"exchange", []string{"mkfile u other", "exchange u t"}, func(before string) (string, string) {
			return "other\n", before
		}},
	}
	m := newMount(t, nil, nil)
	for _, p := range preps {
		for _, op := range ops {
			t.Run(p.name+"/"+op.name, func(t *testing.T) {
				parent := m.t
				m.t = t
				defer func() { m.t = parent }()
				// Each case works in a directory of its own.
				dir := p.name + "-" + op.name
				if err := os.Mkdir(m.path(dir), 0o755); err != nil {
					t.Fatal(err)
				}
				c := m.startCreator(t, dir)
				c.ok("create t")
				for _, cmd := range append(append([]string(nil), p.cmds...), op.cmds...) {
					c.ok(cmd)
				}
				c.ok("close")
				wantT, wantU := op.want(p.content)
				if got := m.backingState(dir + "/t"); got != wantT {
					t.Errorf("backing t = %q, want %q", got, wantT)
				}
				if got := m.backingState(dir + "/u"); got != wantU {
					t.Errorf("backing u = %q, want %q", got, wantU)
				}
				if d := m.denials(); len(d) != 0 {
					t.Errorf("denials: %v, want none", d)
				}
			})
		}
	}
}

// TestOwnFileStaleAfterOthersChange: while the creating descriptor is
// still open, a change by someone else (outside the mount, or another
// session through it) ends the creator's ownership: its by-path mutations
// are refused as stale and the file keeps the other writer's bytes.
func TestOwnFileStaleAfterOthersChange(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, m *mount)
		want   string // t's content after the change
	}{
		{"external", func(t *testing.T, m *mount) {
			mark := m.appliedMark()
			m.writeBacking("t", "external\n")
			m.waitApplied(mark, "t")
		}, "external\n"},
		{"other_session", func(t *testing.T, m *mount) {
			a := m.startAgent("other")
			a.ok("cat t >/dev/null && printf 'theirs\\n' >> t")
		}, "mine\ntheirs\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMount(t, nil, nil)
			c := m.startCreator(t, "")
			c.ok("create t")
			c.ok("write mine")
			c.ok("mkfile u other")
			tc.change(t, m)
			const want = "err EACCES" // the guard's default errno
			for _, cmd := range []string{"unlink t", "truncate t", "otrunc t blind", "rename u t", "exchange u t"} {
				if got := c.do(cmd); got != want {
					t.Errorf("%s after the other change: %s, want %s", cmd, got, want)
				}
			}
			if got := m.backingState("t"); got != tc.want {
				t.Errorf("backing t = %q, want %q (untouched)", got, tc.want)
			}
			stale := 0
			for _, d := range m.denials() {
				if d["session"] == "default" && d["path"] == "t" {
					if d["code"] != "stale" {
						t.Errorf("denial %v: want code stale", d)
					}
					stale++
				}
			}
			if stale == 0 {
				t.Errorf("no stale denial of t logged for the creator: %v", m.denials())
			}
		})
	}
}
