// Command churn measures the rate of small repeated changes that tools
// make in one place over and over, where work kept per past change would
// show as a rate that falls: a directory renamed back and forth (empty,
// and holding -files files), a file renamed back and forth, a temp file
// created and removed, an atomic save (a temp file written and renamed
// over a file that was read), and a chain of -depth nested directories,
// each made inside the one before and given a file (work per request that
// grows with a path's depth shows as a rate that falls with it). Each
// pattern but the chain runs -ops operations, in one Python process in the
// target's directory, on native, a bare go-fuse loopback with 1 s
// timeouts (loop-1s) and rubinofs binaries mounted through their CLI (bin:
// targets, as bench/agent's -only). Targets alternate, the order rotating
// every run; the table gives the median rate (operations a second) and its
// ratio to native.
//
// Usage (as root):
//
//	go build -o /tmp/rubinofs ./cmd/rubinofs
//	go run ./bench/churn -runs 3 -only loop-1s,bin:shipped=/tmp/rubinofs
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

var (
	runs  = flag.Int("runs", 3, "runs per target")
	ops   = flag.Int("ops", 3000, "operations per pattern and run (a rename back and forth is two)")
	files = flag.Int("files", 2000, "files in the directory of the bigdir pattern")
	depth = flag.Int("depth", 1000, "directories in the chain of the deepchain pattern, each one inside the one before and holding a file")
	only  = flag.String("only", "loop-1s", "comma-separated targets besides native: loop-1s and bin:LABEL=PATH[:ARG...] (a rubinofs binary mounted through its CLI with ARGs)")
)

// patterns are the Python bodies timed, in order; each runs in a fresh
// directory named by the run (D) and performs N operations. Setup lines
// before "#time" are not timed.
var patterns = []struct{ name, body string }{
	{"dirflip", `os.mkdir(D + "/a")
#time
for i in range(N // 2):
    os.rename(D + "/a", D + "/b"); os.rename(D + "/b", D + "/a")`},
	{"bigdirflip", `os.mkdir(D + "/a")
for i in range(FILES):
    open(D + "/a/f%05d" % i, "w").write("x")
#time
for i in range(N // 20):
    os.rename(D + "/a", D + "/b"); os.rename(D + "/b", D + "/a")`},
	{"fileflip", `open(D + "/a", "w").write("x")
#time
for i in range(N // 2):
    os.rename(D + "/a", D + "/b"); os.rename(D + "/b", D + "/a")`},
	{"tmpfile", `#time
for i in range(N):
    with open(D + "/t.tmp", "w") as f: f.write("x")
    os.unlink(D + "/t.tmp")`},
	{"atomicsave", `open(D + "/cfg.json", "w").write("{}")
open(D + "/cfg.json").read()
#time
for i in range(N):
    with open(D + "/cfg.json.tmp", "w") as f: f.write("{}")
    os.rename(D + "/cfg.json.tmp", D + "/cfg.json")`},
	{"deepchain", `os.chdir(D)
#time
for i in range(DEPTH):
    os.mkdir("d"); os.chdir("d")
    open("f", "w").write("x")
os.chdir(D)`},
}

// opsOf is how many operations a pattern's timed loop performs: renames
// for the flips, a mkdir and a create per level of the chain,
// create-and-remove or write-and-rename pairs for the rest.
func opsOf(name string) int {
	switch name {
	case "bigdirflip":
		return *ops / 20 * 2
	case "dirflip", "fileflip":
		return *ops / 2 * 2
	case "deepchain":
		return *depth * 2
	}
	return *ops
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	tmp, err := benchkit.TempDir("rubinofs-churn-")
	if err != nil {
		log.Fatal(err)
	}
	targets, err := benchkit.Mount(tmp, *only, "native", "loop-1s")
	if err != nil {
		benchkit.Fatal(err)
	}
	rates := map[string]map[string][]float64{} // pattern → target → ops/s
	for r := 0; r < *runs && !benchkit.Stopping(); r++ {
		for k := range targets {
			t := targets[(k+r)%len(targets)]
			for _, p := range patterns {
				rate, err := runPattern(t, p.name, p.body, r)
				if err != nil {
					benchkit.Fatalf("%s %s: %v", t.Name, p.name, err)
				}
				if rates[p.name] == nil {
					rates[p.name] = map[string][]float64{}
				}
				rates[p.name][t.Name] = append(rates[p.name][t.Name], rate)
			}
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}
	fmt.Printf("\nOperations a second, medians of %d runs (-ops %d, -files %d); in brackets the ratio to native\n\n", *runs, *ops, *files)
	head := "| pattern |"
	sep := "|---|"
	for _, t := range targets {
		head += " " + t.Name + " |"
		sep += "---|"
	}
	fmt.Println(head)
	fmt.Println(sep)
	for _, p := range patterns {
		nat := benchkit.MedianFloat(rates[p.name]["native"])
		line := "| " + p.name + " |"
		for _, t := range targets {
			m := benchkit.MedianFloat(rates[p.name][t.Name])
			if t.Name == "native" {
				line += fmt.Sprintf(" %.0f |", m)
				continue
			}
			line += fmt.Sprintf(" %.0f (%.2f×) |", m, m/nat)
		}
		fmt.Println(line)
	}
}

// runPattern runs one pattern in a fresh directory of t and returns its
// timed loop's rate (operations a second), as the Python process measured
// it.
func runPattern(t *benchkit.Target, name, body string, run int) (float64, error) {
	dir := fmt.Sprintf("%s/%s-%d", t.Dir, name, run)
	setup, loop, _ := strings.Cut(body, "#time\n")
	// The process starts outside the mount and changes into it itself: a
	// chdir between fork and exec into loop-1s, served by this process,
	// can deadlock it against its own FUSE server (benchkit.Run).
	script := "import os, time\nos.chdir(" + strconv.Quote(t.Dir) + ")\nD = " + strconv.Quote(dir) +
		"\nN = " + strconv.Itoa(*ops) + "\nFILES = " + strconv.Itoa(*files) + "\nDEPTH = " + strconv.Itoa(*depth) + "\nos.mkdir(D)\n" + setup +
		"t0 = time.perf_counter()\n" + loop + "\nprint(time.perf_counter() - t0)\n"
	cmd := exec.Command("python3", "-c", script)
	cmd.Dir = "/"
	cmd.Env = benchkit.Env()
	out, err := benchkit.Output(cmd)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || secs <= 0 {
		return 0, fmt.Errorf("python printed %q", out)
	}
	return float64(opsOf(name)) / secs, nil
}
