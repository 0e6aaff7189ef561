// Command scale measures rubinofs on a large generated tree: by default
// 100,000 small files in 5,000 directories (50 top-level directories of 100
// each, 20 files per leaf). It reports, against native find on the same
// tree:
//
//	ready      from daemon.Start to the watcher's initial walk being done,
//	           read from .rubino/status (watcher.watches reaching the
//	           tree's directory count)
//	cold find  the first `find . >/dev/null` through the fresh mount (its
//	           kernel caches empty; the backing tree's dentries are warm
//	           unless -drop-caches)
//	warm find  the median of -warm repeats of the same find
//
// and the daemon's memory and inotify watches once the finds are done. The
// daemon runs in this process (daemon.Start, as bench/agent), so its RSS is
// this process's VmRSS and VmHWM from /proc/self/status; the peak is reset
// (clear_refs 5) before each mount, and the harness's own RSS before the
// first mount is printed for subtraction. Watches are the "inotify wd:"
// lines of this process's inotify descriptors (watcher.watches in
// .rubino/status should agree).
//
// Usage (as root): go run ./bench/scale [-runs 3] [-files 100000] [-dirs 5000]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

var (
	runs    = flag.Int("runs", 3, "mounts to measure (each: ready, one cold find, -warm warm finds)")
	files   = flag.Int("files", 100000, "files in the generated tree")
	ndirs   = flag.Int("dirs", 5000, "leaf directories in the generated tree (split into about sqrt(dirs)/1.4 top-level directories)")
	size    = flag.Int("size", 64, "bytes per file")
	warm    = flag.Int("warm", 3, "warm finds per mount (median printed)")
	mode    = flag.String("mode", "enforce", "guard mode of the mount: enforce, warn or off")
	drop    = flag.Bool("drop-caches", false, "write 2 to /proc/sys/vm/drop_caches before each cold find (machine-wide: slows everything else on the machine)")
	findCmd = flag.String("find", "find . >/dev/null", "the find command, run by /bin/sh at the tree's root")
	loop    = flag.Bool("loopback", true, "also measure a bare go-fuse loopback with 1 s kernel caches (loop-1s) over the same tree, between native and rubinofs")
	cpuProf = flag.String("cpuprofile", "", "write a CPU profile of this process (the in-process daemon) during the cold finds to this file")
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./bench/scale [flags] (as root)\n\n"+
			"Generates a large tree and times rubinofs's mount-to-ready, a cold and a warm find against native,\n"+
			"with the daemon's RSS and inotify watches.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	gm, err := guard.ParseMode(*mode)
	if err != nil {
		log.Fatal(err)
	}
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	tmp, err := benchkit.TempDir("rubinofs-scale-")
	if err != nil {
		log.Fatal(err)
	}
	// The tree is loop-back, so that benchkit.Loopback(tmp, "loop") serves it.
	back, mnt := filepath.Join(tmp, "loop-back"), filepath.Join(tmp, "mnt")
	start := time.Now()
	nd, err := generate(back)
	if err != nil {
		benchkit.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "generated %d files in %d directories (%d with the root and top level) in %v\n",
		*files, *ndirs, nd, time.Since(start).Round(time.Millisecond))
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		benchkit.Fatal(err)
	}

	var nCold, nWarm, lCold, lWarm, rCold, rWarm, ready []time.Duration
	var rss, hwm []int64
	var firstCold, warmOps string // requests by op (benchkit.OpsDelta)
	var watches, statusWatches int
	runtime.GC()
	base, _ := benchkit.ProcStatus(0, "VmRSS")
	for r := 0; r < *runs; r++ {
		// native, then the mount, alternately
		dropCaches()
		nCold = append(nCold, find(back))
		for i := 0; i < *warm; i++ {
			nWarm = append(nWarm, find(back))
		}

		if *loop {
			dropCaches()
			second := time.Second
			l, err := benchkit.Loopback(tmp, "loop", &second)
			if err != nil {
				benchkit.Fatal(err)
			}
			lCold = append(lCold, find(l.Dir))
			var ws []time.Duration
			for i := 0; i < *warm; i++ {
				ws = append(ws, find(l.Dir))
			}
			lWarm = append(lWarm, benchkit.Median(ws))
			l.Close()
		}

		runtime.GC()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM to VmRSS
		dropCaches()
		start := time.Now()
		t, err := benchkit.RubinofsAt("rubinofs", back, mnt, filepath.Join(tmp, "state"), gm, nil)
		if err != nil {
			benchkit.Fatal(err)
		}
		statusWatches = waitWalk(mnt, nd)
		ready = append(ready, time.Since(start))
		if *cpuProf != "" && r == 0 {
			f, err := os.Create(*cpuProf)
			if err != nil {
				benchkit.Fatal(err)
			}
			pprof.StartCPUProfile(f)
			rCold = append(rCold, find(mnt))
			pprof.StopCPUProfile()
			f.Close()
		} else {
			rCold = append(rCold, find(mnt))
		}
		coldOps := benchkit.OpCounts(t.Daemon.Obs.Registry())
		var ws []time.Duration
		for i := 0; i < *warm; i++ {
			ws = append(ws, find(mnt))
		}
		rWarm = append(rWarm, benchkit.Median(ws))
		warmOps = benchkit.OpsDelta(coldOps, benchkit.OpCounts(t.Daemon.Obs.Registry()))
		if r == 0 {
			firstCold = benchkit.OpsDelta(nil, coldOps)
		}
		st, _ := benchkit.ProcStatus(0, "VmRSS", "VmHWM")
		rss, hwm = append(rss, st["VmRSS"]), append(hwm, st["VmHWM"])
		watches = benchkit.InotifyWatches(0)
		t.Close()
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}

	fmt.Printf("\n%d files, %d leaf directories (%d in all), %d-byte files; guard %s; medians of %d runs, seconds (ratio to native)\n\n",
		*files, *ndirs, nd, *size, gm, *runs)
	if *loop {
		fmt.Println("| | native | loop-1s | rubinofs | rubinofs / loop-1s |")
		fmt.Println("|---|---|---|---|---|")
		fmt.Printf("| mount to ready (walk done) | | | %.3f | |\n", benchkit.Median(ready).Seconds())
	} else {
		fmt.Println("| | native | rubinofs |")
		fmt.Println("|---|---|---|")
		fmt.Printf("| mount to ready (walk done) | | %.3f |\n", benchkit.Median(ready).Seconds())
	}
	row := func(name string, n, l, r []time.Duration) {
		nm, rm := benchkit.Median(n).Seconds(), benchkit.Median(r).Seconds()
		if *loop {
			lm := benchkit.Median(l).Seconds()
			fmt.Printf("| %s | %.3f | %.3f (%.2f×) | %.3f (%.2f×) | %.2f× |\n", name, nm, lm, lm/nm, rm, rm/nm, rm/lm)
			return
		}
		fmt.Printf("| %s | %.3f | %.3f (%.2f×) |\n", name, nm, rm, rm/nm)
	}
	row("cold find", nCold, lCold, rCold)
	row("warm find", nWarm, lWarm, rWarm)
	fmt.Printf("\nrubinofs requests, first mount's walk and cold find: %s\nrubinofs requests of the last mount's %d warm finds: %s\n", firstCold, *warm, warmOps)
	fmt.Printf("\ndaemon (this process) after the finds: VmRSS %s, VmHWM %s (median over mounts; the harness alone: VmRSS %s before the first mount)\n",
		mb(medianInt(rss)), mb(medianInt(hwm)), mb(base["VmRSS"]))
	fmt.Printf("inotify watches in use: %d (.rubino/status watcher.watches: %d; the tree has %d directories)\n",
		watches, statusWatches, nd)
}

