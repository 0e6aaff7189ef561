package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/procfs"
)

// Identifying a spawner from /proc (docs/DESIGN.md#task-credentials). Every
// read of the caller's /proc files is bounded by procfs.Bound
// (docs/DESIGN.md#no-wait-on-caller): the caller is blocked in our own
// request.

// namespaces are the namespace kinds compared with the daemon's, by their
// /proc/PID/ns names; nsenterOpt is nsenter's option for each one a task
// enters (user namespaces are refused, not entered).
var namespaces = []struct{ name, nsenterOpt string }{
	{"mnt", "mount"}, {"pid", "pid"}, {"cgroup", "cgroup"}, {"net", "net"},
	{"ipc", "ipc"}, {"uts", "uts"}, {"user", ""},
}

// SpawnerOf identifies the control-file caller c as the Spawner its task
// runs as: its uid and gid as the kernel reported them for the write, its
// supplementary groups and environment from /proc, the mount as it sees
// it, and the handles to enter its namespaces when they are not the
// daemon's. The process is pinned with a pidfd before its files are read
// and must still be alive, with the same fs uid and gid, after: a pid that
// was recycled meanwhile is refused. The caller must Close the Spawner.
//
// Errors, as *ctltree.Error: EAGAIN when a /proc read did not finish within
// procfs.Bound (the caller is in execve: try again), EPERM with the
// reason when the caller cannot be identified or its namespaces cannot be
// entered soundly (another user namespace, a daemon that is not root, no
// nsenter, no cgroup v2 hierarchy, the mount's root not visible to it).
// Safe for concurrent use.
func (rn *Runner) SpawnerOf(c ctltree.Caller) (*Spawner, error) {
	if c.Pid == 0 {
		return nil, ctltree.Errorf(syscall.EPERM, "the kernel did not name the calling process: the daemon cannot start a task as it")
	}
	tid := strconv.FormatUint(uint64(c.Pid), 10)
	status, err := procfs.ReadFile("/proc/" + tid + "/status")
	if err != nil {
		return nil, procErr(c.Pid, err)
	}
	st, err := parseStatus(status)
	if err != nil {
		return nil, ctltree.Errorf(syscall.EPERM, "/proc/%d/status: %v", c.Pid, err)
	}
	pidfd, err := unix.PidfdOpen(int(st.tgid), 0)
	if err != nil {
		return nil, procErr(c.Pid, err)
	}
	defer unix.Close(pidfd)
	// Read again after pinning: what follows is about the pidfd's process.
	if status, err = procfs.ReadFile("/proc/" + tid + "/status"); err == nil {
		st, err = parseStatus(status)
	}
	if err != nil {
		return nil, procErr(c.Pid, err)
	}
	if st.fsUid != c.Uid || st.fsGid != c.Gid {
		return nil, ctltree.Errorf(syscall.EPERM, "process %d is no longer the caller (uid %d/gid %d, the write came from uid %d/gid %d): try again", c.Pid, st.fsUid, st.fsGid, c.Uid, c.Gid)
	}
	sp := &Spawner{Pid: st.tgid, Uid: c.Uid, Gid: c.Gid, Groups: st.groups, Mount: rn.cfg.Mount, SetCreds: true}
	if euid := uint32(os.Geteuid()); euid != 0 {
		if c.Uid != euid {
			return nil, ctltree.Errorf(syscall.EPERM, "the daemon runs as uid %d, not root: it cannot start a task as uid %d; spawn as uid %d, or mount as root", euid, c.Uid, euid)
		}
		sp.SetCreds = false // it cannot setgroups, and the uid is its own
	}
	pid := strconv.FormatUint(uint64(st.tgid), 10)
	env, err := procfs.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		return nil, procErr(c.Pid, err)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if k, _, ok := strings.Cut(string(kv), "="); ok && k != "" && !droppedEnv(k) {
			sp.Env = append(sp.Env, string(kv))
		}
	}
	if err := rn.placeSpawner(sp, pid); err != nil {
		sp.Close()
		return nil, err
	}
	// Alive after every read: the pid was not recycled in between.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		sp.Close()
		return nil, procErr(c.Pid, err)
	}
	return sp, nil
}

