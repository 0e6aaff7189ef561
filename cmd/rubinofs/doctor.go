package main

// `rubinofs doctor`: checks what a mount needs from this machine, explains
// each finding and prints the fix for each failure. Every check is a plain
// function of paths and numbers the command gathers (the hidden flags
// replace the system paths, so a test can show a broken setup without
// breaking the machine).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// Doctor levels: ok and warn leave the exit status 0; FAIL makes it 1.
const (
	levelOK   = "ok"
	levelWarn = "warn"
	levelFail = "FAIL"
)

// finding is the result of one check: its level, what it checked, what it
// found, and (for warn and FAIL) the command or change that fixes it;
// Lines are details printed one a line under it.
type finding struct {
	Level, Check, Detail, Fix string
	Lines                     []string
}

// doctorEnv is everything the checks look at: the user the mount would run
// as and the system paths (flags override them for tests).
type doctorEnv struct {
	uid        int
	gids       []int
	userName   string
	home       string
	self       bool // the checked user is the caller: devices are opened, capabilities read
	devFuse    string
	fuseConf   string
	fusermount string // "" when not found
	watchesF   string // fs.inotify.max_user_watches
	kernel     string // uname -r
	allowOther bool
	workspace  string // "" without WORKSPACE
	stateDir   string // "" when not given
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:      "doctor",
		Usage:     "check this machine's setup for rubinofs mounts and explain how to fix what fails",
		ArgsUsage: "[WORKSPACE]",
		Description: "Checks /dev/fuse, fusermount3 and its setuid bit (users other than root mount through it),\n" +
			"user_allow_other in /etc/fuse.conf (with --allow-other), the privilege to mount, kernel FUSE\n" +
			"passthrough, inotify's watch limit against WORKSPACE's directory count, and the state directory's\n" +
			"permissions. Each line is ok, warn or FAIL; a FAIL prints its fix and makes the exit status 1.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "allow-other", Usage: "the mount will use -o allow_other (other users may enter it)"},
			&cli.StringFlag{Name: "user", Usage: "check for `USER` (name or uid) instead of the caller, e.g. as root before handing the machine over"},
			&cli.StringFlag{Name: "state-dir", Usage: "the state directory the mount will use (default: as `rubinofs mount` chooses it)"},
			&cli.StringFlag{Name: "dev-fuse", Value: "/dev/fuse", Hidden: true},
			&cli.StringFlag{Name: "fuse-conf", Value: "/etc/fuse.conf", Hidden: true},
			&cli.StringFlag{Name: "fusermount", Hidden: true, Usage: "the fusermount3 binary (default: from $PATH)"},
			&cli.StringFlag{Name: "max-user-watches-file", Value: "/proc/sys/fs/inotify/max_user_watches", Hidden: true},
			&cli.StringFlag{Name: "kernel-release", Hidden: true, Usage: "pretend uname -r is this"},
		},
		Action: runDoctor,
	}
}

func runDoctor(c *cli.Context) error {
	if c.NArg() > 1 {
		return cli.Exit("usage: rubinofs doctor [--allow-other] [--user USER] [WORKSPACE]", 2)
	}
	env := doctorEnv{
		devFuse: c.String("dev-fuse"), fuseConf: c.String("fuse-conf"),
		watchesF: c.String("max-user-watches-file"), kernel: c.String("kernel-release"),
		allowOther: c.Bool("allow-other"), stateDir: c.String("state-dir"),
	}
	if err := env.setUser(c.String("user")); err != nil {
		return cli.Exit(err.Error(), 2)
	}
	env.fusermount = c.String("fusermount")
	if env.fusermount == "" {
		env.fusermount = findFusermount()
	}
	if env.kernel == "" {
		var u unix.Utsname
		if unix.Uname(&u) == nil {
			env.kernel = unix.ByteSliceToString(u.Release[:])
		}
	}
	if ws := c.Args().First(); ws != "" {
		abs, err := filepath.Abs(ws)
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return cli.Exit(fmt.Sprintf("workspace %s is not a directory", abs), 2)
		}
		env.workspace = abs
	}
	fmt.Printf("rubinofs %s doctor: checking as %s (uid %d)\n", versionString(), env.userName, env.uid)
	fails := 0
	for _, f := range env.checks() {
		printFinding(os.Stdout, f)
		if f.Level == levelFail {
			fails++
		}
	}
	if fails > 0 {
		return cli.Exit(fmt.Sprintf("%d check(s) failed: see the fixes above", fails), 1)
	}
	fmt.Println("all checks passed")
	return nil
}

