package tests

// systemd readiness (docs/systemd.md): with $NOTIFY_SOCKET set, the
// foreground mount and --daemon send READY=1 once the mount answers and
// STOPPING=1 when it goes away. A unixgram socket stands in for systemd;
// SO_PASSCRED tells which process sent each message.

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifySocket is a fake systemd notification socket.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

// newNotifySocket listens on a unixgram socket in a new temporary
// directory, with SO_PASSCRED on so that each message carries its sender's
// pid; both go in t.Cleanup.
func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn") // short: sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1) })
	if serr != nil {
		t.Fatal(serr)
	}
	return &notifySocket{path: path, conn: conn}
}

// notifyMsg is one message: its KEY=VALUE assignments and the sender's pid.
type notifyMsg struct {
	vars map[string]string
	pid  int
}

// read waits (up to cliFailsafe) for the next message.
func (n *notifySocket) read(t *testing.T) notifyMsg {
	t.Helper()
	n.conn.SetReadDeadline(time.Now().Add(cliFailsafe))
	buf, oob := make([]byte, 4096), make([]byte, 1024)
	nb, noob, _, _, err := n.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	m := notifyMsg{vars: map[string]string{}}
	for _, line := range strings.Split(string(buf[:nb]), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m.vars[k] = v
		}
	}
	msgs, _ := syscall.ParseSocketControlMessage(oob[:noob])
	for _, cm := range msgs {
		if cred, err := syscall.ParseUnixCredentials(&cm); err == nil {
			m.pid = int(cred.Pid)
		}
	}
	return m
}

// TestSystemdNotifyForeground runs the foreground mount under a fake
// NOTIFY_SOCKET: READY=1 from the mount process once the mount answers,
// STOPPING=1 on SIGTERM, then a clean exit.
func TestSystemdNotifyForeground(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	sock := newNotifySocket(t)
	fg := startForeground(t, dm.tmp, append(os.Environ(), "NOTIFY_SOCKET="+sock.path), false, "--state-dir", dm.state, dm.ws, dm.mnt)
	pid := fg.cmd.Process.Pid

	m := sock.read(t)
	if m.vars["READY"] != "1" || m.pid != pid {
		t.Fatalf("first notification %v from pid %d, want READY=1 from the mount (pid %d)", m.vars, m.pid, pid)
	}
	if !strings.Contains(m.vars["STATUS"], dm.mnt) || m.vars["MAINPID"] != "" {
		t.Errorf("READY message %v: want STATUS naming %s and no MAINPID (the sender is the main process)", m.vars, dm.mnt)
	}
	// READY=1 means the mount answers now.
	if b, err := os.ReadFile(filepath.Join(dm.mnt, "f")); err != nil || string(b) != "x\n" {
		t.Fatalf("after READY=1, reading through the mount: %q %v", b, err)
	}
	if err := fg.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m = sock.read(t)
	if m.vars["STOPPING"] != "1" || m.pid != pid {
		t.Fatalf("after SIGTERM: %v from pid %d, want STOPPING=1 from %d", m.vars, m.pid, pid)
	}
	if err := fg.wait(); err != nil {
		t.Fatalf("mount exited with %v after SIGTERM:\n%s", err, fg.output())
	}
	if isMounted(t, dm.mnt) {
		t.Fatal("still mounted after SIGTERM")
	}
}

// TestSystemdNotifyDaemon runs `mount --daemon` under a fake NOTIFY_SOCKET:
// the parent sends READY=1 with MAINPID= the daemon's pid (the pid the
// mount's status reports), and the daemon sends STOPPING=1 when unmounted.
func TestSystemdNotifyDaemon(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	sock := newNotifySocket(t)
	cmd := cliCommand(t, dm.tmp, append(os.Environ(), "NOTIFY_SOCKET="+sock.path), "mount", "--daemon", "--state-dir", dm.state, dm.ws, dm.mnt)
	if out, err := runCombined(t, cmd); err != nil {
		t.Fatalf("mount --daemon: %v\n%s", err, out)
	}
	pid := dm.adopt()
	m := sock.read(t)
	if m.vars["READY"] != "1" || m.pid != cmd.Process.Pid {
		t.Fatalf("notification %v from pid %d, want READY=1 from the --daemon parent (pid %d)", m.vars, m.pid, cmd.Process.Pid)
	}
	if m.vars["MAINPID"] != strconv.Itoa(pid) {
		t.Fatalf("READY message %v: want MAINPID=%d (the daemon serving the mount)", m.vars, pid)
	}
	if out, err := cli(t, dm.tmp, "unmount", dm.mnt); err != nil {
		t.Fatalf("unmount: %v\n%s", err, out)
	}
	m = sock.read(t)
	if m.vars["STOPPING"] != "1" || m.pid != pid {
		t.Fatalf("after unmount: %v from pid %d, want STOPPING=1 from the daemon (pid %d)", m.vars, m.pid, pid)
	}
	dm.waitDaemon()
}

// TestSystemdUnitFile checks the example unit (docs/rubinofs@.service) is
// a Type=notify unit running the foreground mount, and has systemd verify
// it where systemd-analyze is installed (with the unit's binary path
// pointed at the built CLI).
func TestSystemdUnitFile(t *testing.T) {
	b, err := os.ReadFile("../docs/rubinofs@.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{"\nType=notify\n", "\nExecStart=/usr/local/bin/rubinofs mount ", "\nKillMode=mixed\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("docs/rubinofs@.service lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(unit, "--daemon") {
		t.Error("the example unit should run the foreground mount (Type=notify follows it directly)")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: unit not verified by systemd")
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rubinofs@srv-agent-mnt.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/rubinofs", rubinofsBin(t))), 0o644)
	out, _ := exec.Command(analyze, "verify", path).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "rubinofs@") && !strings.Contains(line, "EnvironmentFile") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}
