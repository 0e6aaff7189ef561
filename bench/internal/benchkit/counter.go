package benchkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// CounterWorker increments the number in the file counter rounds times:
// read it, add one, write it back; a refused write (EACCES, or EAGAIN when
// another mount held the file's cross-mount lock) is retried from the
// read. It returns the successful writes and the refusals.
func CounterWorker(counter string, rounds int) (ok, refused int, err error) {
	for ok < rounds {
		b, err := os.ReadFile(counter)
		if err != nil {
			return ok, refused, err
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue // read a truncated file mid-write: read again
		}
		err = os.WriteFile(counter, []byte(strconv.Itoa(v+1)+"\n"), 0o644)
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EAGAIN) {
			refused++
			continue
		}
		if err != nil {
			return ok, refused, err
		}
		ok++
	}
	return ok, refused, nil
}

// RegisterSession makes this process the root of a new session of the
// mount mnt (.rubino/sessions/clone).
func RegisterSession(mnt string) error {
	f, err := os.OpenFile(filepath.Join(mnt, ".rubino/sessions/clone"), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "pid=%d cmd=bench worker\n", os.Getpid()); err != nil {
		return err
	}
	buf := make([]byte, 128)
	_, err = f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return err
	}
	return nil
}

// CounterSession is one worker process of RunCounterWorkers: the counter
// file it increments and the mount it registers a session with ("": none).
type CounterSession struct{ Counter, Mount string }

// RunCounterWorkers runs one worker process per session at once, each
// this program re-executed as `-worker COUNTER -mount MOUNT -rounds N`
// (the program runs CounterWorker for those flags and prints "successes
// refusals"), waits for all and returns the sums.
func RunCounterWorkers(sessions []CounterSession, rounds int) (ok, refused int, err error) {
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for _, s := range sessions {
		cmd := exec.Command("/proc/self/exe", "-worker", s.Counter, "-mount", s.Mount, "-rounds", fmt.Sprint(rounds))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr, cmd.Dir = out, os.Stderr, "/"
		if err := Start(cmd); err != nil {
			return 0, 0, err
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		werr := cmd.Wait()
		Done(cmd)
		if werr != nil && err == nil {
			err = fmt.Errorf("worker %d: %v", i, werr)
		}
		var o, r int
		fmt.Sscan(outs[i].String(), &o, &r)
		ok, refused = ok+o, refused+r
	}
	return ok, refused, err
}
