package tests

// The POSIX comparison suite (docs/POSIX.md): every case runs once in a
// native directory and once through the mount, each time in a fresh
// directory of its own, and returns a record of what it saw (errno of each
// step, normalised stat fields, whether a timestamp changed, xattr values,
// lock outcomes). The two records must be equal, except for the keys a case
// lists as knownDiff (FUSE cannot match; docs/POSIX.md says why). A case
// marked pending is a fixable difference waiting for its fix: it is skipped
// with the reason.
//
// The native directory is a sibling of the backing workspace, so both are on
// the same filesystem. The suite mounts once per guard mode (off, enforce),
// with allow_other (an unprivileged child must reach the mount at all) and
// dev,suid (so that device nodes and setuid bits behave as on the backing
// filesystem; rubinofs, like fusermount, mounts nodev,nosuid by default).
// In enforce mode every case only touches files it created itself, which the
// guard credits to the caller's session (default), so every result must match.
//
// Steps run either in the test process (as root) or in a child process: a
// copy of this test binary re-executed as TestPosixCompareChild, as root or
// as uid/gid 65534 (root bypasses permission checks). A child is also the
// second process of the fcntl lock cases. Timestamps are compared as
// "changed or not" against values set to the past with utimensat first; for
// ctime, which cannot be set, the case waits (polling, no sleep) until the
// coarse clock has passed the ctime it saw, so any later change is visible.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// nobody is the unprivileged uid and gid of child processes.
const nobody = 65534

// posixCase is one row of the comparison table.
type posixCase struct {
	name string
	run  func(e *penv)
	// knownDiff maps record keys that differ through FUSE for a documented
	// reason (docs/POSIX.md) to that reason; the rest of the record must
	// match.
	knownDiff map[string]string
	// pending skips the case: a fixable difference waiting for its fix;
	// pendingEnforce skips it with the guard enforcing only.
	pending, pendingEnforce string
}

// penv is the environment of one run of a case: its directory (native or
// through the mount), the record, and the descriptors its in-process steps
// keep open by slot.
type penv struct {
	t     *testing.T
	dir   string
	bin   string // the helper binary for child processes
	keys  []string
	vals  map[string]string
	slots map[int]int
}

// p returns the absolute path of rel in the case directory.
func (e *penv) p(rel string) string { return filepath.Join(e.dir, rel) }

// sockPath returns a path of rel in the case directory short enough for a
// unix socket address (sun_path holds 108 bytes): through a symlink to the
// directory made in a short temporary directory, so that native and the
// mount bind the same length whatever TMPDIR and the test names add.
func (e *penv) sockPath(rel string) string {
	e.t.Helper()
	short, err := os.MkdirTemp("", "s")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { os.RemoveAll(short) })
	link := filepath.Join(short, "d")
	if err := os.Symlink(e.dir, link); err != nil {
		e.t.Fatal(err)
	}
	return filepath.Join(link, rel)
}

// set records key = value (a key recorded twice is a bug in the case).
func (e *penv) set(key, format string, args ...any) {
	e.t.Helper()
	if _, dup := e.vals[key]; dup {
		e.t.Fatalf("case records %q twice", key)
	}
	e.keys = append(e.keys, key)
	e.vals[key] = fmt.Sprintf(format, args...)
}

// errStr renders an error as its errno name ("ok" for nil).
func errStr(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	return "error " + err.Error()
}

// pop is one step, run in the test process (penv.do) or in a child
// (penv.child). Paths are absolute by the time it runs.
type pop struct {
	Op    string `json:"op"`
	Path  string `json:"path,omitempty"`
	Path2 string `json:"path2,omitempty"`
	Slot  int    `json:"slot,omitempty"`
	Flags int    `json:"flags,omitempty"`
	Mode  uint32 `json:"mode,omitempty"`
	Data  string `json:"data,omitempty"`
	N     int64  `json:"n,omitempty"`
	M     int64  `json:"m,omitempty"`
	Name  string `json:"name,omitempty"` // an xattr name
}

func opOpen(slot int, path string, flags int, mode uint32) pop {
	return pop{Op: "open", Slot: slot, Path: path, Flags: flags, Mode: mode}
}
func opClose(slot int) pop              { return pop{Op: "close", Slot: slot} }
func opWrite(slot int, data string) pop { return pop{Op: "write", Slot: slot, Data: data} }
func opRead(slot int, n int64) pop      { return pop{Op: "read", Slot: slot, N: n} }

// lockName names an fcntl lock type.
func lockName(typ int16) string {
	switch typ {
	case unix.F_RDLCK:
		return "rd"
	case unix.F_WRLCK:
		return "wr"
	case unix.F_UNLCK:
		return "un"
	}
	return fmt.Sprintf("type%d", typ)
}

// runOp executes one step with descriptors in slots and returns its outcome
// as a comparable string. holder is the pid a getlk expects to see.
func runOp(o pop, slots map[int]int) string {
	fd := func() int {
		if fd, ok := slots[o.Slot]; ok {
			return fd
		}
		return -1
	}
	switch o.Op {
	case "open":
		fd, err := unix.Open(o.Path, o.Flags|unix.O_CLOEXEC, o.Mode)
		if err == nil {
			if old, ok := slots[o.Slot]; ok {
				unix.Close(old)
			}
			slots[o.Slot] = fd
		}
		return errStr(err)
	case "fallocate":
		// Flags: the mode; N, M: offset and length.
		return errStr(unix.Fallocate(fd(), uint32(o.Flags), o.N, o.M))
	case "statx":
		// Which of the basic fields and btime statx reports, and the
		// attributes it knows (not their values: those are per inode).
		var sx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, o.Path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_ALL, &sx); err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok mask=%#x attrs_mask=%#x attrs=%#x", sx.Mask&(unix.STATX_BASIC_STATS|unix.STATX_BTIME),
			sx.Attributes_mask, sx.Attributes)
	case "access":
		return errStr(unix.Faccessat(unix.AT_FDCWD, o.Path, uint32(o.Mode), o.Flags))
	case "linkfd":
		// linkat of the descriptor's /proc/self/fd link, followed: gives
		// an O_TMPFILE file a name.
		return errStr(unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd()), unix.AT_FDCWD, o.Path, unix.AT_SYMLINK_FOLLOW))
	case "fsetxattr":
		return errStr(unix.Fsetxattr(fd(), o.Name, []byte(o.Data), o.Flags))
	case "fgetxattr":
		buf := make([]byte, 256)
		n, err := unix.Fgetxattr(fd(), o.Name, buf)
		if err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok %q", buf[:n])
	case "fremovexattr":
		return errStr(unix.Fremovexattr(fd(), o.Name))
	case "reopen":
		// open(2) of the descriptor's /proc/self/fd link into slot N.
		nfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd()), o.Flags|unix.O_CLOEXEC, 0)
		if err == nil {
			slots[int(o.N)] = nfd
		}
		return errStr(err)
	case "fsizelimit":
		// RLIMIT_FSIZE of this process to N bytes, SIGXFSZ ignored (so
		// a write past it fails with EFBIG instead of killing us).
		signal.Ignore(syscall.SIGXFSZ)
		return errStr(unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: uint64(o.N), Max: uint64(o.N)}))
	case "umask":
		unix.Umask(int(o.Mode))
		return "ok"
	case "close":
		err := unix.Close(fd())
		delete(slots, o.Slot)
		return errStr(err)
	case "write":
		n, err := unix.Write(fd(), []byte(o.Data))
		if err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok n=%d", n)
	case "pwrite":
		n, err := unix.Pwrite(fd(), []byte(o.Data), o.N)
		if err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok n=%d", n)
	case "read":
		buf := make([]byte, o.N)
		n, err := unix.Read(fd(), buf)
		if err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok %q", buf[:n])
	case "pread":
		buf := make([]byte, o.M)
		n, err := unix.Pread(fd(), buf, o.N)
		if err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok %q", buf[:n])
	case "lseek":
		off, err := unix.Seek(fd(), o.N, o.Flags)
		if err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok %d", off)
	case "fstat":
		var st unix.Stat_t
		if err := unix.Fstat(fd(), &st); err != nil {
			return errStr(err)
		}
		return statLine(&st)
	case "fchmod":
		return errStr(unix.Fchmod(fd(), o.Mode))
	case "fchown":
		return errStr(unix.Fchown(fd(), int(o.N), int(o.M)))
	case "futimes":
		// N, M: atime and mtime in whole seconds.
		return errStr(unix.Futimes(fd(), []unix.Timeval{{Sec: o.N}, {Sec: o.M}}))
	case "fmtime":
		var st unix.Stat_t
		if err := unix.Fstat(fd(), &st); err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok atime=%d mtime=%d", st.Atim.Sec, st.Mtim.Sec)
	case "ftruncate":
		return errStr(unix.Ftruncate(fd(), o.N))
	case "truncate_fd_link":
		// truncate(2) of the descriptor's /proc/self/fd link: a size
		// change the kernel sends without a file handle.
		return errStr(unix.Truncate(fmt.Sprintf("/proc/self/fd/%d", fd()), o.N))
	case "truncate":
		return errStr(unix.Truncate(o.Path, o.N))
	case "chmod":
		return errStr(unix.Chmod(o.Path, o.Mode))
	case "chown":
		return errStr(unix.Chown(o.Path, int(o.N), int(o.M)))
	case "lchown":
		return errStr(unix.Lchown(o.Path, int(o.N), int(o.M)))
	case "unlink":
		return errStr(unix.Unlink(o.Path))
	case "rmdir":
		return errStr(unix.Rmdir(o.Path))
	case "mkdir":
		return errStr(unix.Mkdir(o.Path, o.Mode))
	case "rename":
		return errStr(unix.Renameat2(unix.AT_FDCWD, o.Path, unix.AT_FDCWD, o.Path2, uint(o.Flags)))
	case "link":
		return errStr(unix.Link(o.Path, o.Path2))
	case "symlink":
		return errStr(unix.Symlink(o.Path2, o.Path))
	case "mknod":
		return errStr(unix.Mknod(o.Path, o.Mode, int(o.N)))
	case "setxattr":
		return errStr(unix.Lsetxattr(o.Path, o.Name, []byte(o.Data), o.Flags))
	case "getxattr":
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(o.Path, o.Name, buf)
		if err != nil {
			return errStr(err)
		}
		return fmt.Sprintf("ok %q", buf[:n])
	case "removexattr":
		return errStr(unix.Lremovexattr(o.Path, o.Name))
	case "stat":
		var st unix.Stat_t
		if err := unix.Lstat(o.Path, &st); err != nil {
			return errStr(err)
		}
		return statLine(&st)
	case "utimens":
		// N, M: atime and mtime in ns; -1 is UTIME_NOW, -2 UTIME_OMIT.
		ts := func(v int64) unix.Timespec {
			switch v {
			case -1:
				return unix.Timespec{Nsec: unix.UTIME_NOW}
			case -2:
				return unix.Timespec{Nsec: unix.UTIME_OMIT}
			}
			return unix.NsecToTimespec(v)
		}
		return errStr(unix.UtimesNanoAt(unix.AT_FDCWD, o.Path, []unix.Timespec{ts(o.N), ts(o.M)}, o.Flags))
	case "readdir":
		f, err := os.Open(o.Path)
		if err != nil {
			return errStr(err)
		}
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil {
			return errStr(err)
		}
		sort.Strings(names)
		return "ok [" + strings.Join(names, " ") + "]"
	case "flock":
		return errStr(unix.Flock(fd(), o.Flags))
	case "setlk", "ofd_setlk":
		cmd := unix.F_SETLK
		if o.Op == "ofd_setlk" {
			cmd = unix.F_OFD_SETLK
		}
		lk := unix.Flock_t{Type: int16(o.Flags), Whence: io.SeekStart, Start: o.N, Len: o.M}
		return errStr(unix.FcntlFlock(uintptr(fd()), cmd, &lk))
	case "getlk", "ofd_getlk":
		cmd := unix.F_GETLK
		if o.Op == "ofd_getlk" {
			cmd = unix.F_OFD_GETLK
		}
		lk := unix.Flock_t{Type: int16(o.Flags), Whence: io.SeekStart}
		if err := unix.FcntlFlock(uintptr(fd()), cmd, &lk); err != nil {
			return errStr(err)
		}
		// The holder's pid is the only absolute value: name it
		// relative to who asked, so native and mount compare.
		pid := "other"
		switch {
		case lk.Type == unix.F_UNLCK:
			pid = "none"
		case lk.Pid == -1:
			pid = "-1"
		case lk.Pid == 0:
			pid = "0"
		case int64(lk.Pid) == o.Data2Pid():
			pid = "holder"
		}
		return fmt.Sprintf("ok %s start=%d len=%d pid=%s", lockName(lk.Type), lk.Start, lk.Len, pid)
	}
	return "unknown op " + o.Op
}

