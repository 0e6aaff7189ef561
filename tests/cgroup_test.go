package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/internal/procfs"
)

// cgroupRoot creates this test's own cgroup under the v2 hierarchy and
// returns its path as the daemon names cgroups ("/rubino-test-PID-NAME")
// and its directory. t.Cleanup kills whatever is left in it and below,
// then removes it and its children (registered first, so it runs after
// every other cleanup of the test). Skips without root or a writable v2
// hierarchy.
func cgroupRoot(t *testing.T) (string, string) {
	t.Helper()
	mnt, err := procfs.Cgroup2Mount()
	if err != nil || os.Geteuid() != 0 {
		t.Skipf("needs root and a cgroup v2 hierarchy: %v", err)
	}
	cg := fmt.Sprintf("/rubino-test-%d-%s", os.Getpid(), t.Name())
	dir := filepath.Join(mnt, cg)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroupTree(t, dir) })
	return cg, dir
}

// removeCgroupTree kills the processes left in dir and below (a failed
// test's), then removes the cgroups, children first.
func removeCgroupTree(t *testing.T, dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeCgroupTree(t, filepath.Join(dir, e.Name()))
		}
	}
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil || len(strings.Fields(string(b))) == 0 {
			break
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
				syscall.Wait4(pid, nil, 0, nil) // reap it if it is ours
			}
		}
		if i > 1000 {
			t.Errorf("cgroup %s: processes left: %s", dir, b)
			break
		}
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		t.Errorf("removing cgroup %s: %v", dir, err)
	}
}

