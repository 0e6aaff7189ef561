package tasks

import (
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

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
