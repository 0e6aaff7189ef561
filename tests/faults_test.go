package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// Fault tests (docs/RELIABILITY.md): a daemon killed with SIGKILL, the
// durability of acknowledged writes, unmounting a busy mount, and full
// disks under the state directory and the workspace. They drive the real
// CLI binary (`rubinofs mount --daemon`), whose daemon this test process
// adopts as a child subreaper, so every daemon is reaped and waited for
// before a test returns. They synchronise on files, status and /proc with
// deadlines (cliFailsafe bounds a hang), never on sleeps.

// kill9 kills the daemon with SIGKILL and waits until it is reaped.
func (m *cliMount) kill9() {
	m.t.Helper()
	if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil {
		m.t.Fatalf("kill -9 %d: %v", m.pid, err)
	}
	if !waitPidGone(m.pid) {
		m.t.Fatalf("daemon %d survived SIGKILL", m.pid)
	}
	m.exited(m.pid)
}

// requireDead checks that the mountpoint reports ENOTCONN for what reaches
// the daemon: statfs (never cached by FUSE) and opening the directory.
// stat(2) may still succeed: the kernel answers it from the attribute
// cache without asking the (dead) daemon.
func (m *cliMount) requireDead() {
	m.t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(m.mnt, &st); !errors.Is(err, syscall.ENOTCONN) {
		m.t.Fatalf("statfs of the dead mount: %v, want ENOTCONN", err)
	}
	if _, err := os.ReadDir(m.mnt); !errors.Is(err, syscall.ENOTCONN) {
		m.t.Fatalf("listing the dead mount: %v, want ENOTCONN", err)
	}
	if !m.mounted() {
		m.t.Fatal("the dead mount left the mount table by itself")
	}
}

// sh runs script with /bin/sh, cd'd into the mount, and returns its output
// and exit status.
func (m *cliMount) sh(script string) (string, int) {
	m.t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "cd "+shq(m.mnt)+" && "+script)
	cmd.Dir = m.tmp
	cmd.Env = append(testEnv(m.tmp), "PATH="+filepath.Dir(rubinofsBin(m.t))+":"+os.Getenv("PATH"))
	out, err := runCombined(m.t, cmd)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		m.t.Fatalf("%s: %v", script, err)
	}
	return out, exitCode(err)
}

// tinyTmpfs mounts a tmpfs of size bytes at dir, unmounted in t.Cleanup
// (call it before anything that uses it, so its cleanup runs last). Root
// only: the test is skipped otherwise.
func tinyTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs %s: %v; detaching", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// fill writes zeros to path until the file system is full (ENOSPC).
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			break
		}
	}
	// Any partial page is written byte by byte so nothing is left.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
}

