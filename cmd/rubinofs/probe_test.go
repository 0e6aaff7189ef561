package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProbeChildLines: the probe child stats its paths in order, one line
// each, stops at the first that exists, and the parent reads each line
// back as the stat's result: an *os.PathError with the errno for a missing
// path, nil for the one found.
func TestProbeChildLines(t *testing.T) {
	dir := t.TempDir()
	have := filepath.Join(dir, "have")
	if err := os.WriteFile(have, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing, after := filepath.Join(dir, "missing"), filepath.Join(dir, "after")
	var out bytes.Buffer
	if code := probeChildMain(probeStat, []string{missing, have, after}, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("lines %q, want two: the missing path's and the found one's", lines)
	}
	err := probeResult(missing, string(lines[0]))
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != missing || !errors.Is(err, syscall.ENOENT) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing path: %v (%T), want an *os.PathError of %s with ENOENT", err, err, missing)
	}
	if err := probeResult(have, string(lines[1])); err != nil {
		t.Errorf("found path: %v", err)
	}
	if err := probeResult(have, "garbage"); err == nil {
		t.Errorf("an unreadable line was taken for a result")
	}
}

// TestMain runs this test binary as the probe child when probeIn starts
// it (it execs /proc/self/exe, which here is the test binary), and the
// tests otherwise. The mode probeHang, for the tests only, never answers.
func TestMain(m *testing.M) {
	if mode, ok := isProbeChild(os.Args); ok {
		if mode == probeHang {
			select {}
		}
		os.Exit(probeChildMain(mode, os.Args[1:], os.Stdout))
	}
	os.Exit(m.Run())
}

// probeHang is a probe mode of this test binary's child that never
// answers, as a child whose request a daemon holds.
const probeHang = "hang"

// TestProbeNoAnswer: a child that does not answer within the timeout
// makes the probe report errNoAnswer for that path and return, its child
// killed and not waited for (the kill of a child stuck in a held request
// takes effect only once the daemon answers).
func TestProbeNoAnswer(t *testing.T) {
	dir := t.TempDir()
	var got []error
	probeIn(probeHang, 200*time.Millisecond, []string{dir, filepath.Dir(dir)}, func(i int, err error) bool {
		got = append(got, err)
		return !errors.Is(err, errNoAnswer)
	})
	if len(got) != 1 || !errors.Is(got[0], errNoAnswer) {
		t.Fatalf("results %v, want errNoAnswer for the first path and nothing after", got)
	}
}

// TestProbeLongPath: a path too long for the kernel (or for a line of
// the child's answer, were the path in it) is an error for that path, and
// the probe goes on and returns. A line longer than the parent's reader
// used to make it wait for a child blocked on a full pipe.
func TestProbeLongPath(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("x/", 40000))
	var got []error
	probeStats([]string{long, dir}, func(i int, err error) bool {
		got = append(got, err)
		return err != nil
	})
	if len(got) != 2 || !errors.Is(got[0], syscall.ENAMETOOLONG) || got[1] != nil {
		t.Fatalf("results %v, want ENAMETOOLONG and then nil", got)
	}
}

// TestProbeChildMarkers: only a run with both markers (the variable and
// argv[0]) is a probe child; the variable alone, left in a user's
// environment, changes nothing.
func TestProbeChildMarkers(t *testing.T) {
	t.Setenv(probeChildEnv, probeStat)
	if _, ok := isProbeChild([]string{"rubinofs", "status"}); ok {
		t.Errorf("the variable alone made a run a probe child")
	}
	if mode, ok := isProbeChild([]string{probeChildArg0, "/x"}); !ok || mode != probeStat {
		t.Errorf("a run with both markers: %q %v", mode, ok)
	}
	var out bytes.Buffer
	if code := probeChildMain("nosuch", nil, &out); code != 2 {
		t.Errorf("an unknown mode: exit %d, want 2", code)
	}
}

// TestProbeChildStartsNone: a process that is itself a probe child stats
// in-process instead of starting another child, so a binary run as a
// child by mistake (a test binary without TestMain's check) cannot start
// children without end. Seen: the test binary of this package, before
// its TestMain, started itself for every probe, each copy ran every test,
// and the copies multiplied until they were killed.
func TestProbeChildStartsNone(t *testing.T) {
	t.Setenv(probeChildEnv, probeStat)
	old := probeExe
	probeExe = "/bin/echo" // a child would answer with its arguments
	t.Cleanup(func() { probeExe = old })
	dir := t.TempDir()
	var got []error
	probeStats([]string{filepath.Join(dir, "none"), dir}, func(i int, err error) bool {
		got = append(got, err)
		return err != nil
	})
	if len(got) != 2 || !errors.Is(got[0], fs.ErrNotExist) || got[1] != nil {
		t.Fatalf("results %v, want not-exist and then nil, stat'ed in this process", got)
	}
}

// TestProbeHeldBound: with maxHeldProbes children already left behind
// on requests a daemon holds, a probe starts no other child (nor makes
// the request itself) and answers errNoAnswer at once; a left child,
// once it ends, is counted out.
func TestProbeHeldBound(t *testing.T) {
	dir := t.TempDir()
	var got []error
	probeIn(probeHang, 100*time.Millisecond, []string{dir}, func(i int, err error) bool {
		got = append(got, err)
		return false
	})
	if len(got) != 1 || !errors.Is(got[0], errNoAnswer) {
		t.Fatalf("a child that never answers: %v, want errNoAnswer", got)
	}
	// The killed child ends (it holds no request here) and is counted out.
	deadline := time.Now().Add(time.Minute) // failsafe
	for heldProbes.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d probe children still counted a minute after their kill", heldProbes.Load())
		}
		time.Sleep(time.Millisecond) // polling the counter the reaper goroutine lowers
	}
	heldProbes.Store(maxHeldProbes)
	t.Cleanup(func() { heldProbes.Store(0) })
	old := probeExe
	probeExe = filepath.Join(dir, "none") // a child started would fail, and the stat would run here
	t.Cleanup(func() { probeExe = old })
	got = nil
	probeStats([]string{dir}, func(i int, err error) bool {
		got = append(got, err)
		return false
	})
	if len(got) != 1 || !errors.Is(got[0], errNoAnswer) {
		t.Fatalf("with %d children left behind: %v, want errNoAnswer without a probe", maxHeldProbes, got)
	}
}
