package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

// probeKinds are the system calls a probe times: "fstat" is fstat(2) of a
// file kept open (on a mount with zero attribute timeout, one GETATTR
// each); "open" is open(2) read-only and close(2) of one file (on the
// floor mount, one OPEN and one RELEASE each).
var probeKinds = []string{"fstat", "open"}

// probeResult is one probe's figures: the median and the mean time of
// one call (of an open and its close for "open").
type probeResult struct{ Median, Mean time.Duration }

// runProbe is the child side (-probe KIND -file PATH -n N): it times n
// calls of kind on path, one at a time after 100 untimed ones, and prints
// the median and the mean in nanoseconds.
func runProbe(kind, path string, n int) error {
	var call func() error
	switch kind {
	case "fstat":
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fd := int(f.Fd())
		var st syscall.Stat_t
		call = func() error { return syscall.Fstat(fd, &st) }
	case "open":
		call = func() error {
			fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			return syscall.Close(fd)
		}
	default:
		return fmt.Errorf("unknown probe %q (want one of %v)", kind, probeKinds)
	}
	for range 100 {
		if err := call(); err != nil {
			return err
		}
	}
	ds := make([]time.Duration, n)
	start := time.Now()
	for i := range ds {
		t0 := time.Now()
		if err := call(); err != nil {
			return err
		}
		ds[i] = time.Since(t0)
	}
	mean := time.Since(start) / time.Duration(n)
	slices.Sort(ds)
	fmt.Println(int64(ds[n/2]), int64(mean))
	return nil
}

// probe runs this program as a child process timing n calls of kind on
// path (runProbe): a process of its own, as the workload's tools are,
// so the in-process FUSE servers do not share its scheduler.
func probe(kind, path string, n int) (probeResult, error) {
	cmd := exec.Command("/proc/self/exe", "-probe", kind, "-file", path, "-n", fmt.Sprint(n))
	cmd.Dir = "/"
	out, err := benchkit.Output(cmd)
	if err != nil {
		return probeResult{}, fmt.Errorf("probe %s %s: %v: %s", kind, path, err, out)
	}
	var med, mean int64
	if _, err := fmt.Sscan(string(out), &med, &mean); err != nil {
		return probeResult{}, fmt.Errorf("probe %s %s: %q: %v", kind, path, out, err)
	}
	return probeResult{time.Duration(med), time.Duration(mean)}, nil
}

// probeFile makes dir/probe, 4 KiB, and returns its path.
func probeFile(dir string) (string, error) {
	p := filepath.Join(dir, "probe")
	return p, os.WriteFile(p, make([]byte, 4096), 0o644)
}
