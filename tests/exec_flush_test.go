package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A process that runs execve while it holds a descriptor on the mount
// makes the kernel send FLUSH from inside execve, while the exec holds the
// task's exec locks; /proc reads about that task wait for the exec. A
// request handler that reads the caller's /proc files then waits on the
// exec, which waits on the reply: the caller hangs in D state and the mount
// can no longer be unmounted (docs/DESIGN.md#no-wait-on-caller).

// execFlushScript opens argv[2] (in the mount) and execs /bin/true while
// holding it. Python's os.open sets O_CLOEXEC (PEP 446), so execve closes
// the descriptor: FLUSH from inside the exec. Modes: "self" opens and execs
// in the same process; "inherit" opens, forks, and the child (which
// inherited the descriptor) execs; "session" first registers the process
// as a fresh session through .rubino/sessions/clone (argv[3] names it),
// then opens and execs.
const execFlushScript = `
import os, sys
mode, path = sys.argv[1], sys.argv[2]
if mode == "session":
    fd = os.open(os.path.join(os.path.dirname(path), ".rubino/sessions/clone"), os.O_RDWR)
    os.write(fd, ("name=" + sys.argv[3] + "\n").encode())
    os.close(fd)
fd = os.open(path, os.O_RDONLY)
os.read(fd, 1)
if mode == "inherit":
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/true", ["true"])
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
os.execv("/bin/true", ["true"])
`

// execLiveness bounds how long a command of these tests may take before the
// test declares the mount wedged. It is a liveness check, not a timed
// assertion: a healthy run takes milliseconds, a deadlocked one forever.
const execLiveness = 20 * time.Second

// TestExecFlushAccesslogNoDeadlock runs execve while holding a descriptor on
// the mount, with a reader attached to .rubino/accesslog and a session
// registered (so callers are resolved through /proc), in three shapes: the
// opener execs, a forked child that inherited the descriptor execs, and a
// process that just registered itself as a fresh session execs. Every run
// must finish; the FLUSH of the fresh session's handle is logged under that
// session, taken from the handle.
func TestExecFlushAccesslogNoDeadlock(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	m := newMount(t, map[string]string{"held.txt": "held\n"}, nil)
	conn := fuseConnOf(t, m)
	r := openAccessLog(t, m, true)

	// Another session exists, so every caller is resolved through /proc
	// (with none registered, the resolver reads nothing).
	sleeper := exec.Command("sleep", "1000000")
	sleeper.Dir = m.tmp
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	m.mustSh(fmt.Sprintf("exec 3<>.rubino/sessions/clone && echo 'name=bystander pid=%d' >&3", sleeper.Process.Pid))

	for _, mode := range []string{"self", "inherit", "session"} {
		ok := t.Run(mode, func(t *testing.T) {
			name := "execer-" + mode
			cmd := exec.Command("python3", "-c", execFlushScript, mode, m.path("held.txt"), name)
			cmd.Dir = m.tmp
			cmd.Env = testEnv(m.tmp)
			out, err := runLive(t, m, conn, cmd)
			if err != nil {
				t.Fatalf("%s: %v\n%s", mode, err, out)
			}
			if mode == "session" {
				r.waitLine("the exec's FLUSH under the fresh session", func(l string) bool {
					return strings.Contains(l, "session:"+name+"] flush (")
				})
			}
		})
		if !ok {
			return // a wedged mount was aborted: the other shapes cannot run
		}
	}
	// The mount still answers, and the exec'd children are gone.
	if got := m.mustSh("cat held.txt"); got != "held\n" {
		t.Fatalf("held.txt reads %q", got)
	}
}

// fuseConnOf returns the mount's FUSE connection number (its device
// number, as /sys/fs/fuse/connections names it), taken while the mount is
// healthy so that aborting never needs the mount to answer.
func fuseConnOf(t *testing.T, m *mount) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(m.mnt, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(unix.Major(st.Dev))<<20 | uint64(unix.Minor(st.Dev))
}

// runLive runs cmd to its end and returns its combined output. If it has
// not ended within execLiveness, the mount is wedged: the FUSE connection
// is aborted (every request in flight fails, so callers stuck in D state
// resume and die), the dead mount is detached, the command is reaped, and
// the test fails. Start is inside the bound too:
// the child's own execve closes the descriptors it inherited from this
// process (the access-log reader's among them, close-on-exec), and
// exec.Cmd.Start waits for that exec.
func runLive(t *testing.T, m *mount, conn uint64, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		err := cmd.Start()
		close(started)
		if err == nil {
			err = cmd.Wait()
		}
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), execLiveness)
	defer cancel()
	select {
	case err := <-done:
		return buf.String(), err
	case <-ctx.Done():
	}
	// Nothing here may read the stuck child's /proc files: they wait on
	// its exec too.
	abortErr := abortFuseConn(t, conn)
	// The server loop ends with the connection, so the daemon's Close
	// finds nothing to unmount: detach the dead mount here.
	if err := unix.Unmount(m.mnt, unix.MNT_DETACH); err != nil {
		t.Errorf("detaching the aborted mount: %v", err)
	}
	select {
	case <-started:
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		select {
		case <-done:
		case <-time.After(execLiveness):
			t.Errorf("the command did not end after the connection was aborted")
		}
	case <-time.After(execLiveness):
		t.Errorf("the command did not start after the connection was aborted")
	}
	t.Fatalf("deadlock: %v did not end within %v; FUSE connection %d aborted (%v)",
		cmd.Args[:2], execLiveness, conn, abortErr)
	return "", nil
}

// abortFuseConn aborts FUSE connection conn through the fuse control file
// system, mounted for the occasion on a private directory when
// /sys/fs/fuse/connections is not (fusectl is one instance: mounting it
// again shows the same connections).
func abortFuseConn(t *testing.T, conn uint64) error {
	dir := "/sys/fs/fuse/connections"
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprint(conn))); err != nil {
		dir = filepath.Join(t.TempDir(), "fusectl")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
		if err := unix.Mount("fusectl", dir, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("mounting fusectl: %w", err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprint(conn), "abort"), []byte("1"), 0)
}
