// Command history measures whether a session's per-operation cost grows
// with its history (docs/DESIGN.md#journal-interval-cost): 1,000 atomic
// saves (read the file, write NAME.tmp, rename it over NAME, as an
// editor or formatter saves) in a fresh session, then again after the
// same session has made -records journal records (by creating small
// files), on native, a bare go-fuse loopback with 1 s timeouts and
// rubinofs as shipped (enforcing, journal on: the CLI's `rubinofs mount
// --daemon`, built from this tree, in a process of its own). The saves
// run in one python3 process per phase, in the default session of the
// mount's owner; every target runs the same steps in one run. It prints
// a Markdown table and the daemon's peak RSS (VmHWM of its process).
//
// Usage (as root): go run ./bench/history [-saves 1000] [-records 500000]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
	"github.com/rubinofs/rubinofs/internal/mounttest"
)

var (
	saves   = flag.Int("saves", 1000, "atomic saves per phase")
	records = flag.Int("records", 500000, "journal records the session makes between the two phases (about 3 per file created)")
)

// savesPy does argv[2] atomic saves of files under argv[1] and prints the
// seconds they took; the files are made first, untimed.
const savesPy = `
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for i in range(n):
    with open(f"{d}/s{i}", "w") as f: f.write("v0\n")
t = time.perf_counter()
for i in range(n):
    p = f"{d}/s{i}"
    with open(p) as f: f.read()
    with open(p + ".tmp", "w") as f: f.write("v1\n")
    os.rename(p + ".tmp", p)
print(time.perf_counter() - t)
`

// historyPy creates argv[2] small files under argv[1], 1,000 per directory.
const historyPy = `
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = f"{d}/h{i // 1000}"
    if i % 1000 == 0: os.makedirs(sub, exist_ok=True)
    with open(f"{sub}/f{i}", "w") as f: f.write("x")
`

func main() {
	flag.Parse()
	log.SetFlags(0)
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	tmp, err := os.MkdirTemp("", "rubinofs-history-")
	if err != nil {
		log.Fatal(err)
	}
	benchkit.AtExit(func() { os.RemoveAll(tmp) })
	nat, err := benchkit.Native(tmp, "native")
	if err != nil {
		benchkit.Fatal(err)
	}
	loop, err := benchkit.Loopback(tmp, "loop-1s", benchkit.Ptr(time.Second))
	if err != nil {
		benchkit.Fatal(err)
	}
	rfs, pid := mountCLI(tmp)
	targets := []*benchkit.Target{nat, loop, rfs}
	fresh := map[string]float64{}
	for _, t := range targets {
		fresh[t.Name] = pySeconds(t.Dir, savesPy, "fresh", strconv.Itoa(*saves))
	}
	files := *records / 3
	for _, t := range targets {
		pySeconds(t.Dir, historyPy, "history", strconv.Itoa(files))
	}
	lines := logLines(filepath.Join(rfs.State, "journal", "sessions", "default.jsonl"))
	after := map[string]float64{}
	for _, t := range targets {
		after[t.Name] = pySeconds(t.Dir, savesPy, "after", strconv.Itoa(*saves))
	}
	hwm, _ := benchkit.ProcStatus(pid, "VmHWM")
	fmt.Printf("%d atomic saves, fresh and after %d files created (%d journal records in the session)\n\n", *saves, files, lines)
	fmt.Println("| target | fresh (ms/save) | after history (ms/save) | after / fresh |")
	fmt.Println("|---|---|---|---|")
	for _, t := range targets {
		f, a := fresh[t.Name]*1000/float64(*saves), after[t.Name]*1000/float64(*saves)
		fmt.Printf("| %s | %.2f | %.2f | %.2f× |\n", t.Name, f, a, a/f)
	}
	fmt.Printf("\ndaemon peak RSS (VmHWM): %d MB; refusals: %d\n", hwm["VmHWM"]/1024,
		logLines(filepath.Join(rfs.Dir, ".rubino", "guard", "denials")))
}

// mountCLI builds the CLI (mounttest.BuildCLI) and mounts
// tmp/rubinofs-back at tmp/rubinofs with it, as benchkit's bin: targets do
// (benchkit.Binary: `rubinofs mount --daemon`); it returns the target and
// the daemon's pid. Teardown unmounts it.
func mountCLI(tmp string) (*benchkit.Target, int) {
	bin := filepath.Join(tmp, "rubinofs-bin")
	if err := mounttest.BuildCLI(bin); err != nil {
		benchkit.Fatal(err)
	}
	t, err := benchkit.Binary(tmp, benchkit.BinarySpec{Label: "rubinofs", Bin: bin})
	if err != nil {
		benchkit.Fatal(err)
	}
	return t, t.Pid
}

// pySeconds runs python3 -c script in dir with args and returns the
// float it prints (0 for a script that prints nothing).
func pySeconds(dir, script string, args ...string) float64 {
	cmd := exec.Command("python3", append([]string{"-c", script}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		benchkit.Fatal(fmt.Errorf("%s: %v: %s", dir, err, out))
	}
	s := strings.TrimSpace(string(out))
	if s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		benchkit.Fatal(fmt.Errorf("%s: %q: %v", dir, s, err))
	}
	return v
}

// logLines counts the lines of the session log at path.
func logLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
	}
	return n
}
