package benchkit

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BinaryPrefix starts a target spec in -only that mounts with an external
// rubinofs binary: "bin:LABEL=PATH[:ARG...]" (see ParseBinarySpec).
const BinaryPrefix = "bin:"

// BinarySpec is a parsed "bin:LABEL=PATH[:ARG...]" target spec: the
// target's name (LABEL), the rubinofs binary (PATH, any commit's
// cmd/rubinofs) and extra `rubinofs mount` arguments (ARG..., split at
// ':', such as --journal=false).
type BinarySpec struct {
	Label, Bin string
	Args       []string
}

// ParseBinarySpec parses spec, "bin:LABEL=PATH[:ARG...]". An error names
// what is missing.
func ParseBinarySpec(spec string) (BinarySpec, error) {
	rest, ok := strings.CutPrefix(spec, BinaryPrefix)
	label, path, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || label == "" || path == "" {
		return BinarySpec{}, fmt.Errorf("target %q: want bin:LABEL=PATH[:ARG...]", spec)
	}
	parts := strings.Split(path, ":")
	abs, err := filepath.Abs(parts[0])
	if err != nil {
		return BinarySpec{}, err
	}
	if _, err := os.Stat(abs); err != nil {
		return BinarySpec{}, fmt.Errorf("target %q: %w", spec, err)
	}
	return BinarySpec{Label: label, Bin: abs, Args: parts[1:]}, nil
}

// Binary mounts rubinofs over tmp/LABEL-back at tmp/LABEL with the
// external binary of spec, through its CLI as a user does: `BIN mount
// --daemon --state-dir tmp/LABEL-state ARGS... BACK MNT`, which returns
// once the mount answers, its daemon a process of its own (inheriting
// this process's nice and ionice). With no ARGS that is the shipped
// defaults of that build: the guard enforcing, the watcher on with one-hour
// kernel caches and, in a build that has one, the change journal on, as
// the in-process "rubinofs" target (the CLI also sets its own runtime
// options, such as a soft memory limit). XDG_CONFIG_HOME and
// XDG_STATE_HOME point into tmp/LABEL-xdg, so no user config is read and
// the state retention at mount prunes nothing outside it. The target's
// Pid is the daemon's; it has no Daemon. Teardown (or Close) unmounts
// with `BIN unmount` (a lazy unmount if that fails) and waits up to 10 s
// for the daemon to exit.
func Binary(tmp string, spec BinarySpec) (*Target, error) {
	name := spec.Label
	back, mnt, err := dirs(tmp, name)
	if err != nil {
		return nil, err
	}
	state, xdg := filepath.Join(tmp, name+"-state"), filepath.Join(tmp, name+"-xdg")
	args := append([]string{"mount", "--daemon", "--state-dir", state}, spec.Args...)
	cmd := exec.Command(spec.Bin, append(args, back, mnt)...)
	cmd.Dir = "/"
	cmd.Env = append(Env(), "XDG_CONFIG_HOME="+filepath.Join(xdg, "config"), "XDG_STATE_HOME="+filepath.Join(xdg, "state"))
	out, err := Output(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %s mount: %v: %s", name, spec.Bin, err, out)
	}
	// "mounted BACK at MNT (pid N, log PATH)"
	_, rest, _ := strings.Cut(string(out), "(pid ")
	num, _, _ := strings.Cut(rest, ",")
	pid, perr := strconv.Atoi(strings.TrimSpace(num))
	t := &Target{Name: name, Dir: mnt, Back: back, State: state, Pid: pid}
	t.close = func() {
		if n := t.Denials(); n > 0 {
			log.Printf("%s: %d denials during the workload (%s)", name, n, filepath.Join(mnt, ".rubino", "guard", "denials"))
		}
		if out, err := exec.Command(spec.Bin, "unmount", mnt).CombinedOutput(); err != nil {
			log.Printf("%s: unmount: %v: %s; detaching", name, err, out)
			lazyUnmount(mnt)
		}
		for i := 0; pid > 0 && i < 1000 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	AtExit(t.Close)
	if perr != nil {
		t.Close()
		return nil, fmt.Errorf("%s: no daemon pid in %q", name, out)
	}
	// A build with a change journal has .rubino/self/journal; with
	// --journal=false it refuses checkpoints.
	_, serr := os.Stat(filepath.Join(mnt, ".rubino", "self", "journal"))
	t.journal = serr == nil && !hasArg(spec.Args, "--journal=false")
	return t, nil
}

// hasArg reports whether args holds a.
func hasArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// binaryDenials counts the lines of .rubino/guard/denials of the mount at
// mnt: the refusals its guard logged (0 if the file cannot be read).
func binaryDenials(mnt string) int {
	b, err := os.ReadFile(filepath.Join(mnt, ".rubino", "guard", "denials"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Printf("%s: denials: %v", mnt, err)
		}
		return 0
	}
	return strings.Count(string(b), "\n")
}
