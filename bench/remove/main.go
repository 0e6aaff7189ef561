// Command remove measures what one removal costs through each layer of
// rubinofs: `rm -rf` of a tree of small files that the mount has read
// (every file seen by its session, so the guard allows each unlink), on
// native, a bare go-fuse loopback with 1 s timeouts (loop-1s) and rubinofs
// binaries mounted through their CLI with any arguments (bin: targets,
// as bench/agent's -only), so that one run can set the shipped build
// beside the same build with the journal, the watcher or the guard off.
//
// Per target and run it reports the wall time of the `rm -rf`, and the
// daemon's CPU time and context switches (voluntary and involuntary, all
// threads) from the start of the removal until the daemon has been idle
// for -settle, so that work left for later (the journal's flusher, the
// watcher's batches) is counted too. For loop-1s and loop-1s-perms (the
// same with default_permissions, as rubinofs mounts), served by this
// process, the CPU and switches are this process's. Targets alternate,
// the order rotating every run; the table gives medians. With -written
// the tree is written through the mount instead (and a journaled target
// takes a checkpoint), as `git clone` then `rm -rf` leave it: the
// pre-images the removal links are files whose pages are still dirty.
//
// Usage (as root):
//
//	go build -o /tmp/rubinofs ./cmd/rubinofs
//	go run ./bench/remove -runs 5 -only loop-1s,bin:shipped=/tmp/rubinofs,\
//	    bin:nojournal=/tmp/rubinofs:--journal=false,bin:nowatch=/tmp/rubinofs:--watch=false
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

var (
	runs    = flag.Int("runs", 5, "runs per target")
	dirs    = flag.Int("dirs", 40, "directories in the tree")
	files   = flag.Int("files", 50, "files per directory")
	only    = flag.String("only", "loop-1s", "comma-separated targets besides native: loop-1s, loop-1s-perms (loop-1s with default_permissions) and bin:LABEL=PATH[:ARG...] (a rubinofs binary mounted through its CLI with ARGs)")
	written = flag.Bool("written", false, "write the tree through the mount (as git clone does) and take a checkpoint on journaled targets, instead of making it in the backing directory and reading it: the pre-images rm links are then freshly written files whose pages the journal's flush writes back")
	settle  = flag.Duration("settle", 1500*time.Millisecond, "the daemon must use no CPU for this long before its CPU and switches are read (covers the journal's 1 s flush)")
)