// TestFaultsKillDaemonUnmount: after kill -9 of the daemon the mountpoint
// reports ENOTCONN, `rubinofs unmount` clears it, and the mountpoint is a
// plain empty directory again.
func TestFaultsKillDaemonUnmount(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	m.mountDaemon()
	tmp, ws := m.tmp, m.ws
	if b, err := os.ReadFile(m.path("f")); err != nil || string(b) != "x\n" {
		t.Fatalf("read through the mount: %q %v", b, err)
	}
	m.kill9()
	m.requireDead()
	if out, code := cliCode(t, tmp, "unmount", m.mnt); code != 0 {
		t.Fatalf("unmount of the dead mount: exit %d\n%s", code, out)
	}
	if m.mounted() {
		t.Fatal("still in the mount table after rubinofs unmount")
	}
	ents, err := os.ReadDir(m.mnt)
	if err != nil || len(ents) != 0 {
		t.Fatalf("the mountpoint is not a plain empty directory again: %v %v", ents, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "x\n" {
		t.Fatalf("workspace changed: %q", b)
	}
	// Unmounting a plain directory is a clear error.
	if out, code := cliCode(t, tmp, "unmount", m.mnt); code == 0 || !strings.Contains(out, "not a mount point") {
		t.Fatalf("unmount of a plain directory: exit %d\n%s", code, out)
	}
}

// TestFaultsKillDaemonRemount: `rubinofs mount` on the stale mountpoint
// left by kill -9 clears it itself and serves the workspace, and the read
// state checkpointed before the kill is restored (a read-then-write needs
// no second read).
func TestFaultsKillDaemonRemount(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "one\n", "g": "two\n", "h": "three\n"})
	m.mountDaemon("--save-interval", "20ms")
	ws := m.ws
	if b, err := os.ReadFile(m.path("f")); err != nil || string(b) != "one\n" {
		t.Fatalf("read through the mount: %q %v", b, err)
	}
	// The checkpoint after the read (status "state.saves").
	waitFor(t, "a read-state checkpoint", func() bool {
		st, _ := m.status()["state"].(map[string]any)
		n, _ := st["saves"].(float64)
		return n >= 1
	})
	m.kill9()
	m.requireDead()
	out := m.mountDaemon()
	if !strings.Contains(out, "cleared a dead rubinofs mount") {
		t.Errorf("mount did not say it cleared the dead mount:\n%s", out)
	}
	if b, err := os.ReadFile(m.path("g")); err != nil || string(b) != "two\n" {
		t.Fatalf("read through the new mount: %q %v", b, err)
	}
	// f was read before the kill: its record came back from the checkpoint.
	if out, code := m.sh("echo edited > f"); code != 0 {
		t.Fatalf("overwrite of a file read before the kill: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "edited\n" {
		t.Fatalf("f = %q", b)
	}
	// A file never read is still guarded.
	if out, code := m.sh("echo blind > h"); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("blind overwrite after the restart: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "h")); string(b) != "three\n" {
		t.Fatalf("h = %q after a refused overwrite", b)
	}
	// Only one mount is stacked there: the dead one is gone.
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if n := strings.Count(string(b), " "+m.mnt+" "); n != 1 {
		t.Fatalf("%d mounts at %s, want 1", n, m.mnt)
	}
}

// TestFaultsKillDaemonWithTask: a daemon killed while a task runs a
// command in the mount still leaves a mount that fails fast with ENOTCONN.
// The task's shell dies with the daemon (its parent-death signal) but the
// command it forked lives on; had it inherited the daemon's /dev/fuse
// descriptor (go-fuse opens it without close-on-exec), the FUSE connection
// would stay open and every access to the mountpoint would hang instead.
func TestFaultsKillDaemonWithTask(t *testing.T) {
	m := cliDirs(t, nil)
	m.mountDaemon()
	tmp := m.tmp
	out, code := m.sh(`exec 3<>.rubino/agents/clone && { printf '%s\n' 'subagent=sh prompt=sleep 600; true' >&3; read id <&3; echo "$id"; }`)
	id := strings.TrimSpace(out)
	if _, err := strconv.Atoi(id); code != 0 || err != nil {
		t.Fatalf("spawning a task: exit %d %q", code, out)
	}
	var pgid int
	waitFor(t, "the task's pid", func() bool {
		b, _ := os.ReadFile(m.path(".rubino/agents/" + id + "/activity"))
		sm := regexp.MustCompile(`started pid (\d+)`).FindSubmatch(b)
		if sm != nil {
			pgid, _ = strconv.Atoi(string(sm[1]))
		}
		return sm != nil
	})
	// The task's processes outlive the daemon (reparented to this process,
	// the subreaper): kill and reap their process group (the task is a
	// session and process group leader) at the end.
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		deadline := time.Now().Add(cliFailsafe)
		for time.Now().Before(deadline) {
			var ws unix.WaitStatus
			if _, err := unix.Wait4(-pgid, &ws, unix.WNOHANG, nil); errors.Is(err, unix.ECHILD) {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Errorf("the task's processes (group %d) did not exit", pgid)
	})
	// The forked sleep runs: the shell has its child.
	waitFor(t, "the task's command", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pgid, pgid))
		return len(strings.Fields(string(b))) > 0
	})
	m.kill9()
	// In a child process, so that a hang is bounded and killable.
	var probe bytes.Buffer
	stat := exec.Command("stat", "-f", m.mnt)
	stat.Stdout, stat.Stderr = &probe, &probe
	hung, err := runBounded(stat)
	if hung {
		t.Fatalf("statfs of the mount hung after the daemon was killed: the FUSE connection is still open (a leaked /dev/fuse descriptor?)")
	}
	if err == nil || !strings.Contains(probe.String(), "Transport endpoint is not connected") {
		t.Fatalf("statfs after the kill: %v, want ENOTCONN\n%s", err, probe.String())
	}
	if out, code := cliCode(t, tmp, "unmount", m.mnt); code != 0 {
		t.Fatalf("unmount of the dead mount: exit %d\n%s", code, out)
	}
}

