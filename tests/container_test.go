package tests

// Containers (docs/containers.md): a mount made on the
// host, bind-mounted into a "container" (a private mount and pid namespace
// from unshare(1) whose root, after chroot, is a tmpfs holding only the
// mount at /ws, the rubinofs binary and a read-only /usr as its image). The
// agent inside works through the control files alone: .rubino/status,
// `rubinofs status`, `rubinofs run`, `rubinofs agents`. The namespace, and
// every mount made in it, dies with its last process.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// containerSetup runs as root in the new namespaces (unshare -m -p -f):
// $1 the new root (an empty directory), $2 the rubinofs mount on the host,
// $3 the rubinofs binary; $AGENT is the agent's script, run by sh in the
// chroot with a clean environment, in /ws.
const containerSetup = `set -eu
ROOT=$1 MNT=$2 BIN=$3
mount -t tmpfs -o mode=755 tmpfs "$ROOT"
mkdir -p "$ROOT/ws" "$ROOT/usr" "$ROOT/proc" "$ROOT/dev" "$ROOT/tmp" "$ROOT/opt/rubinofs"
mount --bind "$MNT" "$ROOT/ws"
mount --bind /usr "$ROOT/usr"
mount -o remount,bind,ro "$ROOT/usr"
for d in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$ROOT/$d"
  elif [ -d "/$d" ]; then mkdir "$ROOT/$d"; mount --bind "/$d" "$ROOT/$d"; mount -o remount,bind,ro "$ROOT/$d"
  fi
done
cp "$BIN" "$ROOT/opt/rubinofs/rubinofs"
touch "$ROOT/dev/null"
mount --bind /dev/null "$ROOT/dev/null"
mount -t proc proc "$ROOT/proc"
cd /
exec chroot "$ROOT" /usr/bin/env -i PATH=/opt/rubinofs:/usr/bin:/bin HOME=/tmp sh -c "cd /ws && $AGENT"
`

// containerAgent is what the agent does inside; each step prints a marker
// the test looks for. BACKING is the workspace's host path (@BACKING@ in
// the task's prompt, replaced by the test).
const containerAgent = `echo "root: $(ls / | tr '\n' ' ')"
test -e "$BACKING" && echo "backing visible" || echo "backing hidden"
echo "mounts: $(cut -d' ' -f2 /proc/mounts | tr '\n' ' ')"
grep -q '"workspace"' /ws/.rubino/status && echo "status file read"
rubinofs status
if echo blind > g 2>/dev/null; then echo "blind write allowed"; else echo "blind write refused: $(cat .rubino/guard/why)"; fi
rubinofs run --session agent1 -- sh -c 'cat g >/dev/null && echo edited > g && echo "edited as $RUBINO_SESSION in $RUBINO_MOUNT" && cat /ws/.rubino/self/info'
id=$(rubinofs agents spawn 'echo from-task-$((6*7)) in $(pwd); test -e @BACKING@ && echo task sees the backing || echo task: backing hidden')
echo "task $id: $(rubinofs agents wait "$id")"
`

// TestContainerSeesOnlyTheMount runs an agent in a container-like
// namespace that sees nothing of the host but the mount, and checks what it
// can do there; then that nothing of the namespace is left on the host.
func TestContainerSeesOnlyTheMount(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	if os.Geteuid() != 0 {
		t.Skip("container test: needs root for unshare -m -p and chroot")
	}
	for _, tool := range []string{"unshare", "chroot", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("container test: no %s (util-linux, coreutils)", tool)
		}
	}
	os.WriteFile(filepath.Join(dm.ws, "g"), []byte("other\n"), 0o644)
	dm.mountDaemon()

	root := filepath.Join(dm.tmp, "root")
	setup := filepath.Join(dm.tmp, "setup.sh")
	os.Mkdir(root, 0o755)
	os.WriteFile(setup, []byte(containerSetup), 0o644)
	// --kill-child: if unshare dies, the namespace's init goes too.
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
		"sh", setup, root, dm.mnt, rubinofsBin(t))
	cmd.Dir = dm.tmp
	agent := strings.ReplaceAll(containerAgent, "@BACKING@", dm.ws) // literal: the task has the agent's environment
	cmd.Env = append(os.Environ(), "AGENT="+agent, "BACKING="+dm.ws)
	out, err := runCombined(t, cmd)
	t.Logf("inside the container:\n%s", out)
	if err != nil {
		t.Fatalf("the agent's namespace: %v\n%s", err, out)
	}
	for _, want := range []string{
		"backing hidden",          // the host's workspace path does not exist inside
		"status file read",        // cat /ws/.rubino/status
		"mount:      /ws",         // rubinofs status finds the mount around its cwd
		"workspace:  " + dm.ws,    // and reports the host's workspace
		"blind write refused: ",   // the guard holds inside the container
		"edited as agent1 in /ws", // rubinofs run registered a session
		`"name": "agent1"`,        // and the process runs in it
		"from-task-42 in /ws",     // rubinofs agents spawn/wait: the task runs in the container
		"task: backing hidden",    // and sees no more of the host than the agent
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inside the container: no %q in\n%s", want, out)
		}
	}
	// The root holds only the mount, the binary, the image and the
	// pseudo file systems.
	var rootLine, mountsLine string
	for _, l := range strings.Split(out, "\n") {
		if r, ok := strings.CutPrefix(l, "root: "); ok {
			rootLine = r
		}
		if m, ok := strings.CutPrefix(l, "mounts: "); ok {
			mountsLine = m
		}
	}
	for _, e := range strings.Fields(rootLine) {
		switch e {
		case "ws", "opt", "usr", "proc", "dev", "tmp", "bin", "sbin", "lib", "lib32", "lib64", "libx32":
		default:
			t.Errorf("unexpected %q in the container's root: %s", e, rootLine)
		}
	}
	for _, m := range strings.Fields(mountsLine) {
		if strings.HasPrefix(m, dm.tmp) || strings.HasPrefix(m, dm.ws) {
			t.Errorf("the container sees a host path mounted: %s (all: %s)", m, mountsLine)
		}
	}
	if !strings.Contains(" "+mountsLine, " /ws ") {
		t.Errorf("the container does not see /ws mounted: %s", mountsLine)
	}
	if b, _ := os.ReadFile(filepath.Join(dm.ws, "g")); string(b) != "edited\n" {
		t.Errorf("backing g = %q, want the session's edit", b)
	}
	// The namespace died with its processes: its tmpfs root never
	// appeared on the host, and the host's mount is no longer held.
	if isMounted(t, root) {
		t.Errorf("%s is mounted on the host", root)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("the host's %s is not empty: %v", root, ents)
	}
	dm.unmount()
}