// printFinding writes one finding: the level padded to 5 columns, the
// check and its detail, then "fix:" on the next line.
func printFinding(w io.Writer, f finding) {
	fmt.Fprintf(w, "%-5s %s: %s\n", f.Level, f.Check, f.Detail)
	for _, l := range f.Lines {
		fmt.Fprintf(w, "      %s\n", l)
	}
	if f.Fix != "" && f.Level != levelOK {
		fmt.Fprintf(w, "      fix: %s\n", f.Fix)
	}
}

// setUser sets the checked user: the caller, or name (a user name or uid).
func (e *doctorEnv) setUser(name string) error {
	var u *user.User
	var err error
	if name == "" {
		e.self = true
		u, err = user.LookupId(strconv.Itoa(os.Geteuid()))
		if err != nil {
			// A uid without a passwd entry (a container): still checkable.
			e.uid, e.userName = os.Geteuid(), "uid "+strconv.Itoa(os.Geteuid())
			e.home, _ = os.UserHomeDir()
			e.gids, _ = os.Getgroups()
			e.gids = append(e.gids, os.Getegid())
			return nil
		}
	} else {
		if u, err = user.Lookup(name); err != nil {
			if u, err = user.LookupId(name); err != nil {
				return fmt.Errorf("--user %s: no such user", name)
			}
		}
		e.self = u.Uid == strconv.Itoa(os.Geteuid())
	}
	e.uid, _ = strconv.Atoi(u.Uid)
	e.userName, e.home = u.Username, u.HomeDir
	if e.self {
		e.home, _ = os.UserHomeDir()
	}
	gids, _ := u.GroupIds()
	for _, g := range append(gids, u.Gid) {
		if n, err := strconv.Atoi(g); err == nil {
			e.gids = append(e.gids, n)
		}
	}
	return nil
}