// faultsBlock is block i of the durability writer: blockSize bytes that
// name i.
func faultsBlock(i int) []byte {
	b := bytes.Repeat([]byte(fmt.Sprintf("block %08d|", i)), faultsBlockSize/15+1)
	return b[:faultsBlockSize]
}

const (
	faultsBlockSize = 512
	faultsMaxBlocks = 20000 // the writer pauses here if it was not stopped
)

// TestFaultsWriterHelper is the durability writer, run as a child process
// of TestFaultsDurableWrites (the test binary re-executed with
// RUBINOFS_FAULTS_WRITER=1): it appends numbered blocks to
// $RUBINOFS_FAULTS_FILE, fsyncs after each and then appends the block's
// number to $RUBINOFS_FAULTS_LOG (outside the mount). At faultsMaxBlocks it
// waits for stdin to close, then writes once more. On the first failure it
// prints the errno and exits 3.
func TestFaultsWriterHelper(t *testing.T) {
	if os.Getenv("RUBINOFS_FAULTS_WRITER") != "1" {
		t.Skip("the durability writer runs as a child of TestFaultsDurableWrites")
	}
	fail := func(what string, i int, err error) {
		name := "other"
		switch {
		case errors.Is(err, syscall.ENOTCONN):
			name = "ENOTCONN"
		case errors.Is(err, syscall.ECONNABORTED):
			name = "ECONNABORTED" // the request in flight when the connection was aborted
		}
		fmt.Printf("%s block %d: errno=%s: %v\n", what, i, name, err)
		os.Exit(3)
	}
	f, err := os.OpenFile(os.Getenv("RUBINOFS_FAULTS_FILE"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		fail("create", -1, err)
	}
	lg, err := os.OpenFile(os.Getenv("RUBINOFS_FAULTS_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Println(err)
		os.Exit(4)
	}
	for i := 0; ; i++ {
		if i == faultsMaxBlocks {
			io.Copy(io.Discard, os.Stdin)
		}
		if _, err := f.Write(faultsBlock(i)); err != nil {
			fail("write", i, err)
		}
		if err := f.Sync(); err != nil {
			fail("fsync", i, err)
		}
		if _, err := fmt.Fprintf(lg, "%d\n", i); err != nil {
			fmt.Println(err)
			os.Exit(4)
		}
	}
}

// TestFaultsDurableWrites: a writer appends blocks through the mount and
// fsyncs each; the daemon is killed with SIGKILL once 64 blocks are
// acknowledged (synchronised on the writer's log); the writer's next call
// fails with ENOTCONN (or ECONNABORTED, for the call in flight at the
// kill), and every acknowledged block is in the backing file byte for byte.
func TestFaultsDurableWrites(t *testing.T) {
	m := cliDirs(t, nil)
	m.mountDaemon()
	tmp, ws := m.tmp, m.ws
	logPath := filepath.Join(tmp, "acked.log")
	ctx, cancel := context.WithTimeout(context.Background(), cliFailsafe)
	defer cancel()
	w := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFaultsWriterHelper$")
	w.Dir = tmp
	w.Env = append(os.Environ(), "RUBINOFS_FAULTS_WRITER=1",
		"RUBINOFS_FAULTS_FILE="+m.path("data.bin"), "RUBINOFS_FAULTS_LOG="+logPath)
	var wout bytes.Buffer
	w.Stdout, w.Stderr = &wout, &wout
	stdin, err := w.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		stdin.Close()
		if !waited {
			w.Process.Kill()
			w.Wait()
		}
	}()
	acked := func() []int {
		b, _ := os.ReadFile(logPath)
		var n []int
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if i, err := strconv.Atoi(strings.TrimSuffix(line, "\n")); err == nil && strings.HasSuffix(line, "\n") {
				n = append(n, i)
			}
		}
		return n
	}
	const killAt = 64
	waitFor(t, "64 acknowledged blocks", func() bool { return len(acked()) >= killAt })
	m.kill9()
	m.requireDead()
	stdin.Close() // a writer paused at faultsMaxBlocks writes once more
	werr := w.Wait()
	waited = true
	if ctx.Err() != nil {
		t.Fatalf("the writer hung after the kill\n%s", wout.String())
	}
	if werr == nil || !(strings.Contains(wout.String(), "errno=ENOTCONN") || strings.Contains(wout.String(), "errno=ECONNABORTED")) {
		t.Fatalf("writer after the kill: %v, want a failure with ENOTCONN or ECONNABORTED\n%s", werr, wout.String())
	}
	got := acked()
	backing, err := os.ReadFile(filepath.Join(ws, "data.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range got {
		if i != k {
			t.Fatalf("log line %d names block %d", k, i)
		}
		off := i * faultsBlockSize
		if off+faultsBlockSize > len(backing) || !bytes.Equal(backing[off:off+faultsBlockSize], faultsBlock(i)) {
			t.Fatalf("acknowledged block %d (of %d) is not in the backing file (%d bytes)", i, len(got), len(backing))
		}
	}
	t.Logf("%d blocks acknowledged before the kill, all in the backing file; writer: %s", len(got), strings.TrimSpace(wout.String()))
	if out, code := cliCode(t, tmp, "unmount", m.mnt); code != 0 {
		t.Fatalf("unmount of the dead mount: exit %d\n%s", code, out)
	}
}

// TestFaultsBusyUnmount: with a file held open by a child process and a
// running task, `rubinofs unmount` refuses (exit 16, "busy") at once and
// the mount keeps serving; then (clean) the task is stopped and the file
// closed, and the unmount succeeds, or (lazy) `unmount --lazy` detaches it,
// the daemon stops the task and serves the still-open file, and exits when
// it is closed.
func TestFaultsBusyUnmount(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		name := map[bool]string{false: "clean", true: "lazy"}[lazy]
		t.Run(name, func(t *testing.T) {
			m := cliDirs(t, map[string]string{"held": "held content\n"})
			m.mountDaemon()
			tmp := m.tmp

			// A child holds a file of the mount open (its stdin).
			hf, err := os.Open(m.path("held"))
			if err != nil {
				t.Fatal(err)
			}
			holder := exec.Command("sleep", "600")
			holder.Stdin = hf
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			hf.Close()
			holderDone := false
			stopHolder := func() {
				if !holderDone {
					holder.Process.Kill()
					holder.Wait()
					holderDone = true
				}
			}
			t.Cleanup(stopHolder)

			// A running task, started through the clone file.
			out, code := m.sh(`exec 3<>.rubino/agents/clone && { printf '%s\n' 'subagent=sh prompt=sleep 600' >&3; read id <&3; echo "$id"; }`)
			id := strings.TrimSpace(out)
			if _, err := strconv.Atoi(id); code != 0 || err != nil {
				t.Fatalf("spawning a task: exit %d %q", code, out)
			}
			taskStatus := func() string {
				b, _ := os.ReadFile(m.path(".rubino/agents/" + id + "/status"))
				return strings.TrimSpace(string(b))
			}
			waitFor(t, "the task to run", func() bool { return taskStatus() == "running" })

			out, code = cliCode(t, tmp, "unmount", m.mnt)
			if code != 16 || !strings.Contains(out, "busy") {
				t.Fatalf("unmount of a busy mount: exit %d, want 16 and a message saying busy\n%s", code, out)
			}
			if !m.mounted() || taskStatus() != "running" {
				t.Fatalf("the refused unmount changed something: mounted %v, task %s", m.mounted(), taskStatus())
			}
			if b, err := os.ReadFile(m.path("held")); err != nil || string(b) != "held content\n" {
				t.Fatalf("the mount stopped serving after a refused unmount: %q %v", b, err)
			}

			if !lazy {
				if err := os.WriteFile(m.path(".rubino/agents/"+id+"/ctl"), []byte("stop\n"), 0); err != nil {
					t.Fatalf("stop: %v", err)
				}
				stopHolder()
				// The task's processes exit asynchronously: retry the
				// unmount while it is still busy.
				waitFor(t, "the unmount to succeed", func() bool {
					out, code = cliCode(t, tmp, "unmount", m.mnt)
					if code != 0 && code != 16 {
						t.Fatalf("unmount: exit %d\n%s", code, out)
					}
					return code == 0
				})
			} else {
				// This process keeps a file open across the detach.
				kept, err := os.Open(m.path("held"))
				if err != nil {
					t.Fatal(err)
				}
				defer kept.Close()
				if out, code := cliCode(t, tmp, "unmount", "--lazy", m.mnt); code != 0 {
					t.Fatalf("unmount --lazy: exit %d\n%s", code, out)
				}
				if m.mounted() {
					t.Fatal("still in the mount table after unmount --lazy")
				}
				stopHolder()
				// The open file is still served by the daemon.
				b, err := io.ReadAll(kept)
				if err != nil || string(b) != "held content\n" {
					t.Fatalf("reading a file kept open across the detach: %q %v", b, err)
				}
				if gone(m.pid) {
					t.Fatal("the daemon exited while a file of its detached mount was open")
				}
				kept.Close()
			}
			// The daemon exits by itself once nothing holds the mount (for
			// lazy: only if it stopped its task at the detach).
			m.waitDaemon()
			if m.mounted() {
				t.Fatal("still mounted")
			}
		})
	}
}

