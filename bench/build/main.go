// Command build measures `go build ./... && go vet ./...` of a real module
// (golang.org/x/tools from the Go module proxy, the repository bench/agent
// uses) through rubinofs against native and a bare go-fuse loopback, with a
// warm Go build cache outside the mount.
//
// The build and vet caches are keyed by file content, and with -trimpath
// not by directory, so the harness warms one GOCACHE (in its temporary
// directory, outside every mount) once on a native copy and every target
// then hits it: what is measured is the go command hashing every source
// file, reading the export data and the stat/open/read traffic of the
// tree, not compiling. Every build runs with GOFLAGS=-trimpath
// -buildvcs=false, GOTOOLCHAIN=local, GOWORK=off; modules come from the
// usual GOMODCACHE.
//
// Each run, on each target in turn (the order rotates every run):
//
//	write   cp -r of the module's source into the target (through the mount)
//	first   the build and vet right after the tree was written
//	repeat  the same again
//
// then rm -rf of the copy (not timed). Targets:
//
//	native        a directory on the same file system
//	loop-1s       a bare go-fuse loopback with 1 s entry/attribute timeouts
//	rubinofs-off  rubinofs with the guard off (--mode off), the watcher on
//	rubinofs      rubinofs with the guard enforcing and the watcher on
//
// Usage (as root): go run ./bench/build [-runs 5]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
	"github.com/rubinofs/rubinofs/guard"
)

var (
	runs   = flag.Int("runs", 5, "runs per target (each run writes the tree and builds twice on every target)")
	module = flag.String("module", benchkit.Module, "module to build (fetched with go mod download)")
	only   = flag.String("only", "", "comma-separated targets to run besides native (default all: loop-1s,rubinofs-off,rubinofs)")
	cmd    = flag.String("cmd", "go build ./... && go vet ./...", "the build command, run by /bin/sh in the copy")
)

var phases = []string{"write", "first", "repeat"}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./bench/build [flags] (as root)\n\n"+
			"Times a warm-cache `go build ./... && go vet ./...` of golang.org/x/tools right after the tree is\n"+
			"written (first) and again (repeat), on native, loop-1s, rubinofs --mode off and rubinofs enforcing.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	tmp, err := os.MkdirTemp("", "rubinofs-build-")
	if err != nil {
		log.Fatal(err)
	}
	benchkit.AtExit(func() { os.RemoveAll(tmp) })
	src, err := benchkit.ModuleDir(*module)
	if err != nil {
		benchkit.Fatal(err)
	}
	env := []string{"GOCACHE=" + filepath.Join(tmp, "gocache"), "GOFLAGS=-trimpath -buildvcs=false",
		"GOTOOLCHAIN=local", "GOWORK=off"}

	// Warm the cache (and fetch the module's dependencies) on a native copy.
	warm := filepath.Join(tmp, "warm")
	fmt.Fprintf(os.Stderr, "warming GOCACHE on a native copy of %s\n", *module)
	if _, err := benchkit.Run("/", benchkit.CopyScript(src, warm)+" && cd "+benchkit.Shq(warm)+" && "+*cmd, env...); err != nil {
		benchkit.Fatal("warming: ", err)
	}
	os.RemoveAll(warm)

	targets, err := mountTargets(tmp)
	if err != nil {
		benchkit.Fatal(err)
	}
	times := map[string]map[string][]time.Duration{}
	for _, t := range targets {
		times[t.Name] = map[string][]time.Duration{}
	}
	for r := 0; r < *runs; r++ {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			tree := filepath.Join(t.Dir, "tools")
			for _, p := range phases {
				script := "cd tools && " + *cmd
				if p == "write" {
					script = benchkit.CopyScript(src, tree)
				}
				d, err := benchkit.Run(t.Dir, script, env...)
				if err != nil {
					benchkit.Fatalf("%s/%s: %v", t.Name, p, err)
				}
				times[t.Name][p] = append(times[t.Name][p], d)
			}
			if _, err := benchkit.Run(t.Dir, "rm -rf tools"); err != nil {
				benchkit.Fatalf("%s/rm: %v", t.Name, err)
			}
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}
	report(targets, times)
	for _, t := range targets {
		if n := t.Denials(); n > 0 {
			fmt.Printf("\n%s: %d guard denials\n", t.Name, n)
		}
	}
}

func mountTargets(tmp string) ([]*benchkit.Target, error) {
	want := func(name string) bool {
		return *only == "" || strings.Contains(","+*only+",", ","+name+",")
	}
	native, err := benchkit.Native(tmp, "native")
	if err != nil {
		return nil, err
	}
	targets := []*benchkit.Target{native}
	if want("loop-1s") {
		t, err := benchkit.Loopback(tmp, "loop-1s", benchkit.Ptr(time.Second))
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	for _, c := range []struct {
		name string
		mode guard.Mode
	}{{"rubinofs-off", guard.ModeOff}, {"rubinofs", guard.ModeEnforce}} {
		if !want(c.name) {
			continue
		}
		t, err := benchkit.Rubinofs(tmp, c.name, c.mode)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	return targets, nil
}

func report(targets []*benchkit.Target, times map[string]map[string][]time.Duration) {
	med := func(target, p string) float64 { return benchkit.Median(times[target][p]).Seconds() }
	_, hasOff := times["rubinofs-off"]
	_, hasRub := times["rubinofs"]
	fmt.Printf("\n`%s`, warm GOCACHE; medians of %d runs, seconds (ratio to native)\n\n", *cmd, *runs)
	fmt.Printf("| phase |")
	for _, t := range targets {
		fmt.Printf(" %s |", t.Name)
	}
	if hasRub && hasOff {
		fmt.Printf(" guard overhead (rubinofs / rubinofs-off) |")
	}
	fmt.Printf("\n|---|%s", strings.Repeat("---|", len(targets)))
	if hasRub && hasOff {
		fmt.Printf("---|")
	}
	fmt.Println()
	for _, p := range phases {
		fmt.Printf("| %s |", p)
		base := med("native", p)
		for _, t := range targets {
			m := med(t.Name, p)
			if t.Name == "native" {
				fmt.Printf(" %.3f |", m)
			} else {
				fmt.Printf(" %.3f (%.2f×) |", m, m/base)
			}
		}
		if hasRub && hasOff {
			fmt.Printf(" %.2f× |", med("rubinofs", p)/med("rubinofs-off", p))
		}
		fmt.Println()
	}
}
