package tasks

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// ErrShellOff is returned by Spawn for the built-in sh type when the
// configuration switched it off (Config.NoShell). Control-file callers see
// EPERM.
var ErrShellOff = errors.New("the built-in subagent sh is switched off (agents.shell = false): spawn a configured subagent type, or mount with --agents-shell")

// Spawner is who a task runs as (docs/DESIGN.md#task-credentials): the
// credentials, environment and view of the mount of the process that wrote
// the clone file, and, for a process in other namespaces than the daemon's
// (a container), the handles that let the task enter them. Runner.SpawnerOf
// makes one from a control-file caller; Close releases its handles. A nil
// *Spawner is the runner's own process (Runner.Spawn). Not safe for
// concurrent use; a Spawner serves one spawn.
type Spawner struct {
	Pid    uint32   // the spawner's process (thread-group id, the daemon's pid namespace)
	Uid    uint32   // its fs uid, as the kernel reported it for the write
	Gid    uint32   // its fs gid
	Groups []uint32 // its supplementary groups (/proc/PID/status "Groups:")
	// Env is the spawner's environment as it was executed
	// (/proc/PID/environ), without the task variables (EnvTaskID,
	// EnvSession, EnvMount, EnvBranch) and RUBINOFS_READY_FD, which the
	// task gets afresh.
	Env []string
	// Mount is the mount root as the spawner sees it: the task's working
	// directory, RUBINO_MOUNT and {mount}.
	Mount string
	// SetCreds: the task's process takes Uid, Gid and Groups. False only
	// for a runner that is not root and a spawner of its own uid (it could
	// not set them, and needs not).
	SetCreds bool

	join *nsJoin // non-nil: the task enters the spawner's namespaces
}

// nsJoin is what a task needs to enter a spawner's namespaces, as `docker
// exec` does: util-linux nsenter, run as root from the daemon's side, gets
// the spawner's /proc/PID directory as an inherited descriptor and opens
// the namespace files and the root directory through it (a /proc/PID
// descriptor stays bound to the process it was opened for: after that
// process is gone it resolves to nothing, never to a process that reuses
// the pid), enters them, forks into the pid namespace, then drops to the
// spawner's uid; the process starts in the spawner's cgroup (clone3
// CLONE_INTO_CGROUP).
type nsJoin struct {
	nsenter string   // path of nsenter in the daemon's mount namespace
	opts    []string // nsenter's options of the namespaces to enter ("mount", "pid", ...)
	names   []string // their /proc/PID/ns names, in the same order
	proc    *os.File // the spawner's /proc/PID directory
	cgroup  *os.File // its cgroup v2 directory
}

// Close releases the spawner's handles; safe on nil and twice.
func (sp *Spawner) Close() {
	if sp == nil || sp.join == nil {
		return
	}
	for _, f := range []*os.File{sp.join.proc, sp.join.cgroup} {
		if f != nil {
			f.Close()
		}
	}
	sp.join = nil
}

// Joins reports whether the task enters the spawner's namespaces.
func (sp *Spawner) Joins() bool { return sp != nil && sp.join != nil }

// droppedEnv are the variables a task never inherits: it gets its own.
func droppedEnv(k string) bool {
	switch k {
	case EnvTaskID, EnvSession, EnvMount, EnvBranch, "RUBINOFS_READY_FD":
		return true
	}
	return false
}

// taskEnv is the spawner's environment (the runner's own for a nil sp,
// Runner.Spawn) without stale task variables, plus the type's Env and the
// task's own variables (which win). The daemon's environment never reaches
// a task a caller spawned (docs/DESIGN.md#task-credentials).
func (rn *Runner) taskEnv(typ SubagentType, id string, sp *Spawner) []string {
	src := os.Environ()
	mount := rn.cfg.Mount
	if sp != nil {
		src, mount = sp.Env, sp.Mount
	}
	var env []string
	for _, kv := range src {
		k, _, _ := strings.Cut(kv, "=")
		if !droppedEnv(k) {
			env = append(env, kv)
		}
	}
	env = append(env, typ.Env...)
	return append(env, EnvTaskID+"="+id, EnvSession+"="+SessionName(id), EnvMount+"="+mount)
}

// command builds the task's process: the start-up wrapper under the shell
// with argv, as sp, with goR as descriptor 3. Its own POSIX session and
// process group (Setsid: a stop reaches everything the task starts and
// nothing outside can join it) and Pdeathsig (the leader dies with the
// daemon's thread even when teardown cannot run). For a spawner in other
// namespaces the leader is nsenter (nsJoin), which enters them, forks
// (the pid namespace), drops to the spawner's uid and executes the shell
// of the spawner's root with joinWrapper, which closes the descriptor it
// was handed before anything else runs and receives the environment over
// descriptor 3 (spawner_join.go).
func (rn *Runner) command(sp *Spawner, argv []string, goR *os.File) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	extra := []*os.File{goR}
	var cmd *exec.Cmd
	if !sp.Joins() {
		cmd = exec.Command(rn.cfg.Shell, append([]string{"-c", wrapperFor(rn.cfg.Umask), "rubino-task"}, argv...)...)
		if sp != nil && sp.SetCreds {
			attr.Credential = &syscall.Credential{Uid: sp.Uid, Gid: sp.Gid, Groups: sp.Groups}
		}
	} else {
		j := sp.join
		extra = append(extra, j.proc) // descriptor 4
		const proc = "/proc/self/fd/4/"
		var args []string
		for i, opt := range j.opts {
			args = append(args, "--"+opt+"="+proc+"ns/"+j.names[i])
		}
		args = append(args, "--root="+proc+"root", "--wd="+proc+"root",
			"--setuid="+strconv.FormatUint(uint64(sp.Uid), 10), "--", rn.cfg.Shell, "-c", joinWrapper(rn.cfg.Umask), "rubino-task")
		cmd = exec.Command(j.nsenter, append(args, argv...)...)
		// nsenter runs as root with the spawner's gid and groups: root to
		// enter the namespaces, then --setuid drops the uid (and with it
		// every capability); without --setgid it leaves the groups alone.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: sp.Gid, Groups: sp.Groups}
		if j.cgroup != nil {
			attr.UseCgroupFD, attr.CgroupFD = true, int(j.cgroup.Fd())
		}
	}
	cmd.Dir = "/" // outside the mount; the wrapper cds in (see wrapperScript)
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = attr
	return cmd
}

// describe names the spawner in messages: "uid U (pid P)".
func (sp *Spawner) describe() string {
	return fmt.Sprintf("uid %d (pid %d)", sp.Uid, sp.Pid)
}