// TestFaultsFullStateDir: with the state directory on a full tmpfs the
// guard keeps deciding through the mount (a read-then-write passes, a blind
// overwrite is refused and logged in guard/denials), the failure to save
// the read state shows in .rubino/status under "state", and once space is
// freed the next checkpoint succeeds.
func TestFaultsFullStateDir(t *testing.T) {
	tmp := t.TempDir()
	stateFS := filepath.Join(tmp, "statefs")
	tinyTmpfs(t, stateFS, 4<<20)
	ws := makeWorkspace(t, tmp, map[string]string{"f": "one\n", "g": "two\n"})
	state := filepath.Join(stateFS, "state")
	m := newCLIMount(t, tmp, ws, state, "--save-interval", "20ms")
	filler := filepath.Join(stateFS, "filler")
	fill(t, filler)

	if out, code := m.sh("cat f >/dev/null && echo edited > f"); code != 0 {
		t.Fatalf("read-then-write with a full state disk: exit %d\n%s", code, out)
	}
	if out, code := m.sh("echo blind > g"); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("blind overwrite with a full state disk: exit %d\n%s", code, out)
	}
	for name, want := range map[string]string{"f": "edited\n", "g": "two\n"} {
		if b, _ := os.ReadFile(filepath.Join(ws, name)); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
	if b, err := os.ReadFile(m.path(".rubino/guard/denials")); err != nil || !strings.Contains(string(b), `"path":"g"`) {
		t.Errorf("denials: %v\n%s", err, b)
	}
	var st map[string]any
	waitFor(t, "status to show the failed save", func() bool {
		st, _ = m.status()["state"].(map[string]any)
		e, _ := st["last_error"].(string)
		return strings.Contains(e, "no space left on device")
	})
	if st["dir"] != state {
		t.Errorf("state.dir = %v, want %s", st["dir"], state)
	}
	// reads.json was never half written.
	if b, err := os.ReadFile(filepath.Join(state, "reads.json")); err == nil && !json.Valid(b) {
		t.Errorf("reads.json is not valid JSON after failed saves:\n%s", b)
	}
	// Space comes back: the next checkpoint succeeds and clears the error.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a successful checkpoint", func() bool {
		st, _ = m.status()["state"].(map[string]any)
		n, _ := st["saves"].(float64)
		_, failing := st["last_error"]
		return n >= 1 && !failing
	})
	m.unmount()
}