// sample is one removal's figures.
type sample struct {
	wall, cpu time.Duration
	switches  int64
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	tmp, err := benchkit.TempDir("rubinofs-remove-")
	if err != nil {
		log.Fatal(err)
	}
	targets, err := benchkit.Mount(tmp, *only, "native", "loop-1s", "loop-1s-perms")
	if err != nil {
		benchkit.Fatal(err)
	}
	got := map[string][]sample{}
	for r := 0; r < *runs && !benchkit.Stopping(); r++ {
		for k := range targets {
			t := targets[(k+r)%len(targets)]
			s, err := removeOnce(t, r+1)
			if err != nil {
				benchkit.Fatalf("%s: %v", t.Name, err)
			}
			got[t.Name] = append(got[t.Name], s)
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}
	n := *dirs * *files
	how := "read through the mount first"
	if *written {
		how = "written through the mount first, then a checkpoint"
	}
	fmt.Printf("\n`rm -rf` of %d files in %d directories, %s; medians of %d runs\n\n", n, *dirs, how, *runs)
	fmt.Println("| target | wall ms | per file µs | daemon CPU ms | per file µs | context switches | per file |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, t := range targets {
		ss := got[t.Name]
		wall := median(ss, func(s sample) float64 { return float64(s.wall) })
		line := fmt.Sprintf("| %s | %.0f | %.0f |", t.Name, wall/1e6, wall/1e3/float64(n))
		if t.Name == "native" {
			fmt.Println(line + " | | | |")
			continue
		}
		cpu := median(ss, func(s sample) float64 { return float64(s.cpu) })
		sw := median(ss, func(s sample) float64 { return float64(s.switches) })
		fmt.Printf("%s %.0f | %.0f | %.0f | %.1f |\n", line, cpu/1e6, cpu/1e3/float64(n), sw, sw/float64(n))
	}
}

// removeOnce makes the tree (makeTree), waits for the daemon to settle,
// and times `rm -rf` of it.
func removeOnce(t *benchkit.Target, run int) (sample, error) {
	var s sample
	top, err := makeTree(t, run)
	if err != nil {
		return s, err
	}
	pid := t.Pid
	if pid == 0 && t.Name != "native" {
		pid = os.Getpid() // an in-process mount
	}
	cpu0, sw0, err := settled(pid)
	if err != nil {
		return s, err
	}
	s.wall, err = benchkit.Run(t.Dir, "rm -rf "+strings.Join(top, " "))
	if err != nil {
		return s, err
	}
	cpu1, sw1, err := settled(pid)
	if err != nil {
		return s, err
	}
	s.cpu, s.switches = cpu1-cpu0, sw1-sw0
	return s, nil
}

// settled waits until pid is idle (idle) and returns its usage then
// (usage); for pid 0 (native), 0, 0 at once.
func settled(pid int) (time.Duration, int64, error) {
	if pid != 0 {
		if err := idle(pid); err != nil {
			return 0, 0, err
		}
	}
	return usage(pid)
}

// makeTree makes the tree of -dirs directories of -files files and
// returns its top-level names: in t's backing directory, every file then
// read through t; with -written, written through t by a shell, then a
// checkpoint when t journals.
func makeTree(t *benchkit.Target, run int) ([]string, error) {
	var top []string
	for d := 0; d < *dirs; d++ {
		top = append(top, fmt.Sprintf("d%d", d))
	}
	if *written {
		script := fmt.Sprintf(`for d in $(seq 0 %d); do mkdir d$d; for f in $(seq 0 %d); do echo "content $d $f" > d$d/f$f; done; done`, *dirs-1, *files-1)
		if _, err := benchkit.Run(t.Dir, script); err != nil {
			return nil, err
		}
		if t.Journaled() {
			if err := benchkit.Checkpoint(t.Dir, fmt.Sprintf("run %d", run)); err != nil {
				return nil, err
			}
		}
		return top, nil
	}
	for d := 0; d < *dirs; d++ {
		dir := filepath.Join(t.Back, fmt.Sprintf("d%d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		for f := 0; f < *files; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", f)), []byte(fmt.Sprintf("content %d %d\n", d, f)), 0o644); err != nil {
				return nil, err
			}
		}
	}
	if _, err := benchkit.Run(t.Dir, "cat d*/f* >/dev/null"); err != nil {
		return nil, err
	}
	return top, nil
}

// idle waits until pid has used no CPU for -settle (checked every
// -settle/5), at most 30 s.
func idle(pid int) error {
	step := *settle / 5
	last, _, err := usage(pid)
	if err != nil {
		return err
	}
	quiet := time.Duration(0)
	for deadline := time.Now().Add(30 * time.Second); quiet < *settle; {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d never idle for %v", pid, *settle)
		}
		time.Sleep(step)
		cpu, _, err := usage(pid)
		if err != nil {
			return err
		}
		if cpu == last {
			quiet += step
		} else {
			quiet, last = 0, cpu
		}
	}
	return nil
}

// usage returns pid's CPU time and its threads' context switches so far
// (0, 0 for pid 0).
func usage(pid int) (time.Duration, int64, error) {
	if pid == 0 {
		return 0, 0, nil
	}
	cpu, err := benchkit.ProcCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, 0, err
	}
	var sw int64
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		st, err := benchkit.ProcStatus(tid, "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
		if err != nil {
			continue // the thread exited
		}
		sw += st["voluntary_ctxt_switches"] + st["nonvoluntary_ctxt_switches"]
	}
	return cpu, sw, nil
}

// median of f over ss.
func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}