// Data2Pid is the expected lock holder's pid of a getlk, carried in Data.
func (o pop) Data2Pid() int64 {
	var pid int64
	fmt.Sscan(o.Data, &pid)
	return pid
}

// typeName names the file type of a mode.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "reg"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "lnk"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "sock"
	case unix.S_IFCHR:
		return "chr"
	case unix.S_IFBLK:
		return "blk"
	}
	return fmt.Sprintf("type%o", mode&unix.S_IFMT)
}

// statLine is the normalised, comparable part of a stat: type, permission
// bits, link count, size (not for directories: their size is the backing
// filesystem's business either way), owner and the device of device nodes.
func statLine(st *unix.Stat_t) string {
	s := fmt.Sprintf("%s %04o nlink=%d uid=%d gid=%d", typeName(st.Mode), st.Mode&0o7777, st.Nlink, st.Uid, st.Gid)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		s += fmt.Sprintf(" size=%d", st.Size)
	}
	if t := st.Mode & unix.S_IFMT; t == unix.S_IFCHR || t == unix.S_IFBLK {
		s += fmt.Sprintf(" rdev=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	return s
}

// do runs steps in the test process (as root) and records each outcome
// under label (label#i for more than one).
func (e *penv) do(label string, ops ...pop) {
	e.t.Helper()
	for i, o := range ops {
		e.abs(&o)
		key := label
		if len(ops) > 1 {
			key = fmt.Sprintf("%s#%d %s", label, i, o.Op)
		}
		e.set(key, "%s", runOp(o, e.slots))
	}
}

// abs makes the paths of a step absolute in the case directory.
func (e *penv) abs(o *pop) {
	if o.Path != "" {
		o.Path = e.p(o.Path)
	}
	if o.Path2 != "" && o.Op != "symlink" {
		o.Path2 = e.p(o.Path2)
	}
}

// child runs steps in a new process as uid (root or nobody) and records
// each outcome under label#i. The child's working directory is outside the
// mount (golang/go#11155); it is reaped before child returns.
func (e *penv) child(uid int, label string, ops ...pop) {
	e.t.Helper()
	for i := range ops {
		e.abs(&ops[i])
	}
	spec, err := json.Marshal(ops)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, "-test.run=^TestPosixCompareChild$", "-test.timeout=2m")
	cmd.Dir = "/"
	// atexit_sleep_ms: a race-enabled binary otherwise sleeps 1 s in exit.
	// TMPDIR: the child's TestMain makes its run directory there, inside
	// this run's, and the child ends with os.Exit before removing it.
	cmd.Env = []string{"RUBINOFS_POSIX_CHILD=" + string(spec), "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0", "TMPDIR=" + runDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("child %s: %v\n%s%s", label, err, out, stderr.String())
	}
	var results []string
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "POSIXCHILD "); ok {
			if err := json.Unmarshal([]byte(rest), &results); err != nil {
				e.t.Fatalf("child %s: %v in %q", label, err, rest)
			}
		}
	}
	if len(results) != len(ops) {
		e.t.Fatalf("child %s: %d results for %d steps\n%s%s", label, len(results), len(ops), out, stderr.String())
	}
	for i, r := range results {
		e.set(fmt.Sprintf("%s#%d %s", label, i, ops[i].Op), "%s", r)
	}
}

// TestPosixCompareChild is the child process of TestPosixCompare: it runs
// the steps in $RUBINOFS_POSIX_CHILD and prints their outcomes. Without
// that variable it does nothing.
func TestPosixCompareChild(t *testing.T) {
	spec := os.Getenv("RUBINOFS_POSIX_CHILD")
	if spec == "" {
		t.Skip("the child process of TestPosixCompare")
	}
	var ops []pop
	if err := json.Unmarshal([]byte(spec), &ops); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	slots := map[int]int{}
	results := make([]string, len(ops))
	for i, o := range ops {
		results[i] = runOp(o, slots)
	}
	b, _ := json.Marshal(results)
	fmt.Printf("POSIXCHILD %s\n", b)
	os.Exit(0)
}

// stat records the normalised lstat of rel.
func (e *penv) stat(label, rel string) {
	e.t.Helper()
	e.set(label, "%s", runOp(pop{Op: "stat", Path: e.p(rel)}, nil))
}

// write creates rel (or truncates it) with content and mode, in process.
func (e *penv) write(rel, content string, mode uint32) {
	e.t.Helper()
	fd, err := unix.Open(e.p(rel), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, mode)
	if err != nil {
		e.t.Fatalf("create %s: %v", rel, err)
	}
	if _, err := unix.Write(fd, []byte(content)); err != nil {
		unix.Close(fd)
		e.t.Fatalf("write %s: %v", rel, err)
	}
	if err := unix.Close(fd); err != nil {
		e.t.Fatalf("close %s: %v", rel, err)
	}
	if err := unix.Chmod(e.p(rel), mode); err != nil { // the umask
		e.t.Fatalf("chmod %s: %v", rel, err)
	}
}

// mkdir creates the directory rel with mode (umask undone).
func (e *penv) mkdir(rel string, mode uint32) {
	e.t.Helper()
	if err := unix.Mkdir(e.p(rel), mode); err != nil {
		e.t.Fatalf("mkdir %s: %v", rel, err)
	}
	if err := unix.Chmod(e.p(rel), mode); err != nil {
		e.t.Fatalf("chmod %s: %v", rel, err)
	}
}

// must fails the case on err (a setup step, not a compared one).
func (e *penv) must(what string, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// cat records the content of rel.
func (e *penv) cat(label, rel string) {
	e.t.Helper()
	b, err := os.ReadFile(e.p(rel))
	if err != nil {
		e.set(label, "%s", errStr(err))
		return
	}
	e.set(label, "ok %q", b)
}

// pastA and pastM are the times a snapshot sets (ns since the epoch).
const (
	pastA = int64(1_000_000_000)*1_000_000_000 + 111_111_111 // 2001-09-09
	pastM = int64(1_100_000_000)*1_000_000_000 + 222_222_222 // 2004-11-09
)

// tsnap is a file's times after past().
type tsnap struct {
	rel     string
	ctime   unix.Timespec
	noAtime bool // leave atime out of the record
}

// past sets rel's atime and mtime to fixed past values (not following a
// symlink) and waits until the coarse clock, which stamps files, has passed
// the ctime this left; a later change of ctime is then visible. It polls the
// clock with a deadline: no sleep "long enough".
func (e *penv) past(rel string) tsnap {
	e.t.Helper()
	e.must("utimensat "+rel, unix.UtimesNanoAt(unix.AT_FDCWD, e.p(rel),
		[]unix.Timespec{unix.NsecToTimespec(pastA), unix.NsecToTimespec(pastM)}, unix.AT_SYMLINK_NOFOLLOW))
	var st unix.Stat_t
	e.must("lstat "+rel, unix.Lstat(e.p(rel), &st))
	waitClockPast(e.t, st.Ctim)
	return tsnap{rel: rel, ctime: st.Ctim}
}

// waitClockPast polls CLOCK_REALTIME_COARSE until it is later than ts.
func waitClockPast(t testing.TB, ts unix.Timespec) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now); err != nil {
			t.Fatal(err)
		}
		if now.Nano() > ts.Nano() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coarse clock did not pass %v", ts)
		}
		runtimeYield()
	}
}

// runtimeYield gives the CPU away for a moment while polling the clock.
func runtimeYield() { unix.Nanosleep(&unix.Timespec{Nsec: 200_000}, nil) }

// changed records which of rel's times differ from the past values set by
// snap (atime, mtime) and from the ctime it saw.
func (e *penv) changed(label string, s tsnap) {
	e.t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(e.p(s.rel), &st); err != nil {
		e.set(label, "%s", errStr(err))
		return
	}
	if s.noAtime {
		e.set(label, "mtime changed=%v ctime changed=%v", st.Mtim.Nano() != pastM, st.Ctim != s.ctime)
		return
	}
	e.set(label, "atime changed=%v mtime changed=%v ctime changed=%v",
		st.Atim.Nano() != pastA, st.Mtim.Nano() != pastM, st.Ctim != s.ctime)
}

// pastDir is past for a directory: its atime is left out of the record,
// since the watcher lists new directories of the backing workspace on its
// own schedule, which updates their atime (docs/POSIX.md).
func (e *penv) pastDir(rel string) tsnap {
	e.t.Helper()
	s := e.past(rel)
	s.noAtime = true
	return s
}

// times records rel's atime and mtime exactly, or which is "now" (within
// the last minute).
func (e *penv) times(label, rel string) {
	e.t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(e.p(rel), &st); err != nil {
		e.set(label, "%s", errStr(err))
		return
	}
	show := func(ts unix.Timespec) string {
		if d := time.Since(time.Unix(ts.Unix())); d > -time.Minute && d < time.Minute {
			return "now"
		}
		return fmt.Sprint(ts.Nano())
	}
	e.set(label, "atime=%s mtime=%s", show(st.Atim), show(st.Mtim))
}

// sameIno records whether two names are one inode.
func (e *penv) sameIno(label, a, b string) {
	e.t.Helper()
	var sa, sb unix.Stat_t
	e.must("lstat "+a, unix.Lstat(e.p(a), &sa))
	e.must("lstat "+b, unix.Lstat(e.p(b), &sb))
	e.set(label, "%v", sa.Ino == sb.Ino && sa.Dev == sb.Dev)
}