// findFusermount returns fusermount3's path from $PATH or Debian's
// /usr/bin and /bin, or "".
func findFusermount() string {
	if p, err := exec.LookPath("fusermount3"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/bin/fusermount3", "/bin/fusermount3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func (e *doctorEnv) root() bool { return e.uid == 0 }

// checks runs every check, in the order a mount needs them.
func (e *doctorEnv) checks() []finding {
	out := []finding{e.checkDevFuse(), e.checkPrivilege(), e.checkFusermount()}
	if e.allowOther {
		out = append(out, e.checkAllowOther())
	}
	out = append(out, e.checkPassthrough(), e.checkInotify())
	if e.workspace != "" {
		out = append(out, e.checkTimestamps())
	}
	out = append(out, e.checkStateDir(), e.checkStaleState(), e.checkMountHelper())
	return out
}

// mayAccess reports whether the checked user may access a file of mode,
// owner and group with the permission bits want (4 read, 2 write, 1
// execute), by the classic owner/group/other rule (root may always).
func (e *doctorEnv) mayAccess(st *syscall.Stat_t, want uint32) bool {
	if e.root() {
		return true
	}
	perm := st.Mode & 0o7
	if int(st.Uid) == e.uid {
		perm = (st.Mode >> 6) & 0o7
	} else {
		for _, g := range e.gids {
			if int(st.Gid) == g {
				perm = (st.Mode >> 3) & 0o7
				break
			}
		}
	}
	return perm&want == want
}

// checkDevFuse: the FUSE device exists, is the FUSE character device and the
// user may open it read-write.
func (e *doctorEnv) checkDevFuse() finding {
	f := finding{Check: e.devFuse}
	var st syscall.Stat_t
	if err := syscall.Stat(e.devFuse, &st); err != nil {
		f.Level = levelFail
		f.Detail = fmt.Sprintf("missing (%v): the kernel's fuse module is not loaded, or this container was started without the device", err)
		f.Fix = "modprobe fuse (on the host); in a container: docker run --device /dev/fuse ..."
		return f
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		f.Level = levelFail
		f.Detail = "exists but is not a character device"
		f.Fix = fmt.Sprintf("rm %s && mknod -m 666 %s c 10 229", e.devFuse, e.devFuse)
		return f
	}
	major, minor := unix.Major(st.Rdev), unix.Minor(st.Rdev)
	if !e.mayAccess(&st, 6) {
		f.Level = levelFail
		f.Detail = fmt.Sprintf("%s may not open it read-write (mode %o)", e.userName, st.Mode&0o777)
		f.Fix = "chmod 666 " + e.devFuse + " (Debian's default)"
		return f
	}
	if e.self {
		fd, err := syscall.Open(e.devFuse, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			f.Level = levelFail
			f.Detail = fmt.Sprintf("cannot be opened read-write: %v", err)
			switch {
			case errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENXIO):
				f.Fix = "modprobe fuse (the device node exists but no driver answers)"
			default:
				f.Fix = "in a container: docker run --device /dev/fuse (the device cgroup must allow 10:229)"
			}
			return f
		}
		syscall.Close(fd)
	}
	f.Level = levelOK
	f.Detail = fmt.Sprintf("character device %d:%d, read-write for %s", major, minor, e.userName)
	if major != 10 || minor != 229 {
		f.Level = levelWarn
		f.Detail = fmt.Sprintf("character device %d:%d, not FUSE's 10:229", major, minor)
		f.Fix = fmt.Sprintf("rm %s && mknod -m 666 %s c 10 229", e.devFuse, e.devFuse)
	}
	return f
}

// capSysAdmin is CAP_SYS_ADMIN's bit in /proc/self/status's CapEff.
const capSysAdmin = 21

// effectiveCaps returns the caller's effective capability set.
func effectiveCaps() (uint64, bool) {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// checkPrivilege: root mounts with mount(2), which takes CAP_SYS_ADMIN (a
// container's root often lacks it); other users mount through fusermount3.
func (e *doctorEnv) checkPrivilege() finding {
	f := finding{Check: "mount privilege", Level: levelOK}
	if !e.root() {
		f.Detail = e.userName + " mounts through fusermount3 (checked next)"
		return f
	}
	if !e.self {
		f.Detail = "root mounts directly with mount(2)"
		return f
	}
	caps, ok := effectiveCaps()
	switch {
	case !ok:
		f.Level, f.Detail = levelWarn, "cannot read the capabilities in /proc/self/status"
		f.Fix = "mount /proc"
	case caps&(1<<capSysAdmin) == 0:
		f.Level = levelFail
		f.Detail = "root without CAP_SYS_ADMIN (a container without it): mount(2) fails with EPERM"
		f.Fix = "docker run --cap-add SYS_ADMIN --device /dev/fuse ... (plus --security-opt apparmor:unconfined under AppArmor), or mount on the host and bind-mount it in (docs/containers.md)"
	default:
		f.Detail = "root with CAP_SYS_ADMIN mounts directly with mount(2)"
	}
	return f
}

// checkFusermount: fusermount3 is installed, owned by root and setuid, for
// users other than root.
func (e *doctorEnv) checkFusermount() finding {
	f := finding{Check: "fusermount3"}
	if _, err := os.Stat(e.fusermount); e.fusermount != "" && errors.Is(err, fs.ErrNotExist) {
		e.fusermount = ""
	}
	if e.fusermount == "" {
		if e.root() {
			f.Level = levelOK
			f.Detail = "not installed (not needed as root; other users mount through it: apt-get install fuse3)"
			return f
		}
		f.Level = levelFail
		f.Detail = "not found: users other than root mount FUSE file systems through it"
		f.Fix = "apt-get install fuse3"
		return f
	}
	var st syscall.Stat_t
	if err := syscall.Stat(e.fusermount, &st); err != nil {
		f.Level, f.Detail, f.Fix = levelFail, fmt.Sprintf("%s: %v", e.fusermount, err), "apt-get install --reinstall fuse3"
		if e.root() {
			f.Level = levelWarn
		}
		return f
	}
	setuid := st.Mode&syscall.S_ISUID != 0 && st.Uid == 0
	switch {
	case e.root() && setuid:
		f.Level, f.Detail = levelOK, e.fusermount+" (setuid root; not needed as root)"
	case e.root():
		f.Level = levelWarn
		f.Detail = e.fusermount + " is not setuid root: root does not need it, other users cannot mount"
		f.Fix = fmt.Sprintf("chown root %s && chmod u+s %s", e.fusermount, e.fusermount)
	case !setuid:
		f.Level = levelFail
		f.Detail = e.fusermount + " is not setuid root: it cannot mount for " + e.userName
		f.Fix = fmt.Sprintf("chown root %s && chmod u+s %s", e.fusermount, e.fusermount)
	case !e.mayAccess(&st, 1):
		f.Level = levelFail
		f.Detail = fmt.Sprintf("%s may not execute %s (mode %o)", e.userName, e.fusermount, st.Mode&0o7777)
		f.Fix = "chmod 4755 " + e.fusermount
	default:
		f.Level, f.Detail = levelOK, e.fusermount+" (setuid root)"
	}
	return f
}

// checkAllowOther: a user other than root may ask for allow_other only when
// /etc/fuse.conf has user_allow_other (fusermount3 refuses it otherwise),
// and then serves other users as itself (a warning).
func (e *doctorEnv) checkAllowOther() finding {
	f := finding{Check: "allow_other"}
	if e.root() {
		f.Level, f.Detail = levelOK, "root may always mount with allow_other (not needed as root: "+e.fuseConf+" is not consulted)"
		return f
	}
	b, err := os.ReadFile(e.fuseConf)
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) == "user_allow_other" {
				// A daemon that is not root cannot act as another uid.
				f.Level, f.Detail = levelWarn, e.fuseConf+" has user_allow_other; but what other users create through "+e.userName+"'s mount will belong to "+e.userName+", and their tasks, diffs and rewinds get nothing"
				f.Fix = "mount as root to serve other users as themselves; nothing to do if only " + e.userName + " uses the mount"
				return f
			}
		}
	}
	f.Level = levelFail
	if err != nil {
		f.Detail = fmt.Sprintf("%v: fusermount3 refuses allow_other for %s", err, e.userName)
	} else {
		f.Detail = fmt.Sprintf("%s lacks user_allow_other: fusermount3 refuses allow_other for %s", e.fuseConf, e.userName)
	}
	f.Fix = "echo user_allow_other >> " + e.fuseConf
	return f
}