// trackedHash returns the hash guard/tracked (the caller's session) shows
// for path, or "" when there is no record.
func (m *cliMount) trackedHash(path string) string {
	m.t.Helper()
	b, err := os.ReadFile(m.path(".rubino/guard/tracked"))
	if err != nil {
		m.t.Fatalf("tracked: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Split(sc.Text(), "\t"); len(f) == 3 && f[2] == path {
			return f[1]
		}
	}
	return ""
}

// xxh3Hex is the xxh3-128 of b as guard/tracked prints it.
func xxh3Hex(b []byte) string {
	h := xxh3.Hash128(b).Bytes()
	return hex.EncodeToString(h[:])
}

// TestFaultsFullWorkspace: with the workspace on a tiny tmpfs, an append
// through the mount that does not fit gets ENOSPC; the session's record of
// the file then matches the bytes actually in the backing file (or there is
// none), also after a write that failed with nothing written; once space is
// freed the session's read-then-write works, and another session's blind
// write is still refused.
func TestFaultsFullWorkspace(t *testing.T) {
	tmp := t.TempDir()
	wsFS := filepath.Join(tmp, "wsfs")
	tinyTmpfs(t, wsFS, 1<<20)
	ws := filepath.Join(wsFS, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newCLIMount(t, tmp, ws, filepath.Join(tmp, "state"))

	checkRecord := func(when string) {
		t.Helper()
		backing, err := os.ReadFile(filepath.Join(ws, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.trackedHash("f"); got != "" && got != xxh3Hex(backing) {
			t.Fatalf("%s: the record of f claims %s, the backing file (%d bytes) hashes %s", when, got, len(backing), xxh3Hex(backing))
		}
	}
	out, code := m.sh("cat f >/dev/null && head -c 4194304 /dev/zero >> f")
	if code == 0 || !strings.Contains(out, "No space left on device") {
		t.Fatalf("a write that does not fit: exit %d, want ENOSPC\n%s", code, out)
	}
	checkRecord("after a partial write")
	// The disk is full: this write fails with nothing written. (This
	// process is in the same session as the shells: default.)
	af, err := os.OpenFile(m.path("f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write([]byte("more")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write to a full disk: %v, want ENOSPC", err)
	}
	if err := af.Close(); err != nil {
		t.Fatalf("close after ENOSPC: %v", err)
	}
	checkRecord("after a failed write")
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); !bytes.HasPrefix(b, []byte("original\n")) || bytes.Contains(b, []byte("more")) {
		t.Fatalf("backing f: %d bytes, prefix %q", len(b), b[:min(len(b), 16)])
	}
	// Space comes back (the read-then-write truncates f): the same
	// session may edit, another session may not overwrite blindly.
	if out, code := m.sh("cat f >/dev/null && echo fixed > f"); code != 0 {
		t.Fatalf("read-then-write after space was freed: exit %d\n%s", code, out)
	}
	checkRecord("after the edit")
	if got := m.trackedHash("f"); got != xxh3Hex([]byte("fixed\n")) {
		t.Fatalf("record after the edit: %q", got)
	}
	out, code = m.sh("rubinofs run --session other --mount . -- sh -c 'echo blind > f'")
	if code == 0 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("another session's blind write: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "fixed\n" {
		t.Fatalf("f = %q after the refused write", b)
	}
}
