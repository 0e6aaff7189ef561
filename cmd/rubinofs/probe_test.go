package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
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

// TestMain runs this test binary as the probe child when probeStats
// starts it (it execs /proc/self/exe, which here is the test binary), and
// the tests otherwise.
func TestMain(m *testing.M) {
	if mode := os.Getenv(probeChildEnv); mode != "" {
		os.Exit(probeChildMain(mode, os.Args[1:], os.Stdout))
	}
	os.Exit(m.Run())
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
