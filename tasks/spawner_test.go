package tasks

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

func TestParseStatus(t *testing.T) {
	st, err := parseStatus([]byte("Name:\tsh\nTgid:\t42\nPid:\t43\nUid:\t1000\t1000\t1000\t1001\nGid:\t100\t100\t100\t101\nGroups:\t4 24 27 \n"))
	if err != nil || st.tgid != 42 || st.fsUid != 1001 || st.fsGid != 101 || !slices.Equal(st.groups, []uint32{4, 24, 27}) {
		t.Fatalf("got %+v, %v", st, err)
	}
	if st, err := parseStatus([]byte("Tgid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n")); err != nil || len(st.groups) != 0 {
		t.Fatalf("no groups: %+v, %v", st, err)
	}
	for _, bad := range []string{"", "Tgid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\n", "Tgid:\tx\nUid:\t0\nGid:\t0\nGroups:\n", "Tgid:\t1\nUid:\t0\nGid:\t0\nGroups:\tx\n"} {
		if _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("parseStatus(%q) accepted", bad)
		}
	}
}

func TestMountpointOf(t *testing.T) {
	mi := []byte(`22 1 0:21 / / rw - ext4 /dev/sda1 rw
30 22 0:55 /sub /elsewhere rw - fuse.rubinofs rubinofs rw
31 22 0:55 / /work\040space/mnt rw - fuse.rubinofs rubinofs rw
32 22 0:55 / /second rw - fuse.rubinofs rubinofs rw
`)
	if got, ok := mountpointOf(mi, "0:55"); !ok || got != "/work space/mnt" {
		t.Fatalf("got %q %v", got, ok)
	}
	if _, ok := mountpointOf(mi, "0:56"); ok {
		t.Fatal("found an absent device")
	}
	if got := cgroupV2([]byte("12:pids:/x\n0::/system.slice/docker-1.scope\n")); got != "/system.slice/docker-1.scope" {
		t.Fatalf("cgroupV2 %q", got)
	}
}

// TestSpawnerOfSelf identifies this test process: its ids, its groups, its
// own environment without the task variables, the runner's mount, no
// namespaces to enter.
func TestSpawnerOfSelf(t *testing.T) {
	rn := newRunner(t, nil)
	sp, err := rn.SpawnerOf(human)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	groups, _ := os.Getgroups()
	var want []uint32
	for _, g := range groups {
		want = append(want, uint32(g))
	}
	if sp.Pid != uint32(os.Getpid()) || sp.Uid != uint32(os.Geteuid()) || sp.Gid != uint32(os.Getegid()) || !slices.Equal(sp.Groups, want) {
		t.Fatalf("spawner %+v, want pid %d uid %d gid %d groups %v", sp, os.Getpid(), os.Geteuid(), os.Getegid(), want)
	}
	if sp.Joins() || sp.Mount != rn.cfg.Mount {
		t.Fatalf("joins %v, mount %q", sp.Joins(), sp.Mount)
	}
	if !slices.Contains(sp.Env, "PATH="+os.Getenv("PATH")) {
		t.Fatal("the spawner's PATH is missing")
	}
	for _, kv := range sp.Env {
		if strings.HasPrefix(kv, EnvTaskID+"=") {
			t.Fatalf("stale %s kept", kv)
		}
	}
	// The environment is the process's as it was executed: a variable set
	// since is not in it.
	t.Setenv("RUBINO_TEST_SET_LATER", "x")
	sp2, _ := rn.SpawnerOf(human)
	defer sp2.Close()
	if env := rn.taskEnv(SubagentType{Env: []string{"A=1"}}, "7", sp2); slices.Contains(env, "RUBINO_TEST_SET_LATER=x") ||
		!slices.Contains(env, "A=1") || !slices.Contains(env, EnvTaskID+"=7") {
		t.Fatalf("task env %v", env)
	}

	// A caller whose ids are not its process's: refused.
	other := human
	other.Uid++
	if _, err := rn.SpawnerOf(other); ctltree.ErrnoOf(err) != syscall.EPERM {
		t.Fatalf("mismatched uid: %v", err)
	}
	if _, err := rn.SpawnerOf(ctltree.Caller{Session: "default"}); ctltree.ErrnoOf(err) != syscall.EPERM {
		t.Fatalf("pid 0: %v", err)
	}
}

// TestShellOffRefused: with NoShell the sh type is EPERM with the reason,
// not listed, and configured types still spawn.
func TestShellOffRefused(t *testing.T) {
	rn := newRunner(t, func(c *Config) {
		c.NoShell = true
		c.Subagents = map[string]SubagentType{"echo": {Command: []string{"echo", "{prompt}"}}}
	})
	_, err := cloneAs(t, rn, human, "subagent=sh\nprompt=true")
	var ce *ctltree.Error
	if !errors.As(err, &ce) || ce.Errno != syscall.EPERM || !strings.Contains(ce.Msg, "agents.shell = false") {
		t.Fatalf("sh with NoShell: %v", err)
	}
	if slices.Contains(rn.Subagents(), BuiltinShell) {
		t.Fatalf("sh listed: %v", rn.Subagents())
	}
	if _, err := cloneAs(t, rn, human, "subagent=echo\nprompt=hi"); err != nil {
		t.Fatalf("a configured type: %v", err)
	}
}

// TestJoinWrapperEnvironment runs joinPrefix under /bin/sh as a joined
// task's wrapper would: it says "in", takes the environment from
// exportScript (quotes, newlines, a name a shell cannot export) and ends
// with nothing of its own environment (PATH unset when the spawner had
// none); a stray line makes it exit 125.
func TestJoinWrapperEnvironment(t *testing.T) {
	run := func(script []byte) (string, error) {
		child, ours, err := socketPair()
		if err != nil {
			t.Fatal(err)
		}
		defer ours.Close()
		cmd := exec.Command("/bin/sh", "-c", joinPrefix+`printf '%s|' "$A" "$B" "${PATH-unset}" "${BAD-}"`)
		cmd.Env = joinEnv
		cmd.ExtraFiles = []*os.File{child}
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		child.Close()
		if ok, err := awaitEntered(ours, time.Minute); !ok || err != nil {
			t.Fatalf("entered %v, %v", ok, err)
		}
		ours.Write(script)
		ours.Close() // the end: a script without "go" is cut short
		err = cmd.Wait()
		return out.String(), err
	}
	got, err := run(exportScript([]string{"A=it's\ntwo 'lines' $HOME `x`", "B=", "BAD.NAME=1", "noequals"}))
	if err != nil || got != "it's\ntwo 'lines' $HOME `x`||unset||" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := run([]byte("export A='1'\nrm -rf /\ngo\n")); exitStatus(err) != 125 {
		t.Fatalf("a stray line: %v", err)
	}
	if _, err := run([]byte("export A='1'\n")); exitStatus(err) != 125 {
		t.Fatalf("no go: %v", err)
	}
}

// exitStatus is the exit status of a Wait error (0 for nil, -1 for none).
func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
