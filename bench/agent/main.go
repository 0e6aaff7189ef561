// Command agent measures how much slower a coding-agent workload runs through
// rubinofs than natively or through a bare go-fuse loopback. It runs the
// same coding-agent workload on a real repository (golang.org/x/tools from
// the Go module proxy, put under git) on four targets, alternating them in
// one run so machine noise spreads evenly:
//
//	native       the workload directory itself
//	loop-nocache a bare go-fuse loopback with no kernel caching
//	loop-1s      a bare go-fuse loopback with 1 s entry/attribute timeouts
//	rubinofs     rubinofs with the guard enforcing and the watcher on
//
// Steps: clone, git status, git grep, read all, edit (read + sed -i on 40
// files), git diff, git checkout, rm -rf. It prints per-step medians and the
// total's ratio to native, then the latency from a write in the backing
// directory to its visibility through the rubinofs mount (p50, p99).
//
// Usage (as root, or with fusermount3): go run ./bench/agent [-runs 5]
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

var (
	runs      = flag.Int("runs", 5, "runs per target")
	module    = flag.String("module", "golang.org/x/tools@v0.28.0", "module whose source is the repository")
	latencyN  = flag.Int("latency", 200, "external writes to time for visibility latency")
	keepGoing = flag.Bool("k", false, "keep going after a failed step")
	only      = flag.String("only", "", "comma-separated targets to run (default all)")
	cpuprof   = flag.String("cpuprofile", "", "write a CPU profile of this process (the daemons) to `FILE`")
)

type step struct{ name, script string }

// steps is the workload; each runs with /bin/sh in the target directory.
var steps = []step{
	// file:// makes git pack and unpack on every target; a plain local
	// path would hardlink objects on native only.
	{"clone", "git clone -q \"file://$ORIGIN\" work"},
	{"status", "cd work && git status --porcelain >/dev/null"},
	{"grep", "cd work && git grep -n 'func New' >/dev/null"},
	{"read-all", "cd work && git ls-files -z | xargs -0 cat >/dev/null"},
	{"edit", "cd work && git ls-files '*.go' | head -40 | while read f; do cat \"$f\" >/dev/null; sed -i 's/^package /package /; 1s/^/\\/\\/ edited\\n/' \"$f\"; done"},
	{"diff", "cd work && git diff --stat >/dev/null"},
	{"checkout", "cd work && git checkout -q -- ."},
	{"rm", "rm -rf work"},
}

// target is one place the workload runs.
type target struct {
	name  string
	dir   string       // where the workload runs
	close func() error // unmount
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	tmp, err := os.MkdirTemp("", "rubinofs-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	origin := filepath.Join(tmp, "origin")
	if err := makeOrigin(origin); err != nil {
		log.Fatal(err)
	}
	targets, err := mountTargets(tmp)
	// fatal unmounts everything before exiting: log.Fatal skips defers.
	fatal := func(v ...any) {
		for _, t := range targets {
			if t.close != nil {
				t.close()
			}
		}
		os.RemoveAll(tmp)
		log.Fatal(v...)
	}
	if err != nil {
		fatal(err)
	}
	if *only != "" {
		var keep []target
		for _, t := range targets {
			if t.name == "native" || strings.Contains(","+*only+",", ","+t.name+",") {
				keep = append(keep, t)
			} else if t.close != nil {
				t.close()
			}
		}
		targets = keep
	}
	defer func() {
		for _, t := range targets {
			if t.close != nil {
				t.close()
			}
		}
	}()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	// times[target][step] = durations over runs; the last "step" is total.
	times := map[string]map[string][]time.Duration{}
	for _, t := range targets {
		times[t.name] = map[string][]time.Duration{}
	}
	for r := 0; r < *runs; r++ {
		for i := range targets {
			t := targets[(i+r)%len(targets)] // rotate the order each run
			total := time.Duration(0)
			for _, s := range steps {
				d, err := run(t.dir, s.script, origin)
				if err != nil {
					msg := fmt.Sprintf("%s/%s: %v", t.name, s.name, err)
					if !*keepGoing {
						fatal(msg)
					}
					log.Print(msg)
				}
				times[t.name][s.name] = append(times[t.name][s.name], d)
				total += d
			}
			times[t.name]["total"] = append(times[t.name]["total"], total)
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}
	report(targets, times)
	latency(targets)
}

// makeOrigin puts the module's source under git as the repository to clone.
func makeOrigin(origin string) error {
	out, err := exec.Command("go", "mod", "download", "-json", *module).Output()
	if err != nil {
		return fmt.Errorf("go mod download %s: %w", *module, err)
	}
	var dir string
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == `"Dir"` {
			dir = strings.Trim(strings.TrimSpace(v), `",`)
		}
	}
	if dir == "" {
		return fmt.Errorf("no Dir for %s", *module)
	}
	script := fmt.Sprintf("cp -r %q/. %q && chmod -R u+w %q && cd %q && git init -q && git add -A && git commit -qm import", dir, origin, origin, origin)
	if err := os.MkdirAll(origin, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = env()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("making the origin: %v: %s", err, b)
	}
	return nil
}

func env() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=b@x.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=b@x.invalid", "LC_ALL=C")
}

