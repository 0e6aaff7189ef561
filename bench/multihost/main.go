// Command multihost measures lost updates when several mounts share one
// backing directory, as rubinofs mounts on several hosts share an NFS,
// CephFS or JuiceFS export (docs/multihost.md). Sessions are spread over
// the mounts; each does -rounds read-increment-write rounds on one
// counter file and retries when refused. Lost updates are successful
// writes minus the final value. Targets: the native directory (the same
// workers, no mount), and pairs of rubinofs mounts with inotify and
// --shared, with --watch=poll, with the default options (inotify; the
// mounts find each other and turn shared: docs/DESIGN.md#peer-mounts),
// and with inotify and --peer-detect=false (passthrough reads registered
// at open: what two mounts of one directory got before detection).
//
// Usage (as root): go run ./bench/multihost [-mounts 2] [-per-mount 3]
// [-rounds 100] [-runs 3]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

var (
	mounts   = flag.Int("mounts", 2, "rubinofs mounts over the one backing directory")
	perMount = flag.Int("per-mount", 3, "sessions (worker processes) per mount")
	rounds   = flag.Int("rounds", 100, "successful increments per worker")
	runs     = flag.Int("runs", 3, "runs per target")
	worker   = flag.String("worker", "", "internal: run as a worker on this counter file")
	mount    = flag.String("mount", "", "internal: register the worker as a session of this mount")
)

// target is one configuration of the mounts (none: native).
type target struct {
	name   string
	native bool
	cache  config.Cache
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	if *worker != "" {
		if *mount != "" {
			if err := benchkit.RegisterSession(*mount); err != nil {
				log.Fatalf("registering: %v", err)
			}
		}
		ok, refused, err := benchkit.CounterWorker(*worker, *rounds)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ok, refused)
		return
	}
	benchkit.CatchSignals()
	defer benchkit.Teardown()
	tmp, err := benchkit.TempDir("rubinofs-multihost-")
	if err != nil {
		benchkit.Fatal(err)
	}
	targets := []target{
		{name: "native", native: true},
		{name: "rubinofs inotify --shared", cache: config.Cache{Watch: true, WatchMode: "inotify", Shared: true, CacheTimeout: time.Hour}},
		{name: "rubinofs --watch=poll", cache: config.Cache{Watch: true, WatchMode: "poll", PollInterval: time.Second}},
		{name: "rubinofs default options (inotify, peer detected)", cache: config.Cache{Watch: true, WatchMode: "inotify", CacheTimeout: time.Hour}},
		{name: "rubinofs inotify, --peer-detect=false", cache: config.Cache{Watch: true, WatchMode: "inotify", CacheTimeout: time.Hour, NoPeerDetect: true}},
	}
	fmt.Printf("%d mounts over one backing directory, %d sessions each, %d increments each; %d runs\n\n", *mounts, *perMount, *rounds, *runs)
	fmt.Println("| target | lost updates per run | refused (retried) | writes/s (median) | FUSE ops of mount 1, one run |")
	fmt.Println("|---|---|---|---|---|")
	for ti, t := range targets {
		var lost []string
		var refusedAll int
		var rates []time.Duration
		ops := ""
		for r := 0; r < *runs; r++ {
			base := filepath.Join(tmp, fmt.Sprintf("t%d-r%d", ti, r))
			res, err := runOnce(t, base)
			if err != nil {
				benchkit.Fatal(err)
			}
			lost = append(lost, strconv.Itoa(res.ok-res.final))
			refusedAll += res.refused
			rates = append(rates, time.Duration(float64(time.Second)*float64(res.ok)/res.elapsed.Seconds()))
			if r == 0 {
				ops = res.ops
			}
		}
		fmt.Printf("| %s | %s of %d | %d | %d | %s |\n", t.name, strings.Join(lost, ", "), *mounts**perMount**rounds,
			refusedAll, benchkit.Median(rates)/time.Second, ops)
	}
}

// result is one run's outcome.
type result struct {
	ok, refused, final int
	elapsed            time.Duration
	ops                string // FUSE requests of the first mount during the run
}

// runOnce mounts t's mounts over base/back (none for native), runs the
// workers and unmounts.
func runOnce(t target, base string) (result, error) {
	back := filepath.Join(base, "back")
	if err := os.MkdirAll(back, 0o755); err != nil {
		return result{}, err
	}
	counter := "counter"
	if err := os.WriteFile(filepath.Join(back, counter), []byte("0\n"), 0o644); err != nil {
		return result{}, err
	}
	dirs := []string{}
	var ds []*daemon.Daemon
	defer func() {
		for _, d := range ds {
			d.Close()
		}
	}()
	for i := 0; i < *mounts; i++ {
		if t.native {
			dirs = append(dirs, back)
			continue
		}
		mnt, state := filepath.Join(base, fmt.Sprintf("mnt%d", i)), filepath.Join(base, fmt.Sprintf("state%d", i))
		for _, d := range []string{mnt, state} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return result{}, err
			}
		}
		d, err := daemon.Start(daemon.Config{Workspace: back, Mountpoint: mnt, StateDir: state,
			Guard: config.Guard{Mode: guard.ModeEnforce}, Cache: t.cache, Version: "bench", Slog: benchkit.DaemonLog()})
		if err != nil {
			return result{}, fmt.Errorf("%s: %w", t.name, err)
		}
		ds = append(ds, d)
		dirs = append(dirs, mnt)
	}
	var before map[string]float64
	if !t.native {
		before, _ = benchkit.Ops(dirs[0])
	}
	start := time.Now()
	var sessions []benchkit.CounterSession
	for _, dir := range dirs {
		reg := dir
		if t.native {
			reg = ""
		}
		for i := 0; i < *perMount; i++ {
			sessions = append(sessions, benchkit.CounterSession{Counter: filepath.Join(dir, counter), Mount: reg})
		}
	}
	var res result
	var err error
	if res.ok, res.refused, err = benchkit.RunCounterWorkers(sessions, *rounds); err != nil {
		return result{}, err
	}
	res.elapsed = time.Since(start)
	if !t.native {
		after, _ := benchkit.Ops(dirs[0])
		res.ops = benchkit.OpsDelta(before, after)
	}
	b, err := os.ReadFile(filepath.Join(back, counter))
	if err != nil {
		return result{}, err
	}
	res.final, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	return res, nil
}