// xattrs records the sorted user.* names of rel and their values.
func (e *penv) xattrs(label, rel string) {
	e.t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(e.p(rel), buf)
	if err != nil {
		e.set(label, "%s", errStr(err))
		return
	}
	var parts []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 256)
		vn, err := unix.Lgetxattr(e.p(rel), name, v)
		if err != nil {
			parts = append(parts, name+"="+errStr(err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%q", name, v[:vn]))
	}
	sort.Strings(parts)
	e.set(label, "[%s]", strings.Join(parts, " "))
}

// setgidNoExecWhy is the known difference of setgid without group-exec
// (docs/POSIX.md, docs/DESIGN.md#killpriv).
const setgidNoExecWhy = "the kernel's FUSE setattr (fs/fuse/dir.c) turns ATTR_KILL_SGID into a mode change only when group-exec is set; " +
	"natively setgid is also dropped without group-exec when the writer is not in the group. Closing it needs " +
	"FUSE_HANDLE_KILLPRIV_V2 in the daemon"

// statxAttrsWhy and fallocRangeWhy are FUSE-inherent differences
// (docs/POSIX.md).
const (
	statxAttrsWhy = "the kernel's FUSE statx (fs/fuse/dir.c) takes the basic fields and btime from the daemon, " +
		"never stx_attributes or stx_attributes_mask: only the VFS's own attributes (mount root) are reported"
	fallocRangeWhy = "the kernel's FUSE fallocate (fs/fuse/file.c) refuses every mode but KEEP_SIZE, PUNCH_HOLE and " +
		"ZERO_RANGE with EOPNOTSUPP before the daemon sees it: no COLLAPSE_RANGE or INSERT_RANGE"
)

// posixCases is the table. Every case starts in an empty directory of its
// own, as root, in the test process's session.
var posixCases = []posixCase{
	{name: "perm_file_modes_unprivileged", run: func(e *penv) {
		for _, mode := range []uint32{0o000, 0o400, 0o200, 0o600} {
			f := fmt.Sprintf("f%04o", mode)
			e.write(f, "data", mode)
			e.must("chown", unix.Chown(e.p(f), nobody, nobody))
			e.stat(f, f)
		}
		e.write("rootonly", "data", 0o600)
		var ops []pop
		for _, mode := range []uint32{0o000, 0o400, 0o200, 0o600} {
			f := fmt.Sprintf("f%04o", mode)
			ops = append(ops,
				opOpen(1, f, unix.O_RDONLY, 0), opClose(1),
				opOpen(2, f, unix.O_WRONLY, 0), opWrite(2, "X"), opClose(2))
		}
		ops = append(ops, opOpen(3, "rootonly", unix.O_RDONLY, 0), opOpen(3, "rootonly", unix.O_WRONLY, 0),
			pop{Op: "truncate", Path: "rootonly", N: 0})
		e.child(nobody, "nobody", ops...)
		e.cat("f0200 after", "f0200")
		e.cat("f0400 after", "f0400")
		e.cat("rootonly after", "rootonly")
	}},
	{name: "perm_dirs_unprivileged", run: func(e *penv) {
		e.mkdir("private", 0o700)
		e.write("private/f", "secret", 0o644)
		e.mkdir("readonly", 0o755)
		e.write("readonly/f", "x", 0o666)
		e.mkdir("searchonly", 0o711)
		e.write("searchonly/f", "y", 0o644)
		e.mkdir("sticky", 0o1777)
		e.write("sticky/rootfile", "z", 0o666)
		e.child(nobody, "nobody",
			pop{Op: "stat", Path: "private/f"},
			pop{Op: "readdir", Path: "private"},
			opOpen(1, "private/new", unix.O_CREAT|unix.O_WRONLY, 0o644),
			pop{Op: "readdir", Path: "readonly"},
			opOpen(1, "readonly/new", unix.O_CREAT|unix.O_WRONLY, 0o644),
			pop{Op: "unlink", Path: "readonly/f"},
			pop{Op: "rename", Path: "readonly/f", Path2: "readonly/g"},
			pop{Op: "mkdir", Path: "readonly/d", Mode: 0o755},
			pop{Op: "readdir", Path: "searchonly"},
			pop{Op: "stat", Path: "searchonly/f"},
			opOpen(1, "searchonly/f", unix.O_RDONLY, 0),
			opRead(1, 10), opClose(1),
			opOpen(2, "sticky/mine", unix.O_CREAT|unix.O_WRONLY, 0o644), opClose(2),
			pop{Op: "unlink", Path: "sticky/rootfile"},
			pop{Op: "rename", Path: "sticky/rootfile", Path2: "sticky/stolen"},
			pop{Op: "unlink", Path: "sticky/mine"},
		)
		e.stat("sticky/rootfile", "sticky/rootfile")
	}},
	{name: "create_setid_bits_unprivileged", run: func(e *penv) {
		// The daemon creates as root and gives the entry to the caller;
		// that chown must not clear the setuid and setgid bits the
		// creator asked for (a fifo too; a directory keeps them anyway).
		e.mkdir("pub", 0o777)
		e.child(nobody, "nobody",
			opOpen(1, "pub/suid", unix.O_CREAT|unix.O_WRONLY, 0o4755), opClose(1),
			opOpen(2, "pub/sgid", unix.O_CREAT|unix.O_WRONLY, 0o2755), opClose(2),
			opOpen(3, "pub/both", unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o6777), opClose(3),
			pop{Op: "mknod", Path: "pub/fifo", Mode: unix.S_IFIFO | 0o4644},
			pop{Op: "mkdir", Path: "pub/dir", Mode: 0o3777},
		)
		for _, f := range []string{"suid", "sgid", "both", "fifo", "dir"} {
			e.stat(f, "pub/"+f)
		}
	}},
	{name: "chown_chgrp", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.write("g", "data", 0o644)
		e.do("root chown f", pop{Op: "chown", Path: "f", N: nobody, M: nobody})
		e.stat("f", "f")
		e.do("root chgrp g", pop{Op: "chown", Path: "g", N: -1, M: 100})
		e.stat("g", "g")
		e.child(nobody, "nobody",
			pop{Op: "chown", Path: "f", N: 0, M: -1},      // give away: EPERM
			pop{Op: "chown", Path: "f", N: -1, M: 0},      // to a group not ours: EPERM
			pop{Op: "chown", Path: "f", N: nobody, M: -1}, // to ourselves: a no-op
			pop{Op: "chown", Path: "f", N: -1, M: nobody}, // our own group
			pop{Op: "chown", Path: "g", N: nobody, M: -1}, // not our file: EPERM
			pop{Op: "chmod", Path: "g", Mode: 0o777},      // not our file: EPERM
			pop{Op: "chmod", Path: "f", Mode: 0o640},
		)
		e.stat("f after", "f")
		e.stat("g after", "g")
	}},
	{name: "utimensat", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.do("explicit", pop{Op: "utimens", Path: "f", N: pastA, M: pastM})
		e.times("explicit times", "f")
		e.do("omit atime", pop{Op: "utimens", Path: "f", N: -2, M: pastA})
		e.times("omit atime times", "f")
		e.do("omit mtime", pop{Op: "utimens", Path: "f", N: pastM, M: -2})
		e.times("omit mtime times", "f")
		s := e.past("f")
		e.do("omit both", pop{Op: "utimens", Path: "f", N: -2, M: -2})
		e.changed("omit both changed", s)
		e.do("now atime", pop{Op: "utimens", Path: "f", N: -1, M: -2})
		e.times("now atime times", "f")
		e.do("now both", pop{Op: "utimens", Path: "f", N: -1, M: -1})
		e.times("now both times", "f")
		e.do("symlink", pop{Op: "symlink", Path: "l", Path2: "f"})
		e.do("nofollow", pop{Op: "utimens", Path: "l", N: pastA, M: pastM, Flags: unix.AT_SYMLINK_NOFOLLOW})
		e.times("link times", "l")
		e.times("target times", "f")
		// Non-owners: UTIME_NOW needs write permission, explicit times
		// ownership.
		e.write("w", "data", 0o666)
		e.write("r", "data", 0o644)
		e.child(nobody, "nobody",
			pop{Op: "utimens", Path: "w", N: -1, M: -1},
			pop{Op: "utimens", Path: "w", N: pastA, M: pastM},
			pop{Op: "utimens", Path: "r", N: -1, M: -1},
			pop{Op: "utimens", Path: "r", N: pastA, M: pastM},
		)
	}},
	{name: "ctime_on_metadata_changes", run: func(e *penv) {
		e.write("f", "data", 0o644)
		s := e.past("f")
		e.do("chmod", pop{Op: "chmod", Path: "f", Mode: 0o600})
		e.changed("after chmod", s)
		s = e.past("f")
		e.do("chown", pop{Op: "chown", Path: "f", N: nobody, M: nobody})
		e.changed("after chown", s)
		s = e.past("f")
		e.do("link", pop{Op: "link", Path: "f", Path2: "f2"})
		e.changed("after link", s)
		s = e.past("f")
		e.do("rename", pop{Op: "rename", Path: "f", Path2: "g"})
		e.changed("after rename", tsnap{rel: "g", ctime: s.ctime})
		s = e.past("g")
		e.do("unlink other name", pop{Op: "unlink", Path: "f2"})
		e.changed("after unlink other name", s)
		s = e.past("g")
		e.do("setxattr", pop{Op: "setxattr", Path: "g", Name: "user.k", Data: "v"})
		e.changed("after setxattr", s)
	}},
	{name: "dir_times_on_entries", run: func(e *penv) {
		e.mkdir("d", 0o755)
		s := e.pastDir("d")
		e.write("d/f", "x", 0o644)
		e.changed("after create", s)
		s = e.pastDir("d")
		e.do("rename within", pop{Op: "rename", Path: "d/f", Path2: "d/g"})
		e.changed("after rename", s)
		s = e.pastDir("d")
		e.do("unlink", pop{Op: "unlink", Path: "d/g"})
		e.changed("after unlink", s)
		s = e.pastDir("d")
		e.do("readdir", pop{Op: "readdir", Path: "d"})
		e.changed("after readdir", s)
	}},
	{name: "mtime_on_write_and_truncate", run: func(e *penv) {
		e.write("f", "data", 0o644)
		s := e.past("f")
		e.do("write", opOpen(1, "f", unix.O_WRONLY, 0), opWrite(1, "DA"), opClose(1))
		e.changed("after write", s)
		s = e.past("f")
		e.do("truncate", pop{Op: "truncate", Path: "f", N: 2})
		e.changed("after truncate", s)
		s = e.past("f")
		e.do("ftruncate", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "ftruncate", Slot: 1, N: 1}, opClose(1))
		e.changed("after ftruncate", s)
		s = e.past("f")
		e.do("open O_TRUNC", opOpen(1, "f", unix.O_WRONLY|unix.O_TRUNC, 0), opClose(1))
		e.changed("after O_TRUNC", s)
		s = e.past("f")
		e.do("open rdwr no write", opOpen(1, "f", unix.O_RDWR, 0), opClose(1))
		e.changed("after open without write", s)
		e.stat("f", "f")
	}},
	{name: "atime_on_read", run: func(e *penv) {
		e.write("f", "data", 0o644)
		s := e.past("f")
		e.do("read", opOpen(1, "f", unix.O_RDONLY, 0), opRead(1, 10), opClose(1))
		e.changed("after read", s)
		s = e.past("f")
		e.do("read again", opOpen(1, "f", unix.O_RDONLY, 0), opRead(1, 10), opClose(1))
		e.changed("after second read", s)
	}, knownDiff: map[string]string{
		"after second read": "atime through FUSE is the backing file's, updated only when a read reaches the daemon; the kernel serves cached pages without one (and the mount sets S_NOATIME on its inodes)",
	}},
	{name: "setuid_cleared_on_unprivileged_write", run: func(e *penv) {
		e.write("w", "data", 0o6777)
		e.write("t", "data", 0o6777)
		e.write("rootw", "data", 0o6777)
		e.write("gnox", "data", 0o2666) // setgid without group exec: mandatory-locking mark, kept
		e.child(nobody, "nobody",
			opOpen(1, "w", unix.O_WRONLY, 0), opWrite(1, "X"), opClose(1),
			pop{Op: "truncate", Path: "t", N: 1},
			opOpen(2, "gnox", unix.O_WRONLY, 0), opWrite(2, "X"), opClose(2),
		)
		e.stat("w", "w")
		e.stat("t", "t")
		e.stat("gnox", "gnox")
		e.do("root write", opOpen(1, "rootw", unix.O_WRONLY, 0), opWrite(1, "X"), opClose(1))
		e.stat("rootw", "rootw")
	}, knownDiff: map[string]string{
		"gnox": setgidNoExecWhy,
	}},
	{name: "setid_cleared_on_write_by_non_owner", run: func(e *penv) {
		// pjdfstest chmod/12: root's file written by another user, and
		// a file of one unprivileged user changed by another.
		setidWrites(e, 0, nobody, 0o4777, 0o2777, 0o6777)
		setidWrites(e, nobody, nobody-1, 0o4777, 0o2777, 0o6777, 0o2767)
	}, knownDiff: map[string]string{
		"uid 65533 on 2767 files of 65534*": setgidNoExecWhy,
		"2767-u65534-*":                     setgidNoExecWhy,
	}},
	{name: "setid_cleared_on_write_by_owner", run: func(e *penv) {
		// Without CAP_FSETID the owner's write clears them too; setgid
		// without group-exec is kept (the owner is in the group).
		setidWrites(e, nobody, nobody, 0o4777, 0o2777, 0o6777, 0o2767)
	}},
	{name: "setuid_cleared_on_chown", run: func(e *penv) {
		e.write("f", "data", 0o6755)
		e.write("g", "data", 0o6745) // setgid without group exec
		e.write("d", "", 0o644)
		e.do("chown f", pop{Op: "chown", Path: "f", N: nobody, M: nobody})
		e.do("chown g", pop{Op: "chown", Path: "g", N: nobody, M: -1})
		e.stat("f", "f")
		e.stat("g", "g")
		e.mkdir("dir", 0o6755)
		e.do("chown dir", pop{Op: "chown", Path: "dir", N: nobody, M: nobody})
		e.stat("dir", "dir")
	}},
	{name: "o_excl", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.do("excl existing", opOpen(1, "f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644))
		e.do("dangling symlink", pop{Op: "symlink", Path: "dangling", Path2: "target"})
		e.do("excl dangling", opOpen(1, "dangling", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644))
		e.stat("target after excl", "target")
		e.do("creat via dangling", opOpen(1, "dangling", unix.O_CREAT|unix.O_WRONLY, 0o600), opWrite(1, "via"), opClose(1))
		e.stat("target after creat", "target")
		e.cat("target content", "target")
		e.do("excl new", opOpen(1, "new", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o640), opClose(1))
		e.stat("new", "new")
		e.do("excl dir", pop{Op: "mkdir", Path: "d", Mode: 0o755}, opOpen(1, "d", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644))
		e.do("open dir for write", opOpen(1, "d", unix.O_WRONLY, 0))
		e.do("excl nofollow", opOpen(1, "dangling", unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW, 0o644))
	}},
	{name: "name_max", run: func(e *penv) {
		n255, n256 := strings.Repeat("a", 255), strings.Repeat("b", 256)
		e.do("create 255", opOpen(1, n255, unix.O_CREAT|unix.O_WRONLY, 0o644), opClose(1))
		e.do("create 256", opOpen(1, n256, unix.O_CREAT|unix.O_WRONLY, 0o644))
		e.do("stat 256", pop{Op: "stat", Path: n256})
		e.do("mkdir 256", pop{Op: "mkdir", Path: n256, Mode: 0o755})
		e.do("rename to 256", pop{Op: "rename", Path: n255, Path2: n256})
		e.do("link to 256", pop{Op: "link", Path: n255, Path2: n256})
		e.do("symlink 256", pop{Op: "symlink", Path: n256, Path2: "x"})
		e.do("symlink 255", pop{Op: "symlink", Path: strings.Repeat("c", 255), Path2: n256})
		e.do("readdir", pop{Op: "readdir", Path: "."})
	}},
	{name: "rename_semantics", run: func(e *penv) {
		e.write("a", "A", 0o644)
		e.write("b", "B", 0o644)
		e.do("file over file", pop{Op: "rename", Path: "a", Path2: "b"})
		e.cat("b", "b")
		e.do("a gone", pop{Op: "stat", Path: "a"})
		e.mkdir("empty", 0o755)
		e.mkdir("src", 0o755)
		e.write("src/x", "x", 0o644)
		e.do("dir over empty dir", pop{Op: "rename", Path: "src", Path2: "empty"})
		e.do("moved content", pop{Op: "stat", Path: "empty/x"})
		e.mkdir("full", 0o755)
		e.write("full/y", "y", 0o644)
		e.mkdir("other", 0o755)
		e.do("dir over non-empty dir", pop{Op: "rename", Path: "other", Path2: "full"})
		e.do("file over dir", pop{Op: "rename", Path: "b", Path2: "other"})
		e.do("dir over file", pop{Op: "rename", Path: "other", Path2: "b"})
		e.mkdir("other/sub", 0o755)
		e.do("into own subdir", pop{Op: "rename", Path: "other", Path2: "other/sub/me"})
		e.write("c", "C", 0o644)
		e.do("noreplace", pop{Op: "rename", Path: "c", Path2: "b", Flags: unix.RENAME_NOREPLACE})
		e.do("noreplace new", pop{Op: "rename", Path: "c", Path2: "c2", Flags: unix.RENAME_NOREPLACE})
		e.do("exchange file and dir", pop{Op: "rename", Path: "c2", Path2: "other", Flags: unix.RENAME_EXCHANGE})
		e.stat("c2 after exchange", "c2")
		e.stat("other after exchange", "other")
		e.cat("other content", "other")
		e.do("exchange missing", pop{Op: "rename", Path: "c2", Path2: "missing", Flags: unix.RENAME_EXCHANGE})
		e.do("exchange+noreplace", pop{Op: "rename", Path: "c2", Path2: "b", Flags: unix.RENAME_EXCHANGE | unix.RENAME_NOREPLACE})
		e.do("link", pop{Op: "link", Path: "b", Path2: "b2"})
		e.do("same inode", pop{Op: "rename", Path: "b", Path2: "b2"})
		e.stat("b after same-inode rename", "b")
		e.stat("b2 after same-inode rename", "b2")
		e.do("missing source", pop{Op: "rename", Path: "nosuch", Path2: "z"})
		e.do("to itself", pop{Op: "rename", Path: "b", Path2: "b"})
		e.do("readdir", pop{Op: "readdir", Path: "."})
	}},
	{name: "rename_dir_by_non_owner", run: func(e *penv) {
		// pjdfstest rename/21: a directory of root's in a world-writable
		// directory, renamed by another user within its parent (no
		// write permission on the directory needed) and moved to
		// another parent (its ".." changes: write permission needed).
		e.mkdir("p", 0o777)
		e.mkdir("q", 0o777)
		e.mkdir("p/d", 0o700)
		e.child(nobody, "nobody",
			pop{Op: "rename", Path: "p/d", Path2: "p/e"},
			pop{Op: "rename", Path: "p/e", Path2: "p/d"},
			pop{Op: "rename", Path: "p/d", Path2: "q/e"},
			pop{Op: "stat", Path: "p/d"},
			pop{Op: "stat", Path: "q/e"},
		)
		e.do("rmdir p/d", pop{Op: "rmdir", Path: "p/d"})
		e.do("rmdir p/d again", pop{Op: "rmdir", Path: "p/d"})
		e.do("rmdir q/e", pop{Op: "rmdir", Path: "q/e"})
		e.write("p/f", "f", 0o644)
		e.child(nobody, "nobody file", pop{Op: "rename", Path: "p/f", Path2: "q/g"})
		e.do("unlink q/g", pop{Op: "unlink", Path: "q/g"})
		e.do("unlink p/f", pop{Op: "unlink", Path: "p/f"})
		e.do("readdir p", pop{Op: "readdir", Path: "p"})
		e.do("readdir q", pop{Op: "readdir", Path: "q"})
	}},
	{name: "rename_dir_sticky_by_non_owner", run: func(e *penv) {
		// pjdfstest rename/09, directories: a sticky directory n0 and a
		// directory n1, owned by nobody or not, a subdirectory owned by
		// nobody or not.
		for _, id := range []int{0, nobody - 1} {
			for _, userOwnsDir := range []bool{true, false} {
				k := fmt.Sprintf("id%d-owns%v", id, userOwnsDir)
				n0, n1 := k+"-n0", k+"-n1"
				e.mkdir(n0, 0o1777)
				e.mkdir(n1, 0o755)
				e.must("chown", unix.Chown(e.p(n1), nobody, nobody))
				dirOwner, subOwner := nobody, id
				if !userOwnsDir {
					dirOwner, subOwner = id, nobody
				}
				e.must("chown", unix.Chown(e.p(n0), dirOwner, dirOwner))
				e.mkdir(n0+"/n2", 0o755)
				e.must("chown", unix.Chown(e.p(n0+"/n2"), subOwner, subOwner))
				e.child(nobody, k,
					pop{Op: "rename", Path: n0 + "/n2", Path2: n1 + "/n3"},
					pop{Op: "stat", Path: n0 + "/n2"},
					pop{Op: "stat", Path: n1 + "/n3"},
					pop{Op: "rename", Path: n0 + "/n2", Path2: n0 + "/n3"},
					pop{Op: "stat", Path: n0 + "/n2"},
					pop{Op: "stat", Path: n0 + "/n3"},
				)
				e.do(k+" back", pop{Op: "rename", Path: n0 + "/n3", Path2: n0 + "/n2"})
				e.do(k+" back2", pop{Op: "rename", Path: n1 + "/n3", Path2: n0 + "/n2"})
				e.child(nobody, k+" mkdir",
					pop{Op: "mkdir", Path: n1 + "/n3", Mode: 0o755},
					pop{Op: "rename", Path: n0 + "/n2", Path2: n1 + "/n3"},
					pop{Op: "stat", Path: n0 + "/n2"},
					pop{Op: "stat", Path: n1 + "/n3"},
					pop{Op: "mkdir", Path: n0 + "/n3", Mode: 0o755},
					pop{Op: "rename", Path: n0 + "/n2", Path2: n0 + "/n3"},
					pop{Op: "stat", Path: n0 + "/n2"},
					pop{Op: "stat", Path: n0 + "/n3"},
				)
				e.do(k+" readdir n0", pop{Op: "readdir", Path: n0})
				e.do(k+" readdir n1", pop{Op: "readdir", Path: n1})
				e.do(k+" cleanup", pop{Op: "rmdir", Path: n0 + "/n2"}, pop{Op: "rmdir", Path: n0 + "/n3"},
					pop{Op: "rmdir", Path: n1 + "/n3"}, pop{Op: "unlink", Path: n0 + "/n2"})
			}
		}
	}},
	{name: "caller_umask_0_setuid_and_rename", run: func(e *penv) {
		// pjdfstest chmod/12 and rename/21 as pjdfstest runs them: the
		// creator's umask is 0 and no chmod follows. A daemon that masks
		// the mode again with its own umask makes the 0777 directory
		// 0755 and the 04777 file 04755: the non-owner's rename and
		// open fail with EACCES, and every later step differs (the
		// rename back ENOENT, an unlink of an existing name ENOENT, of
		// a missing one ok).
		e.child(0, "create", pop{Op: "umask", Mode: 0},
			pop{Op: "mkdir", Path: "n2", Mode: 0o777},
			pop{Op: "mkdir", Path: "n3", Mode: 0o777},
			pop{Op: "mkdir", Path: "n2/n0", Mode: 0o700},
			opOpen(1, "s", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o4777), opClose(1))
		e.child(nobody, "rename dir",
			pop{Op: "rename", Path: "n2/n0", Path2: "n2/n1"},
			pop{Op: "rename", Path: "n2/n1", Path2: "n2/n0"},
			pop{Op: "rename", Path: "n2/n0", Path2: "n3/n1"})
		e.do("rmdir", pop{Op: "rmdir", Path: "n2/n0"}, pop{Op: "rmdir", Path: "n2/n0"},
			pop{Op: "rmdir", Path: "n3/n1"}, pop{Op: "rmdir", Path: "n3/n1"})
		e.child(0, "create file", pop{Op: "umask", Mode: 0},
			opOpen(1, "n2/n0", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644), opClose(1))
		e.child(nobody, "rename file", pop{Op: "rename", Path: "n2/n0", Path2: "n3/n1"})
		e.do("unlink", pop{Op: "unlink", Path: "n3/n1"}, pop{Op: "unlink", Path: "n2/n0"})
		e.child(nobody, "write setuid", opOpen(1, "s", unix.O_WRONLY, 0), opWrite(1, "x"), pop{Op: "fstat", Slot: 1}, opClose(1))
		e.stat("s", "s")
	}},
	{name: "setgid_directory_inheritance", run: func(e *penv) {
		// A setgid directory gives new entries its group, and new
		// subdirectories its setgid bit, whoever creates them.
		e.mkdir("g", 0o2777)
		e.must("chown", unix.Chown(e.p("g"), 0, 100))
		e.must("chmod", unix.Chmod(e.p("g"), 0o2777))
		e.child(nobody, "nobody",
			opOpen(1, "g/f", unix.O_CREAT|unix.O_WRONLY, 0o644), opClose(1),
			pop{Op: "mkdir", Path: "g/d", Mode: 0o755},
			pop{Op: "mknod", Path: "g/p", Mode: unix.S_IFIFO | 0o644},
			pop{Op: "symlink", Path: "g/l", Path2: "f"},
			opOpen(2, "g/x", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o2755), opClose(2),
		)
		e.do("root", opOpen(1, "g/rf", unix.O_CREAT|unix.O_WRONLY, 0o644), opClose(1),
			pop{Op: "mkdir", Path: "g/rd", Mode: 0o755})
		for _, f := range []string{"g/f", "g/d", "g/p", "g/l", "g/x", "g/rf", "g/rd"} {
			e.stat(f, f)
		}
	}},
	{name: "chmod_setgid_by_non_member", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.must("chown", unix.Chown(e.p("f"), nobody, 100))
		e.mkdir("d", 0o755)
		e.must("chown", unix.Chown(e.p("d"), nobody, 100))
		e.child(nobody, "nobody",
			pop{Op: "chmod", Path: "f", Mode: 0o2755},
			pop{Op: "chmod", Path: "d", Mode: 0o2755},
			pop{Op: "chmod", Path: "f", Mode: 0o4755},
			pop{Op: "chmod", Path: "f", Mode: 0o1755},
		)
		e.stat("f", "f")
		e.stat("d", "d")
	}},
	{name: "chown_noop_and_ctime", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.write("mine", "data", 0o644)
		e.must("chown", unix.Chown(e.p("mine"), nobody, nobody))
		s := e.past("f")
		e.do("chown -1 -1", pop{Op: "chown", Path: "f", N: -1, M: -1})
		e.changed("after chown -1 -1", s)
		s = e.past("f")
		e.do("chown same", pop{Op: "chown", Path: "f", N: 0, M: 0})
		e.changed("after chown same", s)
		s = e.past("f")
		e.child(nobody, "nobody", pop{Op: "chown", Path: "f", N: -1, M: -1}, pop{Op: "chmod", Path: "f", Mode: 0o600})
		e.changed("after nobody chown -1 -1", s)
		// nobody's session (its uid's own, docs/DESIGN.md#sessions)
		// changes mine once first: the journal reads the pre-image of a
		// session's first change, which would move atime below.
		e.child(nobody, "nobody mine first", pop{Op: "chmod", Path: "mine", Mode: 0o644})
		s = e.past("mine")
		e.child(nobody, "nobody mine", pop{Op: "chown", Path: "mine", N: -1, M: -1}, pop{Op: "chmod", Path: "mine", Mode: 0o644})
		e.changed("after own chmod same mode", s)
	}},
	{name: "times_on_failed_ops", run: func(e *penv) {
		e.mkdir("d", 0o755)
		e.write("d/f", "data", 0o644)
		e.mkdir("d/full", 0o755)
		e.write("d/full/x", "x", 0o644)
		e.mkdir("d/empty", 0o755)
		sd, sf := e.pastDir("d"), e.past("d/f")
		e.do("excl existing", opOpen(1, "d/f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644))
		e.do("mkdir existing", pop{Op: "mkdir", Path: "d/f", Mode: 0o755})
		e.do("rename onto full", pop{Op: "rename", Path: "d/empty", Path2: "d/full"})
		e.do("rmdir full", pop{Op: "rmdir", Path: "d/full"})
		e.do("rmdir file", pop{Op: "rmdir", Path: "d/f"})
		e.do("unlink dir", pop{Op: "unlink", Path: "d/empty"})
		e.do("link existing", pop{Op: "link", Path: "d/f", Path2: "d/empty"})
		e.do("noreplace", pop{Op: "rename", Path: "d/f", Path2: "d/empty", Flags: unix.RENAME_NOREPLACE})
		e.child(nobody, "nobody",
			opOpen(1, "d/new", unix.O_CREAT|unix.O_WRONLY, 0o644),
			pop{Op: "unlink", Path: "d/f"},
			pop{Op: "rename", Path: "d/f", Path2: "d/g"},
			pop{Op: "truncate", Path: "d/f", N: 0},
			opOpen(2, "d/f", unix.O_WRONLY|unix.O_TRUNC, 0),
			pop{Op: "utimens", Path: "d/f", N: -1, M: -1},
			pop{Op: "setxattr", Path: "d/f", Name: "user.k", Data: "v"},
		)
		e.changed("dir after failures", sd)
		e.changed("file after failures", sf)
		sf = e.past("d/f")
		e.do("read-only write", opOpen(1, "d/f", unix.O_RDONLY, 0), opWrite(1, "x"), pop{Op: "ftruncate", Slot: 1, N: 0}, opClose(1))
		e.changed("file after failed write", sf)
	}},
	{name: "dir_link_counts", run: func(e *penv) {
		e.mkdir("a", 0o755)
		e.mkdir("b", 0o755)
		e.stat("a", "a")
		e.do("mkdir a/s", pop{Op: "mkdir", Path: "a/s", Mode: 0o755})
		e.stat("a after mkdir", "a")
		e.do("rename a/s b/s", pop{Op: "rename", Path: "a/s", Path2: "b/s"})
		e.stat("a after move", "a")
		e.stat("b after move", "b")
		e.do("mkdir a/t", pop{Op: "mkdir", Path: "a/t", Mode: 0o755})
		e.do("exchange", pop{Op: "rename", Path: "a/t", Path2: "b/s", Flags: unix.RENAME_EXCHANGE})
		e.stat("a after exchange", "a")
		e.stat("b after exchange", "b")
		e.write("b/f", "f", 0o644)
		e.do("exchange dir and file", pop{Op: "rename", Path: "a/t", Path2: "b/f", Flags: unix.RENAME_EXCHANGE})
		e.stat("a after exchange 2", "a")
		e.stat("b after exchange 2", "b")
		e.do("rmdir", pop{Op: "rmdir", Path: "b/f"})
		e.stat("b after rmdir", "b")
		e.write("f", "f", 0o644)
		e.do("links", pop{Op: "link", Path: "f", Path2: "g"}, pop{Op: "link", Path: "f", Path2: "a/h"})
		e.stat("f", "f")
		e.do("rename over link", pop{Op: "rename", Path: "a/h", Path2: "g"})
		e.stat("f after rename over own link", "f")
		e.do("write g", opOpen(1, "g", unix.O_WRONLY, 0), opWrite(1, "G"), opClose(1))
		e.write("x", "xx", 0o644)
		e.do("rename x over g", pop{Op: "rename", Path: "x", Path2: "g"})
		e.stat("f after g replaced", "f")
		e.cat("f content", "f")
	}},
	{name: "append_and_offsets", run: func(e *penv) {
		e.write("f", "0123", 0o644)
		e.do("append", opOpen(1, "f", unix.O_WRONLY|unix.O_APPEND, 0), opWrite(1, "ab"),
			pop{Op: "pwrite", Slot: 1, Data: "PW", N: 0}, pop{Op: "lseek", Slot: 1, N: 0, Flags: io.SeekCurrent},
			opOpen(2, "f", unix.O_WRONLY, 0), opWrite(2, "XY"), opWrite(1, "cd"), opClose(2), opClose(1))
		e.cat("f", "f")
		e.do("rdwr append", opOpen(1, "f", unix.O_RDWR|unix.O_APPEND, 0), opRead(1, 3),
			opWrite(1, "!"), pop{Op: "lseek", Slot: 1, N: 0, Flags: io.SeekCurrent},
			pop{Op: "lseek", Slot: 1, N: 0, Flags: io.SeekEnd}, pop{Op: "lseek", Slot: 1, N: 100, Flags: unix.SEEK_DATA},
			pop{Op: "lseek", Slot: 1, N: 0, Flags: unix.SEEK_HOLE}, opClose(1))
		e.do("truncate then append", pop{Op: "truncate", Path: "f", N: 2},
			opOpen(1, "f", unix.O_WRONLY|unix.O_APPEND, 0), opWrite(1, "z"), opClose(1))
		e.cat("f after", "f")
		e.do("write past end", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "pwrite", Slot: 1, Data: "E", N: 10},
			pop{Op: "pread", Slot: 1, N: 0, M: 20}, opClose(1))
		e.stat("f stat", "f")
	}},
	{name: "eloop_and_symlink_paths", run: func(e *penv) {
		e.mkdir("d", 0o755)
		e.write("d/f", "f", 0o644)
		prev := "d/f"
		for i := 0; i < 41; i++ {
			name := fmt.Sprintf("l%02d", i)
			e.must("symlink", unix.Symlink(prev, e.p(name)))
			prev = name
		}
		e.do("open 40", opOpen(1, "l39", unix.O_RDONLY, 0), opClose(1))
		e.do("open 41", opOpen(1, "l40", unix.O_RDONLY, 0))
		e.do("nofollow", opOpen(1, "l00", unix.O_RDONLY|unix.O_NOFOLLOW, 0))
		e.do("nofollow dir", opOpen(1, "l00", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0))
		e.do("symlink to dir", pop{Op: "symlink", Path: "ld", Path2: "d"})
		e.do("through link", pop{Op: "stat", Path: "ld/f"}, pop{Op: "unlink", Path: "ld/f"}, pop{Op: "stat", Path: "d/f"})
		e.do("trailing slash", pop{Op: "stat", Path: "ld/"}, pop{Op: "rename", Path: "ld/", Path2: "ld2"},
			pop{Op: "unlink", Path: "ld/"}, pop{Op: "rmdir", Path: "ld/"})
		e.do("file slash", pop{Op: "stat", Path: "l00/"}, opOpen(1, "x/", unix.O_CREAT|unix.O_WRONLY, 0o644),
			pop{Op: "mkdir", Path: "m/", Mode: 0o755}, pop{Op: "rename", Path: "m", Path2: "m2/"}, pop{Op: "stat", Path: "m2"})
		e.do("dotdot", pop{Op: "stat", Path: "d/../d"}, pop{Op: "rmdir", Path: "d/."}, pop{Op: "rmdir", Path: "d/.."},
			pop{Op: "rename", Path: "d/.", Path2: "e"}, pop{Op: "mkdir", Path: "d/.", Mode: 0o755})
	}},
	{name: "sticky_dir_non_owners", run: func(e *penv) {
		e.mkdir("t", 0o1777)
		e.write("t/root", "r", 0o666)
		e.write("t/other", "o", 0o666)
		e.must("chown", unix.Chown(e.p("t/other"), nobody-1, nobody-1))
		e.mkdir("t/rootdir", 0o777)
		e.child(nobody, "nobody",
			opOpen(1, "t/mine", unix.O_CREAT|unix.O_WRONLY, 0o666), opClose(1),
			pop{Op: "rename", Path: "t/mine", Path2: "t/root"},
			pop{Op: "rename", Path: "t/mine", Path2: "t/other"},
			pop{Op: "rename", Path: "t/root", Path2: "t/mine2"},
			pop{Op: "rename", Path: "t/mine", Path2: "t/root", Flags: unix.RENAME_EXCHANGE},
			pop{Op: "link", Path: "t/root", Path2: "t/rootlink"},
			pop{Op: "rmdir", Path: "t/rootdir"},
			pop{Op: "rename", Path: "t/rootdir", Path2: "t/mydir"},
			pop{Op: "mkdir", Path: "t/mydir", Mode: 0o777},
			pop{Op: "rename", Path: "t/mydir", Path2: "t/rootdir"},
			opOpen(2, "t/root", unix.O_CREAT|unix.O_WRONLY, 0o666), opClose(2),
			pop{Op: "unlink", Path: "t/mine"},
		)
		e.do("readdir", pop{Op: "readdir", Path: "t"})
		e.stat("t/root", "t/root")
	}},
	{name: "tmpfile_owner", run: func(e *penv) {
		e.mkdir("pub", 0o777)
		e.mkdir("g", 0o2777)
		e.must("chown", unix.Chown(e.p("g"), 0, 100))
		e.must("chmod", unix.Chmod(e.p("g"), 0o2777))
		e.child(nobody, "nobody",
			opOpen(1, "pub", unix.O_TMPFILE|unix.O_RDWR, 0o640), pop{Op: "fstat", Slot: 1}, opClose(1),
			opOpen(2, "g", unix.O_TMPFILE|unix.O_RDWR, 0o640), pop{Op: "fstat", Slot: 2}, opClose(2),
		)
	}},
	{name: "acl_permissions", run: func(e *penv) {
		// An access ACL grants nobody what the mode bits do not (and a
		// mask takes away what the group bits give).
		e.write("granted", "g", 0o600)
		e.do("acl granted", pop{Op: "setxattr", Path: "granted", Name: "system.posix_acl_access",
			Data: aclXattr(aclEntry{1, 6, -1}, aclEntry{2, 6, nobody}, aclEntry{4, 0, -1}, aclEntry{0x10, 6, -1}, aclEntry{0x20, 0, -1})})
		e.stat("granted", "granted")
		e.mkdir("d", 0o700)
		e.do("acl dir", pop{Op: "setxattr", Path: "d", Name: "system.posix_acl_access",
			Data: aclXattr(aclEntry{1, 7, -1}, aclEntry{2, 7, nobody}, aclEntry{4, 0, -1}, aclEntry{0x10, 7, -1}, aclEntry{0x20, 0, -1})})
		e.write("masked", "m", 0o666)
		e.do("acl masked", pop{Op: "setxattr", Path: "masked", Name: "system.posix_acl_access",
			Data: aclXattr(aclEntry{1, 6, -1}, aclEntry{2, 0, nobody}, aclEntry{4, 6, -1}, aclEntry{0x10, 6, -1}, aclEntry{0x20, 6, -1})})
		e.child(nobody, "nobody",
			opOpen(1, "granted", unix.O_RDWR, 0), opRead(1, 1), opClose(1),
			pop{Op: "readdir", Path: "d"},
			opOpen(2, "d/new", unix.O_CREAT|unix.O_WRONLY, 0o644), opClose(2),
			opOpen(3, "masked", unix.O_RDONLY, 0), opClose(3),
		)
		e.do("chmod granted", pop{Op: "chmod", Path: "granted", Mode: 0o640})
		e.stat("granted after chmod", "granted")
		e.child(nobody, "nobody after chmod", opOpen(1, "granted", unix.O_RDWR, 0), opClose(1),
			opOpen(2, "granted", unix.O_RDONLY, 0), opClose(2))
	}},
	{name: "acl_default_inherited", run: func(e *penv) {
		e.mkdir("d", 0o777)
		all := aclXattr(aclEntry{1, 7, -1}, aclEntry{2, 6, nobody}, aclEntry{4, 7, -1}, aclEntry{0x10, 7, -1}, aclEntry{0x20, 7, -1})
		e.do("default acl", pop{Op: "setxattr", Path: "d", Name: "system.posix_acl_default", Data: all})
		e.child(0, "create", pop{Op: "umask", Mode: 0o22},
			opOpen(1, "d/f", unix.O_CREAT|unix.O_WRONLY, 0o666), opClose(1),
			pop{Op: "mkdir", Path: "d/s", Mode: 0o777},
			pop{Op: "mknod", Path: "d/p", Mode: unix.S_IFIFO | 0o666},
			opOpen(2, "d", unix.O_TMPFILE|unix.O_RDWR, 0o666), pop{Op: "fstat", Slot: 2}, opClose(2),
			opOpen(3, "plain", unix.O_CREAT|unix.O_WRONLY, 0o666), opClose(3))
		e.stat("d/f", "d/f")
		e.stat("d/s", "d/s")
		e.stat("d/p", "d/p")
		e.stat("plain", "plain")
		e.xattrs("d/s xattrs", "d/s")
		e.child(nobody, "nobody", opOpen(1, "d/f", unix.O_RDWR, 0), opClose(1),
			opOpen(2, "d/s/g", unix.O_CREAT|unix.O_WRONLY, 0o600), opClose(2))
	}},
	{name: "misc_open_flags_and_space", run: func(e *penv) {
		e.write("f", strings.Repeat("x", 8192), 0o644)
		e.write("w", "data", 0o666)
		e.do("statx", pop{Op: "statx", Path: "f"})
		e.do("direct", opOpen(1, "f", unix.O_RDWR|unix.O_DIRECT, 0), opClose(1))
		e.do("fallocate", opOpen(1, "f", unix.O_RDWR, 0),
			pop{Op: "fallocate", Slot: 1, Flags: unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, N: 0, M: 4096},
			pop{Op: "fallocate", Slot: 1, Flags: unix.FALLOC_FL_KEEP_SIZE, N: 8192, M: 4096},
			pop{Op: "fallocate", Slot: 1, Flags: unix.FALLOC_FL_ZERO_RANGE, N: 4096, M: 100},
			pop{Op: "fallocate", Slot: 1, Flags: unix.FALLOC_FL_COLLAPSE_RANGE, N: 0, M: 4096},
			pop{Op: "fallocate", Slot: 1, Flags: unix.FALLOC_FL_INSERT_RANGE, N: 0, M: 4096},
			pop{Op: "fallocate", Slot: 1, Flags: 0, N: 0, M: 20000},
			pop{Op: "fallocate", Slot: 1, Flags: unix.FALLOC_FL_PUNCH_HOLE, N: 0, M: 1},
			pop{Op: "fstat", Slot: 1}, opClose(1))
		e.do("read-only fallocate", opOpen(1, "f", unix.O_RDONLY, 0), pop{Op: "fallocate", Slot: 1, N: 0, M: 1}, opClose(1))
		e.do("efbig", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "pwrite", Slot: 1, Data: "x", N: 1 << 44},
			pop{Op: "ftruncate", Slot: 1, N: 1 << 44}, pop{Op: "fstat", Slot: 1}, opClose(1))
		e.do("access", pop{Op: "access", Path: "f", Mode: unix.X_OK}, pop{Op: "access", Path: "f", Mode: unix.W_OK},
			pop{Op: "access", Path: "f", Mode: unix.X_OK, Flags: unix.AT_EACCESS})
		e.child(nobody, "nobody",
			opOpen(1, "w", unix.O_RDWR|unix.O_NOATIME, 0),
			opOpen(2, "w", unix.O_RDWR, 0), opClose(2),
			pop{Op: "access", Path: "f", Mode: unix.W_OK},
			pop{Op: "access", Path: "w", Mode: unix.W_OK},
			pop{Op: "access", Path: "f", Mode: unix.R_OK, Flags: unix.AT_EACCESS},
			pop{Op: "statx", Path: "w"},
		)
	}, knownDiff: map[string]string{
		"statx":                 statxAttrsWhy,
		"nobody#6 statx":        statxAttrsWhy,
		"fallocate#5 fallocate": fallocRangeWhy,
		"fallocate#4 fallocate": fallocRangeWhy,
	}},
	{name: "misc_non_owner_and_namespaces", run: func(e *penv) {
		e.mkdir("pub", 0o777)
		e.write("pub/rootfile", "r", 0o600)
		e.write("pub/readable", "r", 0o644)
		e.mkdir("ro", 0o755)
		e.write("ro/w", "w", 0o666)
		e.mkdir("noexec", 0o766)
		e.write("x", "x", 0o644)
		e.do("trusted", pop{Op: "setxattr", Path: "x", Name: "trusted.k", Data: "v"},
			pop{Op: "getxattr", Path: "x", Name: "trusted.k"},
			pop{Op: "setxattr", Path: "x", Name: "security.k", Data: "v"},
			pop{Op: "getxattr", Path: "x", Name: "security.k"},
			pop{Op: "setxattr", Path: "x", Name: "bogus.k", Data: "v"},
			pop{Op: "setxattr", Path: "x", Name: "system.posix_acl_access", Data: "junk"})
		e.xattrs("x user xattrs", "x")
		e.child(nobody, "nobody",
			pop{Op: "link", Path: "pub/rootfile", Path2: "pub/mylink"},
			pop{Op: "link", Path: "pub/readable", Path2: "pub/mylink2"},
			pop{Op: "unlink", Path: "ro/w"},
			opOpen(1, "ro/w", unix.O_CREAT|unix.O_WRONLY, 0o644), opWrite(1, "W"), opClose(1),
			opOpen(2, "ro/new", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644),
			opOpen(3, "noexec/f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644),
			pop{Op: "readdir", Path: "noexec"},
			pop{Op: "getxattr", Path: "x", Name: "trusted.k"},
			pop{Op: "setxattr", Path: "x", Name: "trusted.k", Data: "w"},
			pop{Op: "mkdir", Path: "pub/sd", Mode: 0o7777},
			pop{Op: "mknod", Path: "pub/dev", Mode: unix.S_IFCHR | 0o644, N: int64(unix.Mkdev(1, 3))},
			pop{Op: "rename", Path: "pub/readable", Path2: "pub/wh", Flags: unix.RENAME_WHITEOUT},
			pop{Op: "utimens", Path: "pub/readable", N: -1, M: -2},
		)
		e.stat("pub/sd", "pub/sd")
		e.do("whiteout as root", pop{Op: "rename", Path: "pub/readable", Path2: "pub/wh", Flags: unix.RENAME_WHITEOUT})
		e.stat("pub/readable after whiteout", "pub/readable")
		e.do("readdir pub", pop{Op: "readdir", Path: "pub"})
	}},
	{name: "symlink_links_and_zero_writes", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.do("symlinks", pop{Op: "symlink", Path: "l", Path2: "f"}, pop{Op: "link", Path: "l", Path2: "hl"},
			pop{Op: "symlink", Path: "dang", Path2: "nodir/x"},
			opOpen(1, "dang", unix.O_CREAT|unix.O_WRONLY, 0o644),
			pop{Op: "symlink", Path: "long", Path2: strings.Repeat("t", 4095)},
			pop{Op: "symlink", Path: "toolong", Path2: strings.Repeat("t", 4096)},
			pop{Op: "chmod", Path: "l", Mode: 0o600})
		e.stat("hl", "hl")
		e.stat("l", "l")
		e.stat("long", "long")
		e.stat("f after chmod via link", "f")
		s := e.past("f")
		e.do("zero write", opOpen(1, "f", unix.O_WRONLY, 0), opWrite(1, ""), opClose(1))
		e.changed("after zero write", s)
		s = e.past("f")
		e.do("same size truncate", pop{Op: "truncate", Path: "f", N: 4})
		e.changed("after same-size truncate", s)
		s = e.past("f")
		e.do("xattr create twice", pop{Op: "setxattr", Path: "f", Name: "user.a", Data: "1", Flags: unix.XATTR_CREATE})
		s = e.past("f")
		e.do("xattr create again", pop{Op: "setxattr", Path: "f", Name: "user.a", Data: "2", Flags: unix.XATTR_CREATE},
			pop{Op: "removexattr", Path: "f", Name: "user.none"})
		e.changed("after failed xattr ops", s)
		s = e.past("f")
		e.do("removexattr", pop{Op: "removexattr", Path: "f", Name: "user.a"})
		e.changed("after removexattr", s)
		e.write("mine", "m", 0o644)
		e.must("chown", unix.Chown(e.p("mine"), nobody, nobody))
		e.do("symlink to mine", pop{Op: "symlink", Path: "lm", Path2: "mine"})
		e.must("lchown", unix.Lchown(e.p("lm"), nobody, nobody))
		e.child(nobody, "nobody",
			pop{Op: "lchown", Path: "lm", N: -1, M: nobody},
			pop{Op: "lchown", Path: "l", N: -1, M: nobody},
			pop{Op: "chmod", Path: "lm", Mode: 0o600},
			pop{Op: "utimens", Path: "lm", N: pastA, M: pastM, Flags: unix.AT_SYMLINK_NOFOLLOW},
			pop{Op: "utimens", Path: "l", N: pastA, M: pastM, Flags: unix.AT_SYMLINK_NOFOLLOW},
		)
		e.stat("mine", "mine")
	}},
	{name: "tmpfile_linkat", run: func(e *penv) {
		// The atomic-create pattern: write an O_TMPFILE file, then give
		// it a name with linkat.
		e.mkdir("pub", 0o777)
		e.do("root", opOpen(1, ".", unix.O_TMPFILE|unix.O_RDWR, 0o640), opWrite(1, "tmp"),
			pop{Op: "linkfd", Slot: 1, Path: "named"}, pop{Op: "linkfd", Slot: 1, Path: "named"},
			pop{Op: "fstat", Slot: 1}, opWrite(1, "+"), opClose(1),
			opOpen(2, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_EXCL, 0o640),
			pop{Op: "linkfd", Slot: 2, Path: "excl"}, opClose(2))
		e.cat("named", "named")
		e.stat("named stat", "named")
		e.do("excl", pop{Op: "stat", Path: "excl"})
		e.child(nobody, "nobody", opOpen(1, "pub", unix.O_TMPFILE|unix.O_WRONLY, 0o600), opWrite(1, "n"),
			pop{Op: "linkfd", Slot: 1, Path: "pub/mine"}, opClose(1))
		e.stat("pub/mine", "pub/mine")
	}},
	{name: "unlinked_open_xattrs_and_reopen", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.do("xattrs", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "unlink", Path: "f"},
			pop{Op: "fsetxattr", Slot: 1, Name: "user.k", Data: "v"},
			pop{Op: "fgetxattr", Slot: 1, Name: "user.k"},
			pop{Op: "fsetxattr", Slot: 1, Name: "user.k", Data: "w", Flags: unix.XATTR_CREATE},
			pop{Op: "fremovexattr", Slot: 1, Name: "user.k"},
			pop{Op: "fgetxattr", Slot: 1, Name: "user.k"},
			pop{Op: "fremovexattr", Slot: 1, Name: "user.k"})
		e.write("g", "gdata", 0o644)
		e.do("reopen", opOpen(1, "g", unix.O_RDONLY, 0), pop{Op: "unlink", Path: "g"},
			pop{Op: "reopen", Slot: 1, N: 2, Flags: unix.O_RDONLY}, opRead(2, 10),
			pop{Op: "reopen", Slot: 1, N: 3, Flags: unix.O_RDWR}, opWrite(3, "G"), pop{Op: "fstat", Slot: 3},
			opClose(3), opClose(2), opClose(1))
		e.write("h", "hdata", 0o644)
		e.do("reopen named", opOpen(1, "h", unix.O_RDONLY, 0),
			pop{Op: "reopen", Slot: 1, N: 2, Flags: unix.O_WRONLY | unix.O_APPEND}, opWrite(2, "!"), opClose(2), opClose(1))
		e.cat("h", "h")
	}},
	{name: "times_of_moved_directory_and_fsize_limit", run: func(e *penv) {
		e.mkdir("a", 0o755)
		e.mkdir("b", 0o755)
		e.mkdir("a/m", 0o755)
		s := e.pastDir("a/m")
		e.do("move", pop{Op: "rename", Path: "a/m", Path2: "b/m"})
		e.changed("moved dir", tsnap{rel: "b/m", ctime: s.ctime, noAtime: true})
		s = e.pastDir("b/m")
		e.do("rename within", pop{Op: "rename", Path: "b/m", Path2: "b/n"})
		e.changed("renamed dir", tsnap{rel: "b/n", ctime: s.ctime, noAtime: true})
		e.write("f", "0123456789", 0o666)
		e.mkdir("pub", 0o777)
		e.child(nobody, "nobody", pop{Op: "fsizelimit", N: 12},
			opOpen(1, "f", unix.O_WRONLY|unix.O_APPEND, 0), opWrite(1, "abcdef"), opWrite(1, "x"), opClose(1),
			pop{Op: "truncate", Path: "f", N: 100},
			opOpen(2, "pub/new", unix.O_CREAT|unix.O_WRONLY, 0o644), opWrite(2, strings.Repeat("y", 20)), opClose(2))
		e.stat("f", "f")
		e.stat("pub/new", "pub/new")
	}},
	{name: "hard_links", run: func(e *penv) {
		e.write("a", "one", 0o644)
		e.do("link", pop{Op: "link", Path: "a", Path2: "b"})
		e.stat("a", "a")
		e.stat("b", "b")
		e.sameIno("same inode", "a", "b")
		e.do("write via b", opOpen(1, "b", unix.O_WRONLY|unix.O_APPEND, 0), opWrite(1, "+two"), opClose(1))
		e.cat("a content", "a")
		e.do("chmod via a", pop{Op: "chmod", Path: "a", Mode: 0o600})
		e.stat("b after chmod a", "b")
		e.do("link exists", pop{Op: "link", Path: "a", Path2: "b"})
		e.mkdir("d", 0o755)
		e.do("link dir", pop{Op: "link", Path: "d", Path2: "d2"})
		e.stat("d", "d")
		e.do("unlink a", pop{Op: "unlink", Path: "a"})
		e.stat("b after unlink a", "b")
		e.cat("b content", "b")
		e.do("link again", pop{Op: "link", Path: "b", Path2: "c"})
		e.stat("c", "c")
	}},
	{name: "fifo", run: func(e *penv) {
		e.must("mkfifo", unix.Mkfifo(e.p("p"), 0o640))
		e.stat("p", "p")
		e.do("open reader nonblock", opOpen(1, "p", unix.O_RDONLY|unix.O_NONBLOCK, 0))
		e.do("open writer nonblock", opOpen(2, "p", unix.O_WRONLY|unix.O_NONBLOCK, 0))
		e.do("write", opWrite(2, "through"))
		e.do("read", opRead(1, 64))
		e.do("close", opClose(2), opClose(1))
		e.do("writer without reader", opOpen(3, "p", unix.O_WRONLY|unix.O_NONBLOCK, 0))
		e.set("mkfifo again", "%s", errStr(unix.Mkfifo(e.p("p"), 0o640)))
	}},
	{name: "unix_socket", run: func(e *penv) {
		sock := e.sockPath("sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		e.set("bind", "%s", errStr(err))
		if err != nil {
			return
		}
		l.SetUnlinkOnClose(false)
		defer l.Close()
		e.stat("sock", "sock")
		done := make(chan string, 1)
		go func() {
			c, err := l.AcceptUnix()
			if err != nil {
				done <- errStr(err)
				return
			}
			defer c.Close()
			b := make([]byte, 16)
			n, err := c.Read(b)
			done <- fmt.Sprintf("%s %q", errStr(err), b[:n])
		}()
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		e.set("connect", "%s", errStr(err))
		if err == nil {
			_, err = c.Write([]byte("ping"))
			e.set("send", "%s", errStr(err))
			c.Close()
			e.set("accepted", "%s", <-done)
		}
		e.do("open socket", opOpen(1, "sock", unix.O_RDONLY, 0))
		_, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		e.set("bind again", "%s", errStr(err))
		e.do("unlink", pop{Op: "unlink", Path: "sock"})
		_, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		e.set("connect after unlink", "%s", errStr(err))
	}},
	{name: "device_nodes", run: func(e *penv) {
		e.set("mknod c 1 3", "%s", errStr(unix.Mknod(e.p("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))))
		e.stat("null", "null")
		e.do("use", opOpen(1, "null", unix.O_RDWR, 0), opWrite(1, "gone"), opRead(1, 16), opClose(1))
		e.set("mknod c 1 5", "%s", errStr(unix.Mknod(e.p("zero"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5)))))
		e.do("zero", opOpen(1, "zero", unix.O_RDONLY, 0), opRead(1, 4), opClose(1))
		e.set("mknod regular", "%s", errStr(unix.Mknod(e.p("reg"), unix.S_IFREG|0o600, 0)))
		e.stat("reg", "reg")
		e.child(nobody, "nobody",
			pop{Op: "mknod", Path: "mine", Mode: unix.S_IFCHR | 0o666, N: int64(unix.Mkdev(1, 3))},
			opOpen(1, "null", unix.O_WRONLY, 0), opWrite(1, "x"), opClose(1),
			opOpen(2, "zero", unix.O_WRONLY, 0))
	}},
	{name: "xattrs", run: func(e *penv) {
		e.write("f", "data", 0o644)
		p := e.p("f")
		buf := make([]byte, 64)
		_, err := unix.Getxattr(p, "user.missing", buf)
		e.set("get missing", "%s", errStr(err))
		e.set("set a", "%s", errStr(unix.Setxattr(p, "user.a", []byte("alpha"), 0)))
		e.set("set b", "%s", errStr(unix.Setxattr(p, "user.b", []byte(""), 0)))
		e.set("create existing", "%s", errStr(unix.Setxattr(p, "user.a", []byte("x"), unix.XATTR_CREATE)))
		e.set("replace missing", "%s", errStr(unix.Setxattr(p, "user.c", []byte("x"), unix.XATTR_REPLACE)))
		e.set("replace existing", "%s", errStr(unix.Setxattr(p, "user.a", []byte("ALPHA!"), unix.XATTR_REPLACE)))
		n, err := unix.Getxattr(p, "user.a", nil)
		e.set("size query", "%s %d", errStr(err), n)
		_, err = unix.Getxattr(p, "user.a", make([]byte, 2))
		e.set("buffer too small", "%s", errStr(err))
		ln, err := unix.Listxattr(p, nil)
		e.set("list size query", "%s %v", errStr(err), ln > 0)
		e.xattrs("values", "f")
		e.set("remove a", "%s", errStr(unix.Removexattr(p, "user.a")))
		e.set("remove a again", "%s", errStr(unix.Removexattr(p, "user.a")))
		e.xattrs("values after remove", "f")
		e.set("bad namespace", "%s", errStr(unix.Setxattr(p, "bogus.a", []byte("x"), 0)))
		e.set("trusted", "%s", errStr(unix.Setxattr(p, "trusted.rubinofs", []byte("x"), 0)))
		e.set("symlink user xattr", "%s", errStr(func() error {
			e.must("symlink", unix.Symlink("f", e.p("l")))
			return unix.Lsetxattr(e.p("l"), "user.x", []byte("x"), 0)
		}()))
		e.write("ro", "data", 0o644)
		e.must("chown", unix.Chown(e.p("ro"), 0, 0))
		e.must("set", unix.Setxattr(e.p("ro"), "user.k", []byte("v"), 0))
		e.child(nobody, "nobody",
			pop{Op: "getxattr", Path: "ro", Name: "user.k"},
			pop{Op: "setxattr", Path: "ro", Name: "user.k", Data: "w"},
			pop{Op: "removexattr", Path: "ro", Name: "user.k"},
			pop{Op: "getxattr", Path: "ro", Name: "trusted.rubinofs"})
	}},
	{name: "flock", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.do("open two descriptions", opOpen(1, "f", unix.O_RDONLY, 0), opOpen(2, "f", unix.O_RDONLY, 0))
		e.do("ex 1", pop{Op: "flock", Slot: 1, Flags: unix.LOCK_EX | unix.LOCK_NB})
		e.do("ex 2", pop{Op: "flock", Slot: 2, Flags: unix.LOCK_EX | unix.LOCK_NB})
		e.do("sh 2", pop{Op: "flock", Slot: 2, Flags: unix.LOCK_SH | unix.LOCK_NB})
		e.child(0, "other process", opOpen(1, "f", unix.O_RDONLY, 0), pop{Op: "flock", Slot: 1, Flags: unix.LOCK_SH | unix.LOCK_NB})
		e.do("un 1", pop{Op: "flock", Slot: 1, Flags: unix.LOCK_UN})
		e.do("sh 2 after", pop{Op: "flock", Slot: 2, Flags: unix.LOCK_SH | unix.LOCK_NB})
		e.do("sh 1 shared", pop{Op: "flock", Slot: 1, Flags: unix.LOCK_SH | unix.LOCK_NB})
		e.child(0, "other process shared", opOpen(1, "f", unix.O_RDONLY, 0),
			pop{Op: "flock", Slot: 1, Flags: unix.LOCK_SH | unix.LOCK_NB},
			pop{Op: "flock", Slot: 1, Flags: unix.LOCK_EX | unix.LOCK_NB})
		e.do("close 1", opClose(1))
		e.do("close 2 releases", opClose(2))
		e.child(0, "after close", opOpen(1, "f", unix.O_RDONLY, 0), pop{Op: "flock", Slot: 1, Flags: unix.LOCK_EX | unix.LOCK_NB})
	}},
	{name: "fcntl_locks_between_processes", run: func(e *penv) {
		e.write("f", "0123456789", 0o644)
		me := fmt.Sprint(os.Getpid())
		e.do("lock", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "setlk", Slot: 1, Flags: unix.F_WRLCK, N: 0, M: 5})
		e.child(0, "other",
			opOpen(1, "f", unix.O_RDWR, 0),
			pop{Op: "setlk", Slot: 1, Flags: unix.F_WRLCK, N: 0, M: 5},
			pop{Op: "setlk", Slot: 1, Flags: unix.F_RDLCK, N: 2, M: 1},
			pop{Op: "setlk", Slot: 1, Flags: unix.F_WRLCK, N: 5, M: 5},
			pop{Op: "getlk", Slot: 1, Flags: unix.F_WRLCK, Data: me},
		)
		e.do("own second descriptor", opOpen(2, "f", unix.O_RDWR, 0), pop{Op: "setlk", Slot: 2, Flags: unix.F_WRLCK, N: 0, M: 5})
		e.do("getlk self", pop{Op: "getlk", Slot: 2, Flags: unix.F_WRLCK, Data: me})
		e.do("close second releases all", opClose(2))
		e.child(0, "other after close",
			opOpen(1, "f", unix.O_RDWR, 0),
			pop{Op: "setlk", Slot: 1, Flags: unix.F_WRLCK, N: 0, M: 5},
		)
		e.do("close", opClose(1))
	}},
	{name: "fcntl_getlk_pid", run: func(e *penv) {
		e.write("f", "0123456789", 0o644)
		me := fmt.Sprint(os.Getpid())
		e.do("lock", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "setlk", Slot: 1, Flags: unix.F_RDLCK, N: 0, M: 0})
		e.child(0, "other", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "getlk", Slot: 1, Flags: unix.F_WRLCK, Data: me})
		e.do("close", opClose(1))
	}},
	{name: "ofd_locks", run: func(e *penv) {
		e.write("f", "0123456789", 0o644)
		me := fmt.Sprint(os.Getpid())
		e.do("open", opOpen(1, "f", unix.O_RDWR, 0), opOpen(2, "f", unix.O_RDWR, 0))
		e.do("ofd 1", pop{Op: "ofd_setlk", Slot: 1, Flags: unix.F_WRLCK, N: 0, M: 4})
		e.do("ofd 2 conflict", pop{Op: "ofd_setlk", Slot: 2, Flags: unix.F_WRLCK, N: 0, M: 4})
		e.do("ofd 2 beside", pop{Op: "ofd_setlk", Slot: 2, Flags: unix.F_WRLCK, N: 4, M: 4})
		e.do("ofd getlk", pop{Op: "ofd_getlk", Slot: 2, Flags: unix.F_WRLCK, Data: me})
		e.child(0, "other", opOpen(1, "f", unix.O_RDWR, 0),
			pop{Op: "setlk", Slot: 1, Flags: unix.F_RDLCK, N: 0, M: 1},
			pop{Op: "ofd_setlk", Slot: 1, Flags: unix.F_RDLCK, N: 4, M: 1},
			pop{Op: "setlk", Slot: 1, Flags: unix.F_RDLCK, N: 8, M: 1})
		e.do("close 1", opClose(1))
		e.do("ofd 2 after close", pop{Op: "ofd_setlk", Slot: 2, Flags: unix.F_WRLCK, N: 0, M: 4})
		e.do("close 2", opClose(2))
	}},
	{name: "unlinked_open_file", run: func(e *penv) {
		e.write("a", "hello", 0o644)
		e.write("b", "b", 0o644)
		e.do("open", opOpen(1, "a", unix.O_RDWR, 0))
		e.do("unlink", pop{Op: "unlink", Path: "a"})
		e.do("readdir", pop{Op: "readdir", Path: "."})
		e.do("fstat", pop{Op: "fstat", Slot: 1})
		e.do("pread", pop{Op: "pread", Slot: 1, N: 0, M: 16})
		e.do("stat name", pop{Op: "stat", Path: "a"})
		e.do("recreate", opOpen(2, "a", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644), opWrite(2, "new"), opClose(2))
		e.do("old handle", pop{Op: "pread", Slot: 1, N: 0, M: 16})
		e.cat("new name", "a")
		e.do("close", opClose(1))
	}},
	{name: "write_unlinked_open_file", run: func(e *penv) {
		e.write("a", "hello", 0o644)
		e.do("open", opOpen(1, "a", unix.O_RDWR, 0))
		e.do("unlink", pop{Op: "unlink", Path: "a"})
		e.do("ftruncate", pop{Op: "ftruncate", Slot: 1, N: 3})
		e.do("pwrite", pop{Op: "pwrite", Slot: 1, Data: "LP", N: 1})
		e.do("pread", pop{Op: "pread", Slot: 1, N: 0, M: 16})
		e.do("fstat", pop{Op: "fstat", Slot: 1})
		e.do("close", opClose(1))
	}},
	{name: "fchmod_unlinked_open_file", run: func(e *penv) {
		e.write("a", "hello", 0o644)
		e.do("open", opOpen(1, "a", unix.O_RDWR, 0))
		e.do("unlink", pop{Op: "unlink", Path: "a"})
		e.do("fchmod", pop{Op: "fchmod", Slot: 1, Mode: 0o600})
		e.do("fchown", pop{Op: "fchown", Slot: 1, N: nobody, M: nobody})
		e.do("futimes", pop{Op: "futimes", Slot: 1, N: 1_000_000_000, M: 1_100_000_000})
		e.do("times", pop{Op: "fmtime", Slot: 1})
		e.do("truncate link", pop{Op: "truncate_fd_link", Slot: 1, N: 2})
		e.do("fstat", pop{Op: "fstat", Slot: 1})
		e.do("close", opClose(1))
	}},
	{name: "o_append", run: func(e *penv) {
		e.write("f", "one", 0o644)
		e.do("append", opOpen(1, "f", unix.O_WRONLY|unix.O_APPEND, 0), opWrite(1, "+two"),
			pop{Op: "lseek", Slot: 1, N: 0, Flags: io.SeekStart}, opWrite(1, "+three"),
			pop{Op: "pwrite", Slot: 1, Data: "+four", N: 0}, opClose(1))
		e.do("other writer", opOpen(2, "f", unix.O_WRONLY, 0), pop{Op: "pwrite", Slot: 2, Data: "ONE", N: 0}, opWrite(2, "_"), opClose(2))
		e.do("append after", opOpen(1, "f", unix.O_WRONLY|unix.O_APPEND, 0), opWrite(1, "+five"), opClose(1))
		e.cat("content", "f")
		e.stat("f", "f")
	}},
	{name: "two_handles_one_session", run: func(e *penv) {
		e.write("f", "one", 0o644)
		e.do("first", opOpen(1, "f", unix.O_WRONLY|unix.O_APPEND, 0), opWrite(1, "+two"))
		e.do("second", opOpen(2, "f", unix.O_WRONLY, 0), pop{Op: "pwrite", Slot: 2, Data: "ONE", N: 0}, opClose(2))
		e.do("first again", opWrite(1, "+three"), opClose(1))
		e.cat("content", "f")
	}},
	{name: "truncate_extend", run: func(e *penv) {
		e.write("f", "abc", 0o644)
		e.do("truncate up", pop{Op: "truncate", Path: "f", N: 10})
		e.cat("content", "f")
		e.do("ftruncate up", opOpen(1, "f", unix.O_RDWR, 0), pop{Op: "ftruncate", Slot: 1, N: 1 << 20},
			pop{Op: "pread", Slot: 1, N: 1<<20 - 4, M: 8}, pop{Op: "pwrite", Slot: 1, Data: "end", N: 1 << 21}, opClose(1))
		e.stat("f", "f")
		e.do("read hole", opOpen(1, "f", unix.O_RDONLY, 0), pop{Op: "pread", Slot: 1, N: 1 << 20, M: 4},
			pop{Op: "pread", Slot: 1, N: 1<<21 - 2, M: 8}, opClose(1))
		e.do("truncate down", pop{Op: "truncate", Path: "f", N: 2})
		e.cat("content after", "f")
		e.do("negative", pop{Op: "truncate", Path: "f", N: -1})
		e.mkdir("d", 0o755)
		e.do("truncate dir", pop{Op: "truncate", Path: "d", N: 0})
		e.do("open dir rdwr", opOpen(1, "d", unix.O_RDWR, 0))
	}},
	{name: "symlinks", run: func(e *penv) {
		e.write("f", "data", 0o644)
		e.do("symlink", pop{Op: "symlink", Path: "l", Path2: "f"})
		e.do("symlink abs-looking", pop{Op: "symlink", Path: "abs", Path2: "/nonexistent/x"})
		e.do("symlink exists", pop{Op: "symlink", Path: "l", Path2: "g"})
		e.stat("l", "l")
		for _, l := range []string{"l", "abs", "f"} {
			buf := make([]byte, 256)
			n, err := unix.Readlink(e.p(l), buf)
			e.set("readlink "+l, "%s %q", errStr(err), buf[:max(n, 0)])
		}
		e.cat("through", "l")
		e.do("lchown", pop{Op: "lchown", Path: "l", N: nobody, M: nobody})
		e.stat("l after lchown", "l")
		e.stat("f after lchown", "f")
		e.do("chown follows", pop{Op: "chown", Path: "l", N: 1, M: 1})
		e.stat("f after chown", "f")
		e.do("nofollow", opOpen(1, "l", unix.O_RDONLY|unix.O_NOFOLLOW, 0))
		e.do("path", opOpen(1, "l", unix.O_PATH|unix.O_NOFOLLOW, 0), opClose(1))
		e.do("loop", pop{Op: "symlink", Path: "loop", Path2: "loop"}, opOpen(1, "loop", unix.O_RDONLY, 0))
		e.do("dir symlink", pop{Op: "mkdir", Path: "d", Mode: 0o755}, pop{Op: "symlink", Path: "dl", Path2: "d"},
			pop{Op: "readdir", Path: "dl"}, pop{Op: "rmdir", Path: "dl"}, pop{Op: "unlink", Path: "dl"})
	}},
	{name: "statfs", run: func(e *penv) {
		var st unix.Statfs_t
		e.must("statfs", unix.Statfs(e.dir, &st))
		flags := st.Flags & (unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC)
		e.set("geometry", "bsize=%d frsize=%d namelen=%d blocks=%d files=%d", st.Bsize, st.Frsize, st.Namelen, st.Blocks, st.Files)
		e.set("flags", "%#x", flags)
		e.set("type", "%#x", st.Type)
	}, knownDiff: map[string]string{
		"type": "f_type of a FUSE mount is FUSE_SUPER_MAGIC (0x65735546), not the backing filesystem's",
	}},
}