// placeSpawner compares sp's namespaces and root with the daemon's; when
// any differs it finds the mount as sp sees it and opens what the task
// needs to enter them (nsJoin), or refuses.
func (rn *Runner) placeSpawner(sp *Spawner, pid string) error {
	var differ []string
	for _, ns := range namespaces {
		theirs, err := procfs.Readlink("/proc/" + pid + "/ns/" + ns.name)
		if err != nil {
			return procErr(sp.Pid, err)
		}
		ours, err := os.Readlink("/proc/self/ns/" + ns.name)
		if err != nil {
			return ctltree.Errorf(syscall.EPERM, "the daemon cannot read its own %s namespace: %v", ns.name, err)
		}
		if theirs != ours {
			differ = append(differ, ns.name)
		}
	}
	root, err := procfs.Readlink("/proc/" + pid + "/root")
	if err != nil {
		return procErr(sp.Pid, err)
	}
	if len(differ) == 0 && root == "/" {
		return nil
	}
	where := "its own root directory"
	if len(differ) > 0 {
		where = "namespaces other than the daemon's (" + strings.Join(differ, ", ") + ")"
	}
	refuse := func(format string, args ...any) error {
		return ctltree.Errorf(syscall.EPERM, "cannot start a task in the namespaces of %s, which is in %s: %s", sp.describe(), where, fmt.Sprintf(format, args...))
	}
	if slices.Contains(differ, "user") {
		return refuse("another user namespace is not entered (its ids are not the daemon's); spawn from the host, or run the subagent yourself")
	}
	if os.Geteuid() != 0 {
		return refuse("the daemon runs as uid %d and may not enter namespaces; mount as root, or spawn from the daemon's namespaces", os.Geteuid())
	}
	nsenter, err := findNsenter()
	if err != nil {
		return refuse("%v", err)
	}
	mi, err := procfs.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		return procErr(sp.Pid, err)
	}
	dev, err := rn.mountDev()
	if err != nil {
		return refuse("%v", err)
	}
	mnt, ok := mountpointOf(mi, dev)
	if !ok {
		return refuse("the mount's root is not visible there; bind-mount the mountpoint itself (docs/containers.md)")
	}
	sp.Mount = mnt
	cg2, err := procfs.Cgroup2Mount()
	if err != nil {
		return refuse("%v: the task could not join its cgroup", err)
	}
	cgText, err := procfs.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return procErr(sp.Pid, err)
	}
	cg := cgroupV2(cgText)
	if cg == "" || strings.Contains(cg, "/../") || strings.HasSuffix(cg, "/..") {
		return refuse("its cgroup v2 path is unknown: the task could not join its cgroup")
	}
	j := &nsJoin{nsenter: nsenter}
	sp.join = j
	if j.cgroup, err = os.OpenFile(filepath.Join(cg2, cg), os.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
		return refuse("opening its cgroup: %v", err)
	}
	for _, ns := range namespaces {
		if ns.nsenterOpt != "" {
			j.opts, j.names = append(j.opts, ns.nsenterOpt), append(j.names, ns.name)
		}
	}
	// Verified by the caller's liveness check after this (SpawnerOf).
	if j.proc, err = os.OpenFile("/proc/"+pid, os.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
		return procErr(sp.Pid, err)
	}
	return nil
}

// procErr maps a failed read of the caller's /proc files: EAGAIN when it
// did not answer in time, EPERM when the process is gone or unreadable.
func procErr(pid uint32, err error) error {
	if errors.Is(err, procfs.ErrSlow) {
		return ctltree.Errorf(syscall.EAGAIN, "process %d is busy (in execve?): try the spawn again", pid)
	}
	return ctltree.Errorf(syscall.EPERM, "cannot identify the calling process %d: %v", pid, err)
}

// procStatus is what a spawner needs of /proc/PID/status.
type procStatus struct {
	tgid         uint32
	fsUid, fsGid uint32
	groups       []uint32
}

// parseStatus parses the Tgid, Uid, Gid (real, effective, saved, fs) and
// Groups lines of a /proc/PID/status text.
func parseStatus(b []byte) (procStatus, error) {
	var st procStatus
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch k {
		case "Tgid", "Uid", "Gid":
			if len(f) == 0 {
				return st, fmt.Errorf("malformed %s line", k)
			}
			n, err := strconv.ParseUint(f[len(f)-1], 10, 32)
			if err != nil {
				return st, fmt.Errorf("malformed %s line", k)
			}
			switch k {
			case "Tgid":
				st.tgid = uint32(n)
			case "Uid":
				st.fsUid = uint32(n)
			case "Gid":
				st.fsGid = uint32(n)
			}
			seen++
		case "Groups":
			for _, g := range f {
				n, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return st, fmt.Errorf("malformed Groups line")
				}
				st.groups = append(st.groups, uint32(n))
			}
			seen++
		}
	}
	if seen != 4 {
		return st, fmt.Errorf("missing Tgid, Uid, Gid or Groups")
	}
	return st, nil
}

// cgroupV2 returns the "0::PATH" of a /proc/PID/cgroup text ("" for none).
func cgroupV2(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return p
		}
	}
	return ""
}

// mountDev returns the "major:minor" of the mount (the topmost mount at
// Config.Mount in the daemon's own mount table); it never touches the
// mount itself, which this process serves.
func (rn *Runner) mountDev() (string, error) {
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Mountpoint != rn.cfg.Mount, false
	})
	if err != nil {
		return "", err
	}
	if len(ms) == 0 {
		return "", fmt.Errorf("the daemon does not find its mount %s in its own mount table", rn.cfg.Mount)
	}
	m := ms[len(ms)-1]
	return fmt.Sprintf("%d:%d", m.Major, m.Minor), nil
}

// mountpointOf returns where a mountinfo text shows the root of the
// filesystem dev ("major:minor") mounted (the first such mount), as its
// process sees it; false when there is none or the text does not parse.
func mountpointOf(mi []byte, dev string) (string, bool) {
	ms, err := mountinfo.GetMountsFromReader(bytes.NewReader(mi), func(m *mountinfo.Info) (skip, stop bool) {
		ok := fmt.Sprintf("%d:%d", m.Major, m.Minor) == dev && m.Root == "/"
		return !ok, ok
	})
	if err != nil || len(ms) == 0 {
		return "", false
	}
	return ms[0].Mountpoint, true
}

// nsenterPaths are where util-linux installs nsenter; the daemon's own
// PATH comes first.
var nsenterPaths = []string{"/usr/bin/nsenter", "/usr/sbin/nsenter", "/bin/nsenter", "/sbin/nsenter"}

// findNsenter returns the path of nsenter on the daemon's side.
func findNsenter() (string, error) {
	if p, err := exec.LookPath("nsenter"); err == nil {
		return p, nil
	}
	for _, p := range nsenterPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("util-linux nsenter is not installed on the daemon's host (Debian: apt install util-linux)")
}
