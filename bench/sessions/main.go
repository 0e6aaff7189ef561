// Command sessions measures lost updates under concurrent sessions. N
// worker processes, each its own guard session, do M rounds on one shared
// counter file: read it, add one, write it back, and on a refusal read again
// and retry. With the guard no update is lost: the final value equals the
// number of successful writes. The same loop on a native directory shows the
// lost updates there.
//
// Usage (as root): go run ./bench/sessions [-workers 8] [-rounds 200]
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
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
	workers = flag.Int("workers", 8, "sessions (worker processes)")
	rounds  = flag.Int("rounds", 200, "successful increments per worker")
	worker  = flag.String("worker", "", "internal: run as a worker on this counter file")
	mount   = flag.String("mount", "", "internal: register the worker as a session of this mount")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	if *worker != "" {
		runWorker()
		return
	}
	tmp, err := os.MkdirTemp("", "rubinofs-sessions-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ws, mnt, native := filepath.Join(tmp, "ws"), filepath.Join(tmp, "mnt"), filepath.Join(tmp, "native")
	for _, d := range []string{ws, mnt, native} {
		os.MkdirAll(d, 0o755)
	}
	d, err := daemon.Start(daemon.Config{Workspace: ws, Mountpoint: mnt,
		Guard: config.Guard{Mode: guard.ModeEnforce}, Cache: config.Cache{Watch: true, CacheTimeout: time.Hour},
		Version: "bench", Slog: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	fmt.Printf("%d sessions × %d increments of one counter file\n\n", *workers, *rounds)
	fmt.Println("| target | successful writes | final value | lost updates | refused (retried) | writes/s |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, t := range []struct{ name, dir, mount string }{{"native", native, ""}, {"rubinofs", mnt, mnt}} {
		counter := filepath.Join(t.dir, "counter")
		if err := os.WriteFile(filepath.Join(filepath.Dir(counter), "counter"), []byte("0\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		start := time.Now()
		sessions := make([]benchkit.CounterSession, *workers)
		for i := range sessions {
			sessions[i] = benchkit.CounterSession{Counter: counter, Mount: t.mount}
		}
		ok, refused, err := benchkit.RunCounterWorkers(sessions, *rounds)
		if err != nil {
			log.Fatal(err)
		}
		elapsed := time.Since(start)
		b, _ := os.ReadFile(counter)
		final, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		fmt.Printf("| %s | %d | %d | %d | %d | %.0f |\n", t.name, ok, final, ok-final, refused, float64(ok)/elapsed.Seconds())
	}
}

// runWorker increments the counter -rounds times, retrying refused writes
// (benchkit.CounterWorker). It prints "successes refusals".
func runWorker() {
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
}