// run times one step. The process runs with its working directory outside
// the mount and cds in the shell (golang/go#11155).
func run(dir, script, origin string) (time.Duration, error) {
	cmd := exec.Command("/bin/sh", "-c", "cd "+shq(dir)+" && "+script)
	cmd.Dir = "/"
	cmd.Env = append(env(), "ORIGIN="+origin)
	start := time.Now()
	b, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%v: %s", err, b)
	}
	return d, nil
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// mountTargets prepares the four targets.
func mountTargets(tmp string) ([]target, error) {
	native := filepath.Join(tmp, "native")
	targets := []target{{name: "native", dir: native}}
	if err := os.MkdirAll(native, 0o755); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name    string
		timeout *time.Duration
	}{{"loop-nocache", nil}, {"loop-1s", ptr(time.Second)}} {
		back, mnt := filepath.Join(tmp, c.name+"-back"), filepath.Join(tmp, c.name)
		for _, d := range []string{back, mnt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return targets, err
			}
		}
		root, err := fs.NewLoopbackRoot(back)
		if err != nil {
			return targets, err
		}
		// A non-nil Options with nil timeouts turns kernel caching off.
		opts := &fs.Options{EntryTimeout: c.timeout, AttrTimeout: c.timeout, NegativeTimeout: c.timeout,
			MountOptions: fuse.MountOptions{DirectMount: os.Geteuid() == 0, FsName: back, Name: "loopback"}}
		srv, err := fs.Mount(mnt, root, opts)
		if err != nil {
			return targets, fmt.Errorf("%s: %w", c.name, err)
		}
		targets = append(targets, target{name: c.name, dir: mnt, close: srv.Unmount})
	}
	ws, mnt := filepath.Join(tmp, "rubinofs-back"), filepath.Join(tmp, "rubinofs")
	for _, d := range []string{ws, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return targets, err
		}
	}
	d, err := daemon.Start(daemon.Config{Workspace: ws, Mountpoint: mnt,
		Guard: config.Guard{Mode: guard.ModeEnforce}, Cache: config.Cache{Watch: true, CacheTimeout: time.Hour},
		Version: "bench", Slog: daemonLog()})
	if err != nil {
		return targets, fmt.Errorf("rubinofs: %w", err)
	}
	rt := target{name: "rubinofs", dir: mnt, close: func() error {
		if n := len(d.Guard.Denials("")); n > 0 {
			log.Printf("rubinofs: %d denials during the workload: %v", n, d.Guard.Denials("")[0])
		}
		return d.Close()
	}}
	return append(targets, rt), nil
}

func daemonLog() *slog.Logger {
	if os.Getenv("RUBINOFS_DEBUG_EVENTS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

func ptr[T any](v T) *T { return &v }

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// report prints a markdown table of medians and ratios to native.
func report(targets []target, times map[string]map[string][]time.Duration) {
	names := []string{}
	for _, s := range steps {
		names = append(names, s.name)
	}
	names = append(names, "total")
	fmt.Printf("\nmedians of %d runs, seconds (ratio to native)\n\n", *runs)
	fmt.Printf("| step |")
	for _, t := range targets {
		fmt.Printf(" %s |", t.name)
	}
	fmt.Printf("\n|---|")
	for range targets {
		fmt.Printf("---|")
	}
	fmt.Println()
	for _, n := range names {
		fmt.Printf("| %s |", n)
		base := median(times["native"][n]).Seconds()
		for _, t := range targets {
			m := median(times[t.name][n]).Seconds()
			if t.name == "native" {
				fmt.Printf(" %.3f |", m)
			} else {
				fmt.Printf(" %.3f (%.2f×) |", m, m/base)
			}
		}
		fmt.Println()
	}
}

// latency measures, on the rubinofs target, the time from a write in the
// backing directory to the new bytes being read through the mount (open and
// read, no stat, so only an invalidation can make them visible).
func latency(targets []target) {
	var mnt string
	for _, t := range targets {
		if t.name == "rubinofs" {
			mnt = t.dir
		}
	}
	back := mnt + "-back"
	p, bp := filepath.Join(mnt, "latency.txt"), filepath.Join(back, "latency.txt")
	if err := os.WriteFile(bp, []byte("0000000\n"), 0o644); err != nil {
		panic(err)
	}
	read := func() string {
		f, err := os.Open(p)
		if err != nil {
			return ""
		}
		defer f.Close()
		b := make([]byte, 64)
		n, _ := f.Read(b)
		return string(b[:n])
	}
	read()
	var lat []time.Duration
	for i := 1; i <= *latencyN; i++ {
		want := fmt.Sprintf("%07d\n", i)
		start := time.Now()
		if err := os.WriteFile(bp, []byte(want), 0o644); err != nil {
			panic(err)
		}
		for read() != want {
			if time.Since(start) > 10*time.Second {
				panic(fmt.Sprintf("write %d not visible after 10s", i))
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("\nexternal write -> visible through rubinofs (%d writes): p50 %v, p99 %v, max %v\n",
		len(lat), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
}
