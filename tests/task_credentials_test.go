package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// Real-mount tests of docs/DESIGN.md#task-credentials: a task runs as the
// process that spawned it (uid, groups, environment, namespaces), never as
// the daemon.

// daemonOnlyVar is set in the daemon's environment (this test process's)
// and in no spawner's: a task must never see it.
const daemonOnlyVar = "RUBINO_TEST_DAEMON_ONLY"

// nobodyMount mounts a workspace that uid 65534 reaches only through the
// mount (allow_other): the backing directory lies in a directory of mode
// 0700, while the mountpoint, the CLI binary (copied to bin/) and the test
// directory are reachable by anyone. notes.md (mode 0666) was never read
// by anyone. It returns the mount and the CLI's path.
func nobodyMount(t *testing.T, adjust func(*daemon.Config)) (*mount, string) {
	t.Helper()
	t.Setenv(daemonOnlyVar, "leaked")
	m := newMount(t, nil, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		private := filepath.Join(filepath.Dir(c.Workspace), "private")
		if err := os.Mkdir(private, 0o700); err != nil {
			t.Fatal(err)
		}
		c.Workspace = filepath.Join(private, "ws")
		if err := os.Mkdir(c.Workspace, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.Workspace, "notes.md"), []byte("orig\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(c.Workspace, "notes.md"), 0o666) // past the umask
		if adjust != nil {
			adjust(c)
		}
	})
	for _, d := range []string{m.tmp, filepath.Dir(m.tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := sharedBin(t)
	return m, bin
}

// spawnScript is a shell command that spawns prompt with the CLI and
// prints the task's id.
func spawnScript(bin, mnt, prompt string) string {
	return shq(bin) + " agents spawn --mount " + shq(mnt) + " " + shq(prompt)
}

// waitTask waits for task id with the CLI (as root) and returns what it
// printed.
func waitTask(t *testing.T, bin, mnt, id string) string {
	t.Helper()
	out, err := runCLI(t, "", nil, "agents", "wait", "--mount", mnt, id)
	if err != nil {
		t.Fatalf("agents wait %s: %v\n%s", id, err, out)
	}
	return out
}

// probe is what a task reports about itself: its uid and groups, whether
// it reads /etc/shadow, writes an unread file through the mount and the
// backing file directly, whether the daemon's environment reached it, and
// where it runs.
func probe(ws string) string {
	return `echo uid=$(id -u) groups=$(id -G)
head -c 40 /etc/shadow >/dev/null 2>&1 && echo shadow-read || echo shadow-refused
echo x 2>/dev/null > notes.md && echo mount-wrote || echo mount-refused
echo x 2>/dev/null > ` + shq(filepath.Join(ws, "notes.md")) + ` && echo backing-wrote || echo backing-refused
echo env=${` + daemonOnlyVar + `-absent} session=$RUBINO_SESSION pwd=$(pwd)`
}

// TestTaskRunsAsItsSpawner: uid 65534 spawns through the CLI; the task is
// uid 65534 with no groups, cannot read /etc/shadow, cannot write the
// backing workspace (it could not either), is guarded in its own session
// owned by 65534, starts in the mount and has none of the daemon's
// environment. On a daemon that runs tasks as itself it prints uid=0 and
// writes the backing file.
func TestTaskRunsAsItsSpawner(t *testing.T) {
	m, bin := nobodyMount(t, nil)
	out, err := m.sh(asNobody + spawnScript(bin, m.mnt, probe(m.ws)))
	if err != nil {
		t.Fatalf("spawn as nobody: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	got := waitTask(t, bin, m.mnt, id)
	want := "uid=65534 groups=65534\nshadow-refused\nmount-refused\nbacking-refused\nenv=absent session=task-" + id + " pwd=" + m.mnt + "\n"
	if got != want {
		t.Fatalf("task of uid 65534 printed\n%s\nwant\n%s", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(m.ws, "notes.md")); string(b) != "orig\n" {
		t.Fatalf("notes.md is %q: the task wrote it", b)
	}
	found := false
	for _, si := range m.d.Sessions.List() {
		if si.Name == "task-"+id {
			found = true
			if si.Owner != 65534 {
				t.Errorf("session %s is owned by uid %d, want 65534", si.Name, si.Owner)
			}
		}
	}
	if !found {
		t.Errorf("no session task-%s", id)
	}
}

// TestGuardedSessionTaskStaysGuarded: an agent in a guarded session (uid
// 65534 under `rubinofs run`) reads the backing path and spawns a task to
// write there and through the mount: both are refused, and the task has
// the agent's environment, not the daemon's.
func TestGuardedSessionTaskStaysGuarded(t *testing.T) {
	m, bin := nobodyMount(t, nil)
	script := asNobody + shq(bin) + " run --session agent --mount " + shq(m.mnt) + " -- sh -c " +
		shq("echo agent-only=$AGENT_ONLY >&2; "+spawnScript(bin, m.mnt, probe(m.ws)+"\necho agent-var=${AGENT_ONLY-absent}"))
	out, err := m.sh("AGENT_ONLY=yes " + script)
	if err != nil {
		t.Fatalf("spawn from a session: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:])
	got := waitTask(t, bin, m.mnt, id)
	for _, w := range []string{"uid=65534", "mount-refused", "backing-refused", "env=absent session=task-" + id, "agent-var=yes"} {
		if !strings.Contains(got, w) {
			t.Errorf("task spawned from a guarded session: no %q in\n%s", w, got)
		}
	}
}

// TestTaskEntersCallerNamespaces: a caller in its own mount namespace
// (unshare --mount), and one in its own pid and mount namespaces with its
// own /proc (unshare --pid --fork --mount-proc), and one in a cgroup and
// cgroup namespace of its own spawn tasks; each task runs in the caller's
// mount, pid and cgroup namespaces and cgroup (as `docker exec` would),
// with the mount where the caller sees it.
func TestTaskEntersCallerNamespaces(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	m, bin := nobodyMount(t, nil)
	// What the caller and its task print alike: their namespaces, cgroup
	// and environment (a value with a quote and a newline; PATH).
	self := `echo mnt=$(readlink /proc/self/ns/mnt) pid=$(readlink /proc/self/ns/pid) cgns=$(readlink /proc/self/ns/cgroup) cg=$(grep '^0::' /proc/self/cgroup) path=$PATH tricky=$(printf '[%s]' "$TRICKY" | tr '\n' '~')`
	// A caller in a cgroup of its own and a cgroup namespace rooted
	// there: a task outside that cgroup would show "0::/..".
	_, cgDir := cgroupRoot(t)
	intoCgroup := "echo $$ > " + shq(filepath.Join(cgDir, "cgroup.procs")) + " && exec "
	for _, tc := range []struct{ name, unshare string }{
		{"mount", "unshare --mount --fork"},
		{"pid", "unshare --pid --fork --mount-proc"},
		{"cgroup", intoCgroup + "unshare --cgroup --mount --fork"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The caller waits for its task inside: a pid namespace
			// ends with its first process, and the task with it.
			inside := self + "; id=$(" + spawnScript(bin, m.mnt, self+"; echo uid=$(id -u) mount=$RUBINO_MOUNT") + ") && echo $id && " +
				shq(bin) + " agents wait --mount " + shq(m.mnt) + " $id"
			out, err := m.sh(tc.unshare+" sh -c "+shq(inside), "TRICKY=it's\ntwo lines")
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.unshare, err, out)
			}
			caller, rest, _ := strings.Cut(out, "\n")
			id, got, _ := strings.Cut(rest, "\n")
			if !strings.Contains(caller, "tricky=[it's~two lines]") {
				t.Fatalf("the caller's environment: %s", caller)
			}
			if ours, _ := os.Readlink("/proc/self/ns/mnt"); strings.Contains(caller, "mnt="+ours) {
				t.Fatalf("the caller is in the test's mount namespace: %s", caller)
			}
			if want := caller + "\nuid=0 mount=" + m.mnt + "\n"; got != want {
				t.Fatalf("task %s of a caller of %s printed\n%s\nwant\n%s", id, tc.unshare, got, want)
			}
		})
	}
}

// TestTaskUserNamespaceCallerRefused: a caller in another user namespace
// (rootless containers) is refused with EPERM and a reason naming what to
// do; nothing runs.
func TestTaskUserNamespaceCallerRefused(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	m, bin := nobodyMount(t, nil)
	ran := filepath.Join(m.tmp, "ran")
	out, err := m.sh("unshare --user --map-root-user --mount --fork " + spawnScript(bin, m.mnt, "touch "+shq(ran)))
	if err == nil || !strings.Contains(out, "another user namespace") || !strings.Contains(out, "spawn from the host") {
		t.Fatalf("spawn from a user namespace: %v\n%s", err, out)
	}
	t.Logf("refused: %s", out)
	if n := len(m.d.Tasks.Registry().List()); n != 0 {
		t.Fatalf("%d tasks registered", n)
	}
}

// TestShellSubagentSwitchedOff: with agents.shell off, spawning sh is
// refused with EPERM and the reason, and nothing runs.
func TestShellSubagentSwitchedOff(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) { c.Agents.NoShell = true })
	out, code := cliCode(t, m.tmp, "agents", "spawn", "--mount", m.mnt, "touch "+filepath.Join(m.tmp, "ran"))
	if code == 0 || !strings.Contains(out, "switched off") || !strings.Contains(out, "agents.shell") {
		t.Fatalf("spawn of sh with agents.shell off: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(m.tmp, "ran")); err == nil {
		t.Fatal("the refused task ran")
	}
	if n := len(m.d.Tasks.Registry().List()); n != 0 {
		t.Fatalf("%d tasks registered", n)
	}
}