// generate writes the tree and returns its directory count, the root
// included.
func generate(root string) (int, error) {
	top := 1
	for top*top*2 < *ndirs {
		top++
	}
	per := (*ndirs + top - 1) / top
	content := []byte(strings.Repeat("x", max(*size-1, 0)) + "\n")
	n, leaves := 1, 0
	for i := 0; i < top && leaves < *ndirs; i++ {
		tdir := filepath.Join(root, fmt.Sprintf("t%03d", i))
		n++
		for j := 0; j < per && leaves < *ndirs; j++ {
			if benchkit.Stopping() {
				return 0, fmt.Errorf("interrupted")
			}
			dir := filepath.Join(tdir, fmt.Sprintf("d%03d", j))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return 0, err
			}
			n++
			// spread the files evenly over the leaves
			from, to := leaves**files / *ndirs, (leaves+1)**files / *ndirs
			for k := from; k < to; k++ {
				if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(k)+".txt"), content, 0o644); err != nil {
					return 0, err
				}
			}
			leaves++
		}
	}
	return n, nil
}

// find times one find at dir.
func find(dir string) time.Duration {
	d, err := benchkit.Run(dir, *findCmd)
	if err != nil {
		benchkit.Fatalf("find in %s: %v", dir, err)
	}
	return d
}

// waitWalk polls .rubino/status until the watcher watches every directory
// of the tree (the initial walk is done) and returns the count it read.
func waitWalk(mnt string, dirs int) int {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		b, err := os.ReadFile(filepath.Join(mnt, ctltree.DirName, "status"))
		if err != nil {
			benchkit.Fatalf("reading .rubino/status: %v", err)
		}
		var st struct {
			Watcher struct {
				Watches   int      `json:"watches"`
				Unwatched []string `json:"unwatched"`
			} `json:"watcher"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			benchkit.Fatalf(".rubino/status: %v", err)
		}
		if st.Watcher.Watches >= dirs {
			return st.Watcher.Watches
		}
		if len(st.Watcher.Unwatched) > 0 {
			benchkit.Fatalf("the watcher left subtrees unwatched (%v): raise fs.inotify.max_user_watches", st.Watcher.Unwatched)
		}
		if time.Now().After(deadline) {
			benchkit.Fatalf("watcher walk not done after 10 minutes: %d of %d directories", st.Watcher.Watches, dirs)
		}
		time.Sleep(time.Millisecond)
	}
}

func dropCaches() {
	if *drop {
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			benchkit.Fatalf("drop caches: %v", err)
		}
	}
}

func medianInt(v []int64) int64 {
	ds := make([]time.Duration, len(v))
	for i, x := range v {
		ds[i] = time.Duration(x)
	}
	return int64(benchkit.Median(ds))
}

func mb(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }
