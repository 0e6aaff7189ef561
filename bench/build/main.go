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
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
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
	tmp, err := benchkit.TempDir("rubinofs-build-")
	if err != nil {
		log.Fatal(err)
	}
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

	targets, err := benchkit.Mount(tmp, *only, "native", "loop-1s", "rubinofs-off", "rubinofs")
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

func report(targets []*benchkit.Target, times map[string]map[string][]time.Duration) {
	fmt.Printf("\n`%s`, warm GOCACHE; medians of %d runs, seconds (ratio to native)\n\n", *cmd, *runs)
	benchkit.Table{Phases: phases, Targets: targets, Format: "%.3f", Overheads: true,
		Value: func(t, p string) float64 { return benchkit.Median(times[t][p]).Seconds() }}.Print()
}