// kernelVersion parses "6.9.0-foo" into (6, 9).
func kernelVersion(release string) (major, minor int, ok bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(parts[0])
	digits := strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	minor, err2 = strconv.Atoi(digits)
	return major, minor, err1 == nil && err2 == nil
}

// checkPassthrough: FUSE passthrough (reads and writes of opened files go
// straight to the backing file, Linux 6.9+) needs CAP_SYS_ADMIN; without it
// rubinofs serves the data itself: correct, slower.
func (e *doctorEnv) checkPassthrough() finding {
	f := finding{Check: "passthrough"}
	major, minor, ok := kernelVersion(e.kernel)
	if !ok {
		f.Level, f.Detail = levelWarn, fmt.Sprintf("cannot parse the kernel release %q: passthrough unknown", e.kernel)
		return f
	}
	if major < 6 || major == 6 && minor < 9 {
		f.Level = levelWarn
		f.Detail = fmt.Sprintf("Linux %s has no FUSE passthrough (6.9+): file data goes through the daemon, correct but slower", e.kernel)
		f.Fix = "a Linux 6.9+ kernel (Debian: bookworm-backports' linux-image-amd64)"
		return f
	}
	if cfg := "/boot/config-" + e.kernel; e.self {
		if b, err := os.ReadFile(cfg); err == nil && !strings.Contains(string(b), "CONFIG_FUSE_PASSTHROUGH=y") {
			f.Level = levelWarn
			f.Detail = fmt.Sprintf("Linux %s was built without CONFIG_FUSE_PASSTHROUGH (%s): file data goes through the daemon", e.kernel, cfg)
			f.Fix = "a kernel built with CONFIG_FUSE_PASSTHROUGH=y"
			return f
		}
	}
	capable := e.root()
	if e.self {
		caps, ok := effectiveCaps()
		capable = ok && caps&(1<<capSysAdmin) != 0
	}
	if !capable {
		f.Level = levelWarn
		f.Detail = fmt.Sprintf("Linux %s supports it, but it needs CAP_SYS_ADMIN, which %s lacks: file data goes through the daemon, correct but slower", e.kernel, e.userName)
		f.Fix = "mount as root (or with CAP_SYS_ADMIN) for passthrough; nothing to do otherwise"
		return f
	}
	f.Level = levelOK
	f.Detail = fmt.Sprintf("Linux %s with CAP_SYS_ADMIN: opened files are passed through to the backing file", e.kernel)
	return f
}

// checkMountHelper: whether mount(8) finds rubinofs for -t fuse.rubinofs
// and fstab lines (optional: ok either way).
func (e *doctorEnv) checkMountHelper() finding {
	f := finding{Check: "mount helper", Level: levelOK}
	for _, p := range []string{"/sbin/mount.fuse.rubinofs", "/usr/sbin/mount.fuse.rubinofs"} {
		if _, err := os.Stat(p); err == nil {
			f.Detail = p + " is installed: mount -t fuse.rubinofs and fstab lines work"
			return f
		}
	}
	self, _ := os.Executable()
	f.Detail = fmt.Sprintf("not installed (optional: for mount -t fuse.rubinofs and /etc/fstab, ln -s %s /sbin/mount.fuse.rubinofs)", self)
	return f
}