// setidWrites makes, for each mode, files owned by owner (uid and gid)
// with that mode, then has uid change each one in one way: write,
// O_TRUNC open, O_CREAT|O_TRUNC open of the existing name, ftruncate and
// truncate by path. It records the mode fstat sees through the writing
// handle and the mode afterwards.
func setidWrites(e *penv, owner, uid int, modes ...uint32) {
	e.t.Helper()
	ways := []string{"write", "otrunc", "creat", "ftruncate", "truncate"}
	for _, mode := range modes {
		var ops []pop
		var files []string
		for _, how := range ways {
			f := fmt.Sprintf("%04o-u%d-%s", mode, owner, how)
			files = append(files, f)
			e.write(f, "data", mode)
			if owner != 0 {
				e.must("chown", unix.Chown(e.p(f), owner, owner))
				e.must("chmod", unix.Chmod(e.p(f), mode)) // chown cleared the bits
			}
			switch how {
			case "write":
				ops = append(ops, opOpen(1, f, unix.O_WRONLY, 0), opWrite(1, "X"), pop{Op: "fstat", Slot: 1})
			case "otrunc":
				ops = append(ops, opOpen(1, f, unix.O_WRONLY|unix.O_TRUNC, 0), pop{Op: "fstat", Slot: 1})
			case "creat":
				ops = append(ops, opOpen(1, f, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644), pop{Op: "fstat", Slot: 1})
			case "ftruncate":
				ops = append(ops, opOpen(1, f, unix.O_RDWR, 0), pop{Op: "ftruncate", Slot: 1, N: 1}, pop{Op: "fstat", Slot: 1})
			case "truncate":
				ops = append(ops, pop{Op: "truncate", Path: f, N: 1}, opOpen(1, f, unix.O_RDONLY, 0), pop{Op: "fstat", Slot: 1})
			}
			ops = append(ops, opClose(1))
		}
		e.child(uid, fmt.Sprintf("uid %d on %04o files of %d", uid, mode, owner), ops...)
		for _, f := range files {
			e.stat(f, f)
		}
	}
}

