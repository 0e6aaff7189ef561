package tests

// The torture tests run published file-system torture tools through an
// enforcing mount (the default config: guard enforcing, watcher on) and
// assert what the tools check themselves (their own verification of every
// byte they wrote, read back) and what only the mount knows: the tools touch
// nothing but files they created, so the guard must refuse nothing
// (.rubino/guard/denials empty, status counts 0 denials), and nothing
// outside touched the workspace, so the watcher must report no external
// change. Each run is first made on a plain directory outside any mount: a
// tool that fails there is an environment problem (the test skips), never
// the mount's.
//
// Runs are bounded by operation counts (stress-ng --<stressor>-ops, fio
// --size), never by time, and seeded, so a run does the same work on a fast
// and a slow machine; the context deadline is only a hang detector. The
// daemon runs inside this race-instrumented test binary, so sizes are chosen
// for a few seconds each under -race on two cores.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tortureHang bounds one tool run: far above the run's expected few
// seconds, reached only by a hang.
const tortureHang = 5 * time.Minute

// stressNGStressor is one stress-ng stressor run with its bounding options.
type stressNGStressor struct {
	name string
	args []string // after --NAME 1: the -ops bound and sizes
}

// stressNGStressors are the file-system stressors that verify their work
// (--verify) and run on FUSE. Left out: io (only sync(2), which flushes
// every file system of the machine and checks nothing of the mount's).
// link and symlink make thousands of names per bogo operation, so one
// operation is a full round. Not run: fiemap, which FUSE cannot serve
// (FS_IOC_FIEMAP is answered by the VFS, and FUSE has no FIEMAP request:
// stress-ng skips it on every FUSE mount). mmap is bounded by ops, not
// time: one op is a pass over the whole mapping, page by page, each page
// a few daemon round trips (docs/DESIGN.md#torture-limits).
var stressNGStressors = []stressNGStressor{
	{"dir", []string{"--dir-ops", "200"}},
	{"rename", []string{"--rename-ops", "500"}},
	{"link", []string{"--link-ops", "1"}},
	{"fallocate", []string{"--fallocate-ops", "20", "--fallocate-bytes", "1m"}},
	{"iomix", []string{"--iomix-ops", "500", "--iomix-bytes", "1m"}},
	{"mmap", []string{"--mmap-ops", "5", "--mmap-bytes", "1m", "--mmap-file"}},
	{"xattr", []string{"--xattr-ops", "20"}},
	{"hdd", []string{"--hdd-ops", "200", "--hdd-bytes", "1m"}},
	{"dentry", []string{"--dentry-ops", "20"}},
	{"filename", []string{"--filename-ops", "20"}},
	{"chdir", []string{"--chdir-ops", "20", "--chdir-dirs", "64"}},
	{"lockf", []string{"--lockf-ops", "200"}},
	// mknod makes regular files too, and removes them unread.
	{"mknod", []string{"--mknod-ops", "100"}},
	// fsize grows sparse files to the file size limit and appends to them
	// (docs/DESIGN.md#hash-bound).
	{"fsize", []string{"--fsize-ops", "20"}},
}

// stressNGProblem matches the lines in which stress-ng reports a failed
// check or call. It logs some failures (a failed write, a failed rmdir of
// its temporary directory) without failing its exit status, so the exit
// status alone is not enough.
var stressNGProblem = regexp.MustCompile(`(?m)^stress-ng: (fail|error):.*$`)

// runStressNG runs one stressor with its temporary directory in dir and
// returns its combined output and error.
func runStressNG(t *testing.T, dir string, s stressNGStressor) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tortureHang)
	defer cancel()
	args := append([]string{"--" + s.name, "1"}, s.args...)
	args = append(args, "--verify", "--seed", "1", "--temp-path", dir, "--metrics-brief")
	return runTortureTool(ctx, t, "stress-ng", args...)
}

// runTortureTool runs a tool with its working directory outside any mount
// (a fork whose child chdirs into a mount served by this process can
// deadlock: golang/go#11155) and returns its combined output and error; a
// run cut short by the hang detector is an error that says so.
func runTortureTool(ctx context.Context, t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = testEnv(cmd.Dir)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %v in %v", name, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: no exit within %v, a hang", err, tortureHang)
	}
	return out.String(), err
}

// uniqueLines returns lines without repeats, in their first order
// (stress-ng writes each failure to both stdout and stderr).
func uniqueLines(lines []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// requireTool skips the test when tool is not installed (CI installs it:
// .ci/run).
func requireTool(t *testing.T, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("%s is not installed (Debian package %s)", tool, pkg)
	}
}

// TestTortureStressNG runs each stress-ng file-system stressor with
// --verify in a fresh enforcing mount: it must pass its own verification,
// report no failure, leave no file behind, and the mount must log no
// refusal and no external change.
func TestTortureStressNG(t *testing.T) {
	requireTool(t, "stress-ng", "stress-ng")
	for _, s := range stressNGStressors {
		t.Run(s.name, func(t *testing.T) {
			native := t.TempDir()
			if out, err := runStressNG(t, native, s); err != nil || stressNGProblem.MatchString(out) {
				t.Skipf("stress-ng --%s fails on a plain directory (%v), so not the mount's:\n%s", s.name, err, out)
			}
			m := newMount(t, nil, nil)
			if err := os.Mkdir(m.path(s.name), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { clearInodeFlags(m.ws) })
			out, err := runStressNG(t, m.path(s.name), s)
			if err != nil {
				t.Errorf("stress-ng --%s through the mount: %v", s.name, err)
			}
			if problems := uniqueLines(stressNGProblem.FindAllString(out, -1)); len(problems) > 0 {
				t.Errorf("stress-ng --%s through the mount reported:\n%s", s.name, strings.Join(problems, "\n"))
			}
			if t.Failed() {
				t.Logf("stress-ng output:\n%s", out)
			}
			m.mappedStores = s.name == "mmap"
			m.assertUntouched(t, s.name)
		})
	}
}