// mkCgroup creates the cgroup NAME under parent directory dir and returns
// its directory.
func mkCgroup(t *testing.T, dir, name string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// startInCgroup starts a command loop as `docker exec` starts a command:
// from an unrelated parent (this test process, in no session), in a new
// session (setsid), moved into the cgroup directory cgDir before it
// touches the mount. The loop runs each command in the mount and reports
// its exit status, like startSession's (RUBINO_SESSION is not set, so the
// line reads "rc=N session=").
func (m *mount) startInCgroup(name, cgDir string) *agent {
	m.t.Helper()
	t := m.t.(*testing.T)
	loop := `while IFS= read -r line; do { cd "$RUBINO_MOUNT" && eval "$line"; } >/dev/null 2>&1 </dev/null; echo "rc=$? session=$RUBINO_SESSION"; done`
	script := `echo $$ > "$1/cgroup.procs" && exec /bin/sh -c "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, "sh", cgDir, loop)
	cmd.Dir = m.tmp
	cmd.Env = append(testEnv(m.tmp), "RUBINO_MOUNT="+m.mnt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, name: name, cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(a.exit)
	return a
}

// sessionOf runs readlink .rubino/self in a and returns the session it
// names.
func (a *agent) sessionOf(m *mount) string {
	a.t.Helper()
	out := filepath.Join(m.tmp, "self-"+a.name)
	a.ok("readlink .rubino/self > " + shq(out))
	b, err := os.ReadFile(out)
	if err != nil {
		a.t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(b)), "sessions/")
}

// sessionInfo reads .rubino/sessions/NAME/info.
func (m *mount) sessionInfo(name string) map[string]any {
	m.t.Helper()
	b, err := os.ReadFile(m.path(".rubino/sessions/" + name + "/info"))
	if err != nil {
		m.t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		m.t.Fatalf("info of %s: %v\n%s", name, err, b)
	}
	return doc
}

// rubinofs runs the CLI with args (and --mount) from the test's directory
// and returns its combined output.
func (m *mount) rubinofs(args ...string) (string, error) {
	m.t.Helper()
	cmd := exec.Command(rubinofsBin(m.t.(*testing.T)), args...)
	cmd.Dir = m.tmp
	cmd.Env = append(testEnv(m.tmp), "RUBINO_MOUNT="+m.mnt)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestCgroupSessionsShareWithinACgroup: two cgroups stand for two
// containers, each a session registered with `rubinofs session new
// --cgroup`. Separate processes started into one cgroup (as `docker exec`
// starts them) share its session: one reads, another writes. The other
// cgroup's session is refused as unread, then as stale. A command joined
// into the session with `rubinofs run --join --cgroup` lands in its
// cgroup and shares its reads. The session ends when its cgroup is
// removed.
func TestCgroupSessionsShareWithinACgroup(t *testing.T) {
	root, rootDir := cgroupRoot(t)
	m := newMount(t, map[string]string{"f": "v1\n"}, nil)
	dirA, dirB := mkCgroup(t, rootDir, "ctr-a"), mkCgroup(t, rootDir, "ctr-b")
	for _, c := range [][2]string{{"ctr-a", dirA}, {"ctr-b", root + "/ctr-b"}} {
		// A directory under the v2 mount or a cgroup path: the same cgroup.
		if out, err := m.rubinofs("session", "new", "--cgroup", c[1], c[0]); err != nil || strings.TrimSpace(out) != c[0] {
			t.Fatalf("session new --cgroup %s: %v\n%s", c[1], err, out)
		}
	}
	if info := m.sessionInfo("ctr-a"); info["root_kind"] != "cgroup" || info["root_path"] != root+"/ctr-a" {
		t.Fatalf("info of ctr-a: %v", info)
	}
	a1, a2, b1 := m.startInCgroup("a1", dirA), m.startInCgroup("a2", dirA), m.startInCgroup("b1", dirB)
	for a, want := range map[*agent]string{a1: "ctr-a", a2: "ctr-a", b1: "ctr-b"} {
		if got := a.sessionOf(m); got != want {
			t.Fatalf("%s resolves to %q, want %q", a.name, got, want)
		}
	}
	a1.ok("cat f")
	b1.refused("echo 'by B' > f") // unread in ctr-b
	a2.ok("echo 'v2 by a2' > f")  // a1's read counts for a2
	b1.ok("cat f")
	a1.ok("echo 'v3 by a1' > f") // a2's write kept the session fresh
	b1.refused("echo 'stale B' > f")
	if got := m.readBacking("f"); got != "v3 by a1\n" {
		t.Fatalf("f = %q", got)
	}
	// Joined into ctr-a's cgroup by the owner: shares its reads.
	out, err := m.rubinofs("run", "--session", "ctr-a", "--join", "--cgroup", "--", "/bin/sh", "-c",
		`grep '^0::' /proc/self/cgroup && cd "$RUBINO_MOUNT" && echo 'v4 joined' > f && readlink .rubino/self`)
	if err != nil || !strings.Contains(out, "0::"+root+"/ctr-a\n") || !strings.Contains(out, "sessions/ctr-a") {
		t.Fatalf("run --join --cgroup: %v\n%s", err, out)
	}
	b1.refused("echo 'stale B' > f")
	// The session ends when its cgroup is removed.
	a1.exit()
	a2.exit()
	if err := os.Remove(dirA); err != nil {
		t.Fatal(err)
	}
	waitGone(t, m, "ctr-a")
	if info := m.sessionInfo("ctr-b"); info["live"] != true {
		t.Fatalf("ctr-b ended with ctr-a: %v", info)
	}
}

// TestCgroupAutoSessions: with --session-cgroups, every cgroup matching
// the glob becomes a session on first contact, named after its last path
// element; a `rubinofs run` inside it nests a session of its own; the
// session ends when the cgroup is removed.
func TestCgroupAutoSessions(t *testing.T) {
	root, rootDir := cgroupRoot(t)
	id1, id2 := "0123456789abcdef0123", "fedcba9876543210fedc"
	m := newMount(t, map[string]string{"f": "v1\n"}, func(c *daemon.Config) {
		c.CgroupAuto = []string{root + "/docker-*.scope"}
	})
	dir1, dir2 := mkCgroup(t, rootDir, "docker-"+id1+".scope"), mkCgroup(t, rootDir, "docker-"+id2+".scope")
	a1, a2, b1 := m.startInCgroup("a1", dir1), m.startInCgroup("a2", dir1), m.startInCgroup("b1", dir2)
	for a, want := range map[*agent]string{a1: id1, a2: id1, b1: id2} {
		if got := a.sessionOf(m); got != want {
			t.Fatalf("%s resolves to %q, want %q", a.name, got, want)
		}
	}
	if info := m.sessionInfo(id1); info["auto"] != true || info["root_path"] != root+"/docker-"+id1+".scope" {
		t.Fatalf("info of %s: %v", id1, info)
	}
	// The test process, in no matching cgroup, stays default.
	if got, _ := os.Readlink(m.path(".rubino/self")); got != "sessions/default" {
		t.Fatalf("the test process resolves to %q", got)
	}
	a1.ok("cat f")
	a2.ok("echo 'v2 by a2' > f")
	b1.refused("echo 'by b1' > f")
	// A `rubinofs run` inside the container nests: its tree is a session
	// of its own (it has read nothing), the container's other processes
	// stay in the container's.
	bin := rubinofsBin(t)
	out := filepath.Join(m.tmp, "nested")
	a1.ok(shq(bin) + " run --session inner -- sh -c 'readlink .rubino/self > " + out + " && ! echo nested > f'")
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "sessions/inner" {
		t.Fatalf("nested run resolves to %q", b)
	}
	if got := a1.sessionOf(m); got != id1 {
		t.Fatalf("after the nested run a1 resolves to %q", got)
	}
	a1.exit()
	a2.exit()
	if err := os.Remove(dir1); err != nil {
		t.Fatal(err)
	}
	waitGone(t, m, id1)
}

// TestCgroupRunKeepsDaemons: a daemon double-forked under `rubinofs run
// --cgroup` is reparented away from the session's root, yet keeps its
// session: it stays in the session's cgroup. Its read makes its write
// pass; the test process (default) is refused on the same file. Once the
// daemon exits, the emptied cgroup is removed and the session ends.
func TestCgroupRunKeepsDaemons(t *testing.T) {
	root, rootDir := cgroupRoot(t)
	m := newMount(t, map[string]string{"f": "v1\n"}, nil)
	fin, fout := filepath.Join(m.tmp, "in"), filepath.Join(m.tmp, "out")
	for _, p := range []string{fin, fout} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	daemonScript := fmt.Sprintf(`read go < %s; cd "$RUBINO_MOUNT" && cat f > /dev/null && echo 'by the daemon' > f; echo "rc=$? $(readlink .rubino/self) ppid=$(awk '{print $4}' /proc/$$/stat)" > %s`, shq(fin), shq(fout))
	out, err := m.rubinofs("run", "--cgroup", "--cgroup-parent", root, "--session", "dev", "--", "/bin/sh", "-c",
		`(setsid /bin/sh -c "$0" </dev/null >/dev/null 2>&1 &); exit 0`, daemonScript)
	if err != nil {
		t.Fatalf("rubinofs run --cgroup: %v\n%s", err, out)
	}
	if info := m.sessionInfo("dev"); info["root_kind"] != "cgroup" || info["root_path"] != root+"/rubino-dev" || info["live"] != true {
		t.Fatalf("info of dev: %v", info)
	}
	// The run's shell has exited; the daemon's parent is now this test
	// process (the subreaper) and nothing of the session's tree is left.
	if err := os.WriteFile(fin, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fout)
	if err != nil {
		t.Fatal(err)
	}
	// Its parent is this test process, the subreaper it was handed to.
	if got, want := strings.TrimSpace(string(b)), fmt.Sprintf("rc=0 sessions/dev ppid=%d", os.Getpid()); got != want {
		t.Fatalf("the daemon: %q, want %q", got, want)
	}
	if got := m.readBacking("f"); got != "by the daemon\n" {
		t.Fatalf("f = %q", got)
	}
	m.mustFail("echo 'blind' > f")
	waitGone(t, m, "dev")
	if _, err := os.Stat(filepath.Join(rootDir, "rubino-dev")); !os.IsNotExist(err) {
		t.Fatalf("the session's cgroup is still there: %v", err)
	}
}

// TestCgroupJoinKeptSession: `rubinofs session new NAME --keep` makes a
// session with no process; commands run with `rubinofs run --session NAME
// --join` one after another share its reads, and it stays until it is
// ended. A registered session may not join another.
func TestCgroupJoinKeptSession(t *testing.T) {
	m := newMount(t, map[string]string{"f": "v1\n"}, nil)
	if out, err := m.rubinofs("session", "new", "harness1", "--keep"); err != nil || strings.TrimSpace(out) != "harness1" {
		t.Fatalf("session new --keep: %v\n%s", err, out)
	}
	run := func(script string) (string, error) {
		return m.rubinofs("run", "--session", "harness1", "--join", "--", "/bin/sh", "-c", `cd "$RUBINO_MOUNT" && `+script)
	}
	if out, err := run("cat f > /dev/null && readlink .rubino/self"); err != nil || strings.TrimSpace(out) != "sessions/harness1" {
		t.Fatalf("first joined command: %v\n%s", err, out)
	}
	if info := m.sessionInfo("harness1"); info["live"] != true || info["root_kind"] != "none" || info["keep"] != true {
		t.Fatalf("info after the first command exited: %v", info)
	}
	if out, err := run("echo 'by the second command' > f"); err != nil {
		t.Fatalf("second joined command refused: %v\n%s", err, out)
	}
	other := m.startAgent("other")
	other.refused("echo 'blind' > f")
	other.refused(shq(rubinofsBin(t)) + " run --session harness1 --join -- true")
	if out, err := m.rubinofs("session", "end", "harness1"); err != nil {
		t.Fatalf("session end: %v\n%s", err, out)
	}
	waitGone(t, m, "harness1")
	if out, err := run("true"); err == nil {
		t.Fatalf("joined an ended session: %s", out)
	}
}

// TestCgroupRegisterAuthorisation: a registered session (not the mount's
// owner) may not root a session at a cgroup that holds another's process,
// which would share its reads with that process; it may root one at a
// cgroup holding only its own, as `rubinofs run --cgroup` does.
func TestCgroupRegisterAuthorisation(t *testing.T) {
	_, rootDir := cgroupRoot(t)
	m := newMount(t, map[string]string{"f": "v1\n"}, nil)
	dirA := mkCgroup(t, rootDir, "ctr-a")
	a1 := m.startInCgroup("a1", dirA)
	a1.ok("true") // a1 is in ctr-a
	ag := m.startAgent("agent")
	clone := func(spec string) string {
		return `exec 3<>.rubino/sessions/clone && printf '%s\n' ` + shq(spec) + ` >&3 && read id <&3`
	}
	ag.refused(clone("cgroup=" + dirA + " name=taken"))
	ag.refused(clone("keep=1 name=kept"))
	ag.refused(clone("join=agent"))
	out := filepath.Join(m.tmp, "own")
	ag.ok(shq(rubinofsBin(t)) + " run --cgroup --cgroup-parent " + shq(rootDir) + " --session own -- sh -c 'readlink .rubino/self > " + out + "'")
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "sessions/own" {
		t.Fatalf("run --cgroup from a session resolves to %q", b)
	}
	for _, name := range []string{"taken", "kept"} {
		if _, err := os.Stat(m.path(".rubino/sessions/" + name)); err == nil {
			t.Fatalf("session %s was registered", name)
		}
	}
	waitGone(t, m, "own") // its cgroup emptied and removed
	// Not even the owner may have the daemon remove a cgroup rubinofs
	// did not make.
	if errno, reason := m.ctlWrite(".rubino/sessions/clone", []byte("cgroup="+dirA+" remove=1 name=rm\n")); errno != syscall.EINVAL || !strings.Contains(reason, "rubino-") {
		t.Fatalf("remove=1 of ctr-a: %v %q", errno, reason)
	}
	// The same registration by the mount's owner, from outside every
	// session, is accepted.
	if out, err := m.rubinofs("session", "new", "--cgroup", dirA, "taken"); err != nil {
		t.Fatalf("the owner's registration: %v\n%s", err, out)
	}
}