// aclEntry is one entry of a POSIX ACL: tag (ACL_USER_OBJ 1, ACL_USER 2,
// ACL_GROUP_OBJ 4, ACL_GROUP 8, ACL_MASK 0x10, ACL_OTHER 0x20), rwx
// permission bits and a uid or gid (-1 for none).
type aclEntry struct {
	tag, perm uint16
	id        int
}

// aclXattr encodes entries (in the kernel's order: by tag, then id) as
// the value of system.posix_acl_access (version 2).
func aclXattr(entries ...aclEntry) string {
	b := []byte{2, 0, 0, 0}
	for _, en := range entries {
		id := uint32(en.id)
		b = append(b, byte(en.tag), byte(en.tag>>8), byte(en.perm), byte(en.perm>>8),
			byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	return string(b)
}

// secondUidWriters are the cases (their directories) in which uid 65534
// writes a file only root's child read: refused by the guard per uid.
var secondUidWriters = []string{
	"perm_file_modes_unprivileged", "setuid_cleared_on_unprivileged_write",
	"setid_cleared_on_write_by_non_owner", "setid_cleared_on_write_by_owner",
	"caller_umask_0_setuid_and_rename", "misc_non_owner_and_namespaces",
	"times_of_moved_directory_and_fsize_limit",
}

// TestPosixCompare runs every case natively and through the mount, with the
// guard off and enforcing (one mount per mode, a subtest per case), and
// asserts equal records.
func TestPosixCompare(t *testing.T) {
	requireFuse(t)
	if os.Geteuid() != 0 {
		t.Skip("the POSIX comparison needs root: chown, mknod and unprivileged children")
	}
	bin := helperBinary(t)
	// The guard off and enforcing, both with the change journal on as
	// shipped, and enforcing without the journal.
	variants := []struct {
		name    string
		mode    guard.Mode
		journal bool
	}{
		{guard.ModeOff.String(), guard.ModeOff, true},
		{guard.ModeEnforce.String(), guard.ModeEnforce, true},
		{guard.ModeEnforce.String() + "-nojournal", guard.ModeEnforce, false},
	}
	for _, v := range variants {
		mode := v.mode
		t.Run(v.name, func(t *testing.T) {
			m := newMount(t, nil, func(c *daemon.Config) {
				c.Mode = mode
				c.Options = append(c.Options, "allow_other", "dev", "suid")
				if mode == guard.ModeEnforce {
					// In these cases uid 65534 writes files its own
					// session never read (root's child read them): each
					// uid outside every session is a session of its own
					// (docs/DESIGN.md#sessions), so the guard refuses
					// them, as it should. Their POSIX behaviour is
					// compared with the guard out of the way.
					for _, d := range secondUidWriters {
						c.Guard.Exempt = append(c.Guard.Exempt, d+"/**")
					}
				}
				if !v.journal {
					withoutJournal(c) // newMount's default is on
				}
			})
			openUp(t, m.tmp)
			if _, err := os.Stat(filepath.Join(m.state, "journal")); (err == nil) != v.journal {
				t.Fatalf("journal %v wanted, STATE/journal: %v", v.journal, err)
			}
			native := filepath.Join(m.tmp, "native")
			if err := os.Mkdir(native, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, c := range posixCases {
				t.Run(c.name, func(t *testing.T) {
					// RUBINOFS_POSIX_PENDING=1 runs pending cases too, to
					// check a fix.
					runPending := os.Getenv("RUBINOFS_POSIX_PENDING") == "1"
					if c.pending != "" && !runPending {
						t.Skip("pending: " + c.pending)
					}
					if c.pendingEnforce != "" && mode == guard.ModeEnforce && !runPending {
						t.Skip("pending with the guard enforcing: " + c.pendingEnforce)
					}
					nd, md := filepath.Join(native, c.name), m.path(c.name)
					for _, d := range []string{nd, md} {
						if err := os.Mkdir(d, 0o755); err != nil {
							t.Fatal(err)
						}
					}
					want := runCase(t, c, nd, bin)
					got := runCase(t, c, md, bin)
					if os.Getenv("RUBINOFS_POSIX_SHOW") == "1" {
						for _, k := range want.keys {
							t.Logf("%s = %s", k, want.vals[k])
						}
					}
					if diff := diffRecords(want, got, c.knownDiff, t); diff != "" {
						t.Errorf("native and mount differ (- native, + mount):\n%s", diff)
					}
				})
			}
		})
	}
}

// record is a case's result: keys in order and their values.
type record struct {
	keys []string
	vals map[string]string
}

// runCase runs c in dir and returns its record. Descriptors the case left
// open are closed.
func runCase(t *testing.T, c posixCase, dir, bin string) record {
	t.Helper()
	e := &penv{t: t, dir: dir, bin: bin, vals: map[string]string{}, slots: map[int]int{}}
	defer func() {
		for _, fd := range e.slots {
			unix.Close(fd)
		}
	}()
	c.run(e)
	return record{keys: e.keys, vals: e.vals}
}

// diffRecords returns a readable diff of two records, leaving out keys in
// known (logged instead).
func diffRecords(want, got record, known map[string]string, t *testing.T) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, k := range want.keys {
		seen[k] = true
		g, ok := got.vals[k]
		if !ok {
			g = "(missing)"
		}
		w := want.vals[k]
		why, isKnown := knownWhy(known, k)
		if g == w {
			if isKnown {
				t.Logf("known difference %q did not show (both %s)", k, w)
			}
			continue
		}
		if isKnown {
			t.Logf("known difference %s: native %s, mount %s (%s)", k, w, g, why)
			continue
		}
		fmt.Fprintf(&b, "  %s\n    - %s\n    + %s\n", k, w, g)
	}
	for _, k := range got.keys {
		if !seen[k] {
			fmt.Fprintf(&b, "  %s\n    - (missing)\n    + %s\n", k, got.vals[k])
		}
	}
	return b.String()
}

// knownWhy returns the reason known gives for record key k: by the key
// itself, or by a key ending in "*" that k starts with.
func knownWhy(known map[string]string, k string) (string, bool) {
	if why, ok := known[k]; ok {
		return why, true
	}
	for pat, why := range known {
		if p, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(k, p) {
			return why, true
		}
	}
	return "", false
}

// openUp makes dir and its parent (both the test's own temporary
// directories) searchable by the unprivileged child.
func openUp(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// helperBinary copies this test binary where an unprivileged child can
// execute it (go test's build directory is private) and returns its path.
func helperBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	openUp(t, dir)
	dst := filepath.Join(dir, "posix-child")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
