// Package benchkit is what the benchmark commands under bench/ share: the
// teardown that leaves no mount or child process behind on any exit path,
// the targets (native, bare go-fuse loopbacks, rubinofs in a given guard
// mode), the repository fetched from the Go module proxy, timed shell
// steps, medians and the FUSE op counters of .rubino/metrics.
//
// It is for benchmarks only: nothing in the product imports it.
package benchkit

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

var (
	// teardownMu serialises Teardown: a second caller (main's Fatal after
	// a signal killed its child) waits for the first to finish before it
	// exits the process.
	teardownMu sync.Mutex
	mu         sync.Mutex
	cleanups   []func() // run last-registered first
	children   = map[int]*exec.Cmd{}
)

// AtExit registers fn to run at Exit, Fatal, a caught SIGINT/SIGTERM/SIGHUP
// or the deferred Teardown, whichever comes first; functions run in reverse
// order of registration, each once. Safe for concurrent use.
func AtExit(fn func()) {
	mu.Lock()
	defer mu.Unlock()
	cleanups = append(cleanups, fn)
}

// Teardown kills the running child processes (by pid, with their process
// groups) and runs the AtExit functions. main defers it, so a return or a
// panic in main tears down too. Idempotent; concurrent callers return
// once the teardown is complete.
func Teardown() {
	teardownMu.Lock()
	defer teardownMu.Unlock()
	mu.Lock()
	kids := make([]*exec.Cmd, 0, len(children))
	for _, c := range children {
		kids = append(kids, c)
	}
	fns := cleanups
	cleanups = nil
	mu.Unlock()
	for _, c := range kids {
		if c.Process != nil {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL) // its own group (Setpgid)
			c.Process.Kill()
		}
	}
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// Fatal tears down, then logs v and exits with status 1 (log.Fatal skips
// deferred functions, so it would leave the mounts behind).
func Fatal(v ...any) {
	Teardown()
	log.Fatal(v...)
}

// Fatalf is Fatal with a format.
func Fatalf(format string, v ...any) { Fatal(fmt.Sprintf(format, v...)) }

// CatchSignals makes SIGINT, SIGTERM and SIGHUP tear down and exit with
// status 130 instead of killing the process with its mounts attached.
func CatchSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-ch
		stopping.Store(true)
		log.Printf("%v: tearing down", s)
		Teardown()
		os.Exit(130)
	}()
}

var stopping atomic.Bool

// Stopping reports whether a caught signal is tearing down: a long loop
// of the harness's own (generating a tree) checks it so it does not write
// into a directory the teardown removes.
func Stopping() bool { return stopping.Load() }

// Start starts cmd in a process group of its own and tracks it, so
// Teardown can kill it (and what it started) by pid. Call Done after Wait.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	mu.Lock()
	defer mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	children[cmd.Process.Pid] = cmd
	return nil
}

// Done forgets a child started with Start once it has been waited for.
func Done(cmd *exec.Cmd) {
	mu.Lock()
	defer mu.Unlock()
	if cmd.Process != nil {
		delete(children, cmd.Process.Pid)
	}
}

// Output runs cmd like exec.Cmd.CombinedOutput, tracked by Start and Done.
func Output(cmd *exec.Cmd) ([]byte, error) {
	var b syncBuffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := Start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	Done(cmd)
	return b.Bytes(), err
}

// syncBuffer is a byte buffer safe for cmd's stdout and stderr copiers.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b...)
}

// TempDir makes the benchmark's temporary directory (os.MkdirTemp("",
// pattern)) and arranges for it and every mount under it to go on every
// exit path: removed by Teardown on an orderly one and, should the process
// die without tearing down (SIGKILL, a panic on a daemon goroutine), by a
// reaper: a /bin/sh child in a process group of its own that waits for
// end-of-file on a pipe only this process holds, then lazily unmounts
// whatever /proc/mounts still lists under the directory and removes it.
// Teardown closes the pipe last and waits for the reaper to exit.
//
// The directory is marked a top of directory hierarchies (spreadTargets),
// so that each target's tree made in it lands in block groups of its own.
func TempDir(pattern string) (string, error) {
	tmp, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	spreadTargets(tmp)
	r, w, err := os.Pipe()
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	reap := `read x; grep -F " $TMP/" /proc/mounts | cut -d' ' -f2 | while read m; do umount -l "$m"; done; rm -rf "$TMP"`
	cmd := exec.Command("/bin/sh", "-c", reap)
	cmd.Dir, cmd.Stdin = "/", r
	cmd.Env = append(os.Environ(), "TMP="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's ^C must not end it first
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		os.RemoveAll(tmp)
		return "", err
	}
	r.Close()
	AtExit(func() { // registered first, so it runs last
		w.Close()
		cmd.Wait()
	})
	AtExit(func() { os.RemoveAll(tmp) })
	return tmp, nil
}

// spreadTargets sets FS_TOPDIR_FL on dir, where the filesystem has it
// (ext2/3/4: chattr +T), and ignores a refusal. ext4 then places each
// directory made in dir (each target's tree) in a block group of its own,
// as it does directories made in the root, instead of beside dir. Without
// it every target's files share the same groups, and ext4 without a
// journal skips each inode freed in a group in the last 30 s (5.5 min
// while its inode table block is dirty) when it allocates one there: a
// target's clone then paid for the removals the targets before it had
// just made (docs/BENCHMARKS.md, "Where a create's time goes").
func spreadTargets(dir string) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return
	}
	unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFl))
}

// fsTopdirFl is FS_TOPDIR_FL of linux/fs.h (x/sys/unix does not name it).
const fsTopdirFl = 0x00020000