// fioJob is one fio job: the arguments after the common ones.
type fioJob struct {
	name string
	args []string
}

// fioJobs write with a crc32c checksum in every block and read every block
// back to verify it (do_verify, verify_fatal: the first bad block fails the
// run).
var fioJobs = []fioJob{
	// Random 4 KiB reads and writes over an 8 MiB file.
	{"randrw", []string{"--rw=randrw", "--bs=4k", "--size=8m"}},
	// A sequential 16 MiB write, then its verification.
	{"seqwrite", []string{"--rw=write", "--bs=64k", "--size=16m"}},
}

// TestTortureFio runs fio jobs that verify what they wrote (crc32c) in a
// fresh enforcing mount: fio must report no error, and the mount must log
// no refusal and no external change.
func TestTortureFio(t *testing.T) {
	requireTool(t, "fio", "fio")
	run := func(t *testing.T, dir string, j fioJob) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), tortureHang)
		defer cancel()
		args := append([]string{"--name=" + j.name, "--directory=" + dir, "--ioengine=psync",
			"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0",
			"--randseed=1", "--numjobs=1", "--unlink=1"}, j.args...)
		return runTortureTool(ctx, t, "fio", args...)
	}
	for _, j := range fioJobs {
		t.Run(j.name, func(t *testing.T) {
			if out, err := run(t, t.TempDir(), j); err != nil || !fioClean(out) {
				t.Skipf("fio job %s fails on a plain directory (%v), so not the mount's:\n%s", j.name, err, out)
			}
			m := newMount(t, nil, nil)
			if err := os.Mkdir(m.path(j.name), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, m.path(j.name), j)
			if err != nil || !fioClean(out) {
				t.Errorf("fio job %s through the mount: %v\n%s", j.name, err, out)
			}
			m.assertUntouched(t, j.name)
		})
	}
}

// fioClean reports whether fio's output shows the job ended with no error
// ("err= 0") and no verification failure.
func fioClean(out string) bool {
	return strings.Contains(out, " err= 0:") && !strings.Contains(out, "verify:") &&
		!strings.Contains(strings.ToLower(out), "bad magic") && !strings.Contains(out, "crc32c: verify failed")
}

// assertUntouched checks the mount after a tool that touched only files it
// created: the guard refused nothing (guard/denials is empty and status
// counts 0 denials), the watcher saw no external change (when status has
// the counter), and, when dir is not empty, the tool removed everything it
// made under dir in the backing workspace.
func (m *mount) assertUntouched(t *testing.T, dir string) {
	t.Helper()
	for _, d := range m.denials() {
		b, _ := json.Marshal(d)
		t.Errorf("refused: %s", b)
	}
	st := readStatus(t, m.mnt)
	counts, _ := st["counts"].(map[string]any)
	if n, ok := counts["denials"].(float64); !ok || n != 0 {
		t.Errorf("status counts.denials = %v, want 0", counts["denials"])
	}
	if w, ok := st["watcher"].(map[string]any); !ok {
		t.Errorf("status has no watcher: %v", st)
	} else if n, ok := w["external_events"].(float64); ok && n != 0 {
		if m.mappedStores {
			// Stores through a shared mapping of a writable passthrough
			// handle reach the backing file without a request, so inotify
			// may report them as outside edits: the guard decides by hash
			// (docs/DESIGN.md#passthrough-mmap-credit). Refusals and the
			// tree are still checked.
			t.Logf("status watcher.external_events = %v (own_events %v): stores through shared mappings", n, w["own_events"])
		} else {
			t.Errorf("status watcher.external_events = %v, want 0 on a mount nothing outside touched (own_events %v)", n, w["own_events"])
		}
	}
	if dir == "" {
		return
	}
	var left []string
	filepath.WalkDir(m.backing(dir), func(p string, e os.DirEntry, err error) error {
		if p != m.backing(dir) {
			rel, _ := filepath.Rel(m.ws, p)
			left = append(left, rel)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left behind in the workspace: %s", strings.Join(left, " "))
	}
}

// clearInodeFlags clears the immutable and append-only flags (chattr -ia)
// of every file under root, so that the test's temporary directory can be
// removed after a tool that set them (stress-ng iomix sets and clears them
// through the mount, and leaves them set when it is stopped in between).
func clearInodeFlags(root string) {
	const fsImmutableFl, fsAppendFl = 0x10, 0x20 // FS_IMMUTABLE_FL, FS_APPEND_FL of linux/fs.h
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() && !e.IsDir() {
			return nil
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		defer unix.Close(fd)
		if flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err == nil && flags&(fsImmutableFl|fsAppendFl) != 0 {
			unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags&^(fsImmutableFl|fsAppendFl)))
		}
		return nil
	})
}
