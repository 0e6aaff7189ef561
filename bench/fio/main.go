// Command fio measures data throughput through rubinofs with Debian's fio
// (which must be on PATH), with verification on, against native:
//
//	seq-write   rw=write, 1 MiB blocks, -size bytes, verify=crc32c (written, then read back and checked)
//	seq-read    rw=read of that file, 1 MiB blocks, every block checked
//	rand-write  rw=randwrite, 4 KiB blocks, a -rsize file, verify=crc32c
//	rand-read   rw=randread of that file, 4 KiB blocks, every block checked
//
// Every job uses --direct=0 --ioengine=psync --fallocate=none and one job.
// By default the files stay in the page cache (--invalidate=0) on every
// target, so the ratios are the FUSE path's cost against memory speed;
// with -cold every job starts with the file written back and its page
// cache dropped, the backing file's included (sync -d, then dd
// iflag=nocache count=0 in the backing directory), so every target reads
// from the disk. (fio's
// own invalidation alone would drop only the mount's cache, and a mount
// would then read the backing file from the page cache while native reads
// the disk.)
// Each run writes fresh files and removes them at its end. Targets, in an
// order that rotates every run:
//
//	native        a directory on the same file system
//	loop-1s       a bare go-fuse loopback with 1 s entry and attribute timeouts
//	rubinofs-off  rubinofs with the guard off (--mode off), the watcher on
//	rubinofs      rubinofs with the guard enforcing and the watcher on
//
// It prints the median throughput (MiB/s, as fio's bw_bytes) per phase and
// the ratio to native; verification failures and fio errors end the run.
//
// Usage (as root): go run ./bench/fio [-runs 3] [-size 256M] [-rsize 64M]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

var (
	runs  = flag.Int("runs", 3, "runs per target (each run does every phase on every target)")
	size  = flag.String("size", "256M", "sequential file size (fio size syntax)")
	rsize = flag.String("rsize", "64M", "random-I/O file size (fio size syntax)")
	fio   = flag.String("fio", "fio", "the fio binary")
	cold  = flag.Bool("cold", false, "read from the disk: fio drops the file's page cache before each job (--invalidate=1) and the harness writes back and drops the backing file's too (sync -d; dd iflag=nocache); default: page-cache-hot on every target (--invalidate=0)")
	only  = flag.String("only", "", "comma-separated targets to run besides native (default all: loop-1s,rubinofs-off,rubinofs), or bin:LABEL=PATH[:ARG...] (a rubinofs binary mounted through its CLI)")
)

type phase struct {
	name, rw, bs, file string
	sizeFlag           *string
	read               bool // throughput is the read side
}

var phases = []phase{
	{"seq-write", "write", "1M", "seq", size, false},
	{"seq-read", "read", "1M", "seq", size, true},
	{"rand-write", "randwrite", "4k", "rand", rsize, false},
	{"rand-read", "randread", "4k", "rand", rsize, true},
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./bench/fio [flags] (as root; needs fio)\n\n"+
			"Runs fio with verify (sequential 1 MiB write and read, random 4 KiB write and read) on native,\n"+
			"a bare go-fuse loopback, rubinofs --mode off and rubinofs enforcing, and prints throughput ratios to native.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	if out, err := exec.Command(*fio, "--version").Output(); err != nil {
		log.Fatalf("%s --version: %v (install Debian's fio)", *fio, err)
	} else {
		fmt.Fprintf(os.Stderr, "%s", out)
	}
	defer benchkit.Teardown()
	benchkit.CatchSignals()
	tmp, err := benchkit.TempDir("rubinofs-fio-")
	if err != nil {
		log.Fatal(err)
	}
	targets, err := benchkit.Mount(tmp, *only, "native", "loop-1s", "rubinofs-off", "rubinofs")
	if err != nil {
		benchkit.Fatal(err)
	}

	bw := map[string]map[string][]float64{} // target -> phase -> bytes/s
	for _, t := range targets {
		bw[t.Name] = map[string][]float64{}
	}
	for r := 0; r < *runs; r++ {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			for _, p := range phases {
				file := fmt.Sprintf("%s-%d.dat", p.file, r)
				if *cold {
					// written back first: dirty pages are not dropped
					drop := fmt.Sprintf("[ ! -e %s ] || { sync -d %s && dd if=%s iflag=nocache count=0 2>/dev/null; }", file, file, file)
					if _, err := benchkit.Run(t.Back, drop); err != nil {
						benchkit.Fatalf("%s/%s: dropping the backing file's cache: %v", t.Name, p.name, err)
					}
				}
				b, err := runFio(t.Dir, p, file)
				if err != nil {
					benchkit.Fatalf("%s/%s: %v", t.Name, p.name, err)
				}
				bw[t.Name][p.name] = append(bw[t.Name][p.name], b)
			}
			if _, err := benchkit.Run(t.Dir, fmt.Sprintf("rm -f seq-%d.dat rand-%d.dat", r, r)); err != nil {
				benchkit.Fatalf("%s/rm: %v", t.Name, err)
			}
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, *runs)
	}

	fmt.Printf("\nfio, verify=crc32c, psync, buffered, %s; sequential %s, random %s; medians of %d runs, MiB/s (ratio to native)\n\n",
		map[bool]string{true: "cold (page cache dropped)", false: "page-cache-hot"}[*cold], *size, *rsize, *runs)
	var names []string
	for _, p := range phases {
		names = append(names, p.name)
	}
	benchkit.Table{Phases: names, Targets: targets, Format: "%.1f",
		Value: func(t, p string) float64 { return benchkit.MedianFloat(bw[t][p]) / (1 << 20) }}.Print()
	for _, t := range targets {
		if n := t.Denials(); n > 0 {
			fmt.Printf("\n%s: %d guard denials\n", t.Name, n)
		}
	}
}

// runFio runs one phase in dir on file and returns its throughput in
// bytes per second.
func runFio(dir string, p phase, file string) (float64, error) {
	args := []string{"--name=" + p.name, "--filename=" + file, "--rw=" + p.rw, "--bs=" + p.bs,
		"--size=" + *p.sizeFlag, "--direct=0", "--ioengine=psync", "--fallocate=none",
		"--verify=crc32c", "--output-format=json", "--invalidate=" + map[bool]string{true: "1", false: "0"}[*cold]}
	// fio resolves --filename against its working directory; run it
	// through the shell's cd so no harness thread holds the mount.
	script := "exec " + benchkit.Shq(*fio)
	for _, a := range args {
		script += " " + benchkit.Shq(a)
	}
	cmd := exec.Command("/bin/sh", "-c", "cd "+benchkit.Shq(dir)+" && "+script)
	cmd.Dir = "/"
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := benchkit.Start(cmd); err != nil {
		return 0, err
	}
	err := cmd.Wait()
	benchkit.Done(cmd)
	if err != nil {
		return 0, fmt.Errorf("%v: %s%s", err, stderr.String(), stdout.String())
	}
	out := stdout.String()
	if i := strings.IndexByte(out, '{'); i > 0 {
		out = out[i:] // fio may print notes before the JSON
	}
	var res struct {
		Jobs []struct {
			Error int `json:"error"`
			Read  struct {
				BW float64 `json:"bw_bytes"`
			} `json:"read"`
			Write struct {
				BW float64 `json:"bw_bytes"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return 0, fmt.Errorf("fio output: %v: %.500s", err, out)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].Error != 0 {
		return 0, fmt.Errorf("fio job failed: %.2000s%s", out, stderr.String())
	}
	if p.read {
		return res.Jobs[0].Read.BW, nil
	}
	return res.Jobs[0].Write.BW, nil
}
