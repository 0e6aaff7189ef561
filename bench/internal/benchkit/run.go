package benchkit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// Env is the environment of every benchmark step: git without system
// config and with a fixed identity, and the C locale.
func Env() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=b@x.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=b@x.invalid", "LC_ALL=C")
}

// Shq quotes s for /bin/sh.
func Shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Run times script run by /bin/sh in dir, with Env plus env. The process
// starts with its working directory outside the mount and cds in the shell:
// the child changes to cmd.Dir between fork and exec, while the harness
// holds its fork lock, and a chdir into an in-process mount there can
// deadlock the harness against its own FUSE server.
// The error carries the combined output.
func Run(dir, script string, env ...string) (time.Duration, error) {
	cmd := exec.Command("/bin/sh", "-c", "cd "+Shq(dir)+" && "+script)
	cmd.Dir = "/"
	cmd.Env = append(Env(), env...)
	start := time.Now()
	b, err := Output(cmd)
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%v: %s", err, b)
	}
	return d, nil
}

// Median returns the median of ds (the upper one of an even count); 0 for
// none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// MedianFloat is Median of plain numbers (rates, bytes a second).
func MedianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// ModuleDir downloads module (path@version) through the Go module proxy
// (go mod download) and returns its read-only directory in the module
// cache.
func ModuleDir(module string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var dir string
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == `"Dir"` {
			dir = strings.Trim(strings.TrimSpace(v), `",`)
		}
	}
	if dir == "" {
		return "", fmt.Errorf("no Dir for %s", module)
	}
	return dir, nil
}

// CopyScript is a shell command that copies the module directory src to
// dst (which it makes) and makes the copy writable.
func CopyScript(src, dst string) string {
	return fmt.Sprintf("mkdir -p %s && cp -r %s/. %s && chmod -R u+w %s", Shq(dst), Shq(src), Shq(dst), Shq(dst))
}

// MakeOrigin puts module's source under git at origin, one commit, as the
// repository the workloads clone.
func MakeOrigin(module, origin string) error {
	dir, err := ModuleDir(module)
	if err != nil {
		return err
	}
	script := CopyScript(dir, origin) + " && cd " + Shq(origin) + " && git init -q && git add -A && git commit -qm import"
	if _, err := Run("/", script); err != nil {
		return fmt.Errorf("making the origin: %v", err)
	}
	return nil
}

// MakeBranchedOrigin puts two versions of one module under git at origin
// for SwitchSteps: branch "old" holds oldModule's source (path@version),
// branch "main" (checked out) newModule's, one commit each on one line.
func MakeBranchedOrigin(oldModule, newModule, origin string) error {
	oldDir, err := ModuleDir(oldModule)
	if err != nil {
		return err
	}
	newDir, err := ModuleDir(newModule)
	if err != nil {
		return err
	}
	script := CopyScript(oldDir, origin) + " && cd " + Shq(origin) +
		" && git init -q -b main && git add -A && git commit -qm old && git branch old" +
		" && git rm -rq . && " + CopyScript(newDir, origin) + " && git add -A && git commit -qm new"
	if _, err := Run("/", script); err != nil {
		return fmt.Errorf("making the branched origin: %v", err)
	}
	return nil
}

// Ops reads rubinofs_fuse_ops_total of the mount at mnt from
// .rubino/metrics: FUSE requests served so far, by operation. The read
// itself is counted (an open, a read or two, a release).
func Ops(mnt string) (map[string]float64, error) {
	b, err := os.ReadFile(filepath.Join(mnt, ctltree.DirName, "metrics"))
	if err != nil {
		return nil, err
	}
	ops := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const prefix = `rubinofs_fuse_ops_total{op="`
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		op, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			ops[op] = v
		}
	}
	return ops, sc.Err()
}

// OpsDelta returns after minus before, leaving out operations that did
// not change, as "op=N" sorted by count, largest first.
func OpsDelta(before, after map[string]float64) string {
	type kv struct {
		op string
		n  float64
	}
	var d []kv
	for op, n := range after {
		if x := n - before[op]; x > 0 {
			d = append(d, kv{op, x})
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i].n > d[j].n || d[i].n == d[j].n && d[i].op < d[j].op })
	var parts []string
	for _, e := range d {
		parts = append(parts, fmt.Sprintf("%s=%.0f", e.op, e.n))
	}
	return strings.Join(parts, " ")
}

// ProcStatus returns the fields of /proc/PID/status (pid 0: self) named in
// keys, in kB as the kernel gives them (VmRSS, VmHWM, ...).
func ProcStatus(pid int, keys ...string) (map[string]int64, error) {
	p := "/proc/self/status"
	if pid != 0 {
		p = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !want[k] {
			continue
		}
		f := strings.Fields(v)
		if len(f) > 0 {
			out[k], _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return out, nil
}

// ProcCPU returns the CPU time process pid has used so far, user and
// system, all its threads (utime + stime of /proc/PID/stat, in clock
// ticks of 10 ms at the usual USER_HZ of 100). Unlike wall time it barely
// moves with the load of other processes on the machine, which makes it
// the steadier figure to compare two builds on a shared machine.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return time.Duration(utime+stime) * (time.Second / clockTicks), nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// InotifyWatches counts the inotify watches held by process pid (0: self):
// the "inotify wd:" lines of its inotify descriptors' fdinfo.
func InotifyWatches(pid int) int {
	base := "/proc/self"
	if pid != 0 {
		base = fmt.Sprintf("/proc/%d", pid)
	}
	ents, err := os.ReadDir(base + "/fdinfo")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(base + "/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		n += bytes.Count(b, []byte("\ninotify wd:"))
	}
	return n
}

// lazyUnmount detaches mnt (MNT_DETACH): the last resort when a normal
// unmount fails because something still holds the mount.
func lazyUnmount(mnt string) {
	syscall.Unmount(mnt, syscall.MNT_DETACH)
}

// Module is the repository bench/agent and bench/build use by default:
// golang.org/x/tools at a version that builds with the Go toolchain of the
// benchmark machine (go1.26; v0.28.0's internal/tokeninternal no longer
// compiles there).
const Module = "golang.org/x/tools@v0.52.0"

// OldModule is the older version of Module that bench/agent -workload
// switch checks out: about a year of golang.org/x/tools apart.
const OldModule = "golang.org/x/tools@v0.30.0"
