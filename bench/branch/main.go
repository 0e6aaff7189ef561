// Command branch measures branches on a large generated tree through the
// shipped CLI: a workspace of -files small files in -dirs directories is
// mounted with `rubinofs mount --daemon`, then
//
//	new       `rubinofs branch new` -runs times: the wall time of the
//	          command and what it reports (the view: directories,
//	          meta.json and the overlay mount; then its daemon answering)
//	discard   `rubinofs branch discard` of each
//	edit      in one branch, through `rubinofs run --branch`: cat and
//	          `sed -i` of -edits files, a new file per edit, and `rm -rf`
//	          of the last directory (its files read first, as the guard
//	          asks)
//	diff      `rubinofs branch diff --stat` of that branch
//	merge     `rubinofs branch merge` of it (plan, checkpoint, apply through
//	          the guard), after which the workspace is checked
//	remerge   the same merge again: every path is already there
//
// Usage (as root): go run ./bench/branch [-files 100000] [-dirs 100] [-runs 10] [-edits 100]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
)

func main() {
	files := flag.Int("files", 100000, "files in the tree")
	dirs := flag.Int("dirs", 100, "directories holding them")
	runs := flag.Int("runs", 10, "branches made and discarded")
	edits := flag.Int("edits", 100, "files edited in the merged branch")
	flag.Parse()
	benchkit.CatchSignals()
	defer benchkit.Teardown()
	if os.Geteuid() != 0 {
		benchkit.Fatal("bench/branch: branches need root")
	}
	tmp, err := benchkit.TempDir("bench-branch-")
	if err != nil {
		benchkit.Fatal(err)
	}
	bin := filepath.Join(tmp, "rubinofs")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/rubinofs").CombinedOutput(); err != nil {
		benchkit.Fatalf("building the CLI (run from the repository root): %v\n%s", err, out)
	}
	ws, mnt, state := filepath.Join(tmp, "ws"), filepath.Join(tmp, "mnt"), filepath.Join(tmp, "state")
	t0 := time.Now()
	if err := makeTree(ws, *files, *dirs); err != nil {
		benchkit.Fatal(err)
	}
	fmt.Printf("tree: %d files in %d directories, made in %v\n", *files, *dirs, time.Since(t0).Round(time.Millisecond))
	os.Mkdir(mnt, 0o755)
	cli := func(args ...string) (string, time.Duration, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = "/", append(benchkit.Env(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		start := time.Now()
		out, err := benchkit.Output(cmd)
		return string(out), time.Since(start), err
	}
	if out, _, err := cli("mount", "--daemon", "--state-dir", state, ws, mnt); err != nil {
		benchkit.Fatalf("mount: %v\n%s", err, out)
	}
	benchkit.AtExit(func() { cli("unmount", mnt) })

	viewRe := regexp.MustCompile(`view made in ([0-9.]+) ms, its daemon answering after ([0-9.]+) ms`)
	var news, views, answers, discards []time.Duration
	for i := 0; i < *runs; i++ {
		name := "b" + strconv.Itoa(i)
		out, d, err := cli("branch", "new", "--mount", mnt, name)
		if err != nil {
			benchkit.Fatalf("branch new: %v\n%s", err, out)
		}
		news = append(news, d)
		if sm := viewRe.FindStringSubmatch(out); sm != nil {
			views = append(views, ms(sm[1]))
			answers = append(answers, ms(sm[2]))
		}
		out, d, err = cli("branch", "discard", "--mount", mnt, name)
		if err != nil {
			benchkit.Fatalf("branch discard: %v\n%s", err, out)
		}
		discards = append(discards, d)
	}
	fmt.Printf("%-8s median %v (of %d)\n", "new", benchkit.Median(news).Round(10*time.Microsecond), len(news))
	fmt.Printf("%-8s median %v; its daemon answering after %v\n", "view", benchkit.Median(views).Round(10*time.Microsecond), benchkit.Median(answers).Round(10*time.Microsecond))
	fmt.Printf("%-8s median %v\n", "discard", benchkit.Median(discards).Round(10*time.Microsecond))

	if out, _, err := cli("branch", "new", "--mount", mnt, "m"); err != nil {
		benchkit.Fatalf("branch new m: %v\n%s", err, out)
	}
	benchkit.AtExit(func() { cli("branch", "discard", "--force", "--mount", mnt, "m") })
	var script strings.Builder
	script.WriteString("set -e\n")
	for i, j := 0, 0; i < *edits; j++ {
		if j%*dirs == *dirs-1 {
			continue // the directory removed below
		}
		i++
		f := fmt.Sprintf("d%03d/f%05d", j%*dirs, j)
		fmt.Fprintf(&script, "cat %s >/dev/null; sed -i 's/^line 3$/line three/' %s; echo new > %s.new\n", f, f, f)
	}
	fmt.Fprintf(&script, "find d%03d -type f -exec cat {} + >/dev/null; rm -rf d%03d\n", *dirs-1, *dirs-1) // the guard: read before removing
	out, d, err := cli("run", "--mount", mnt, "--branch", "m", "--", "sh", "-c", "cd "+benchkit.Shq(mnt)+" && "+script.String())
	if err != nil {
		benchkit.Fatalf("edit in the branch: %v\n%s", err, out)
	}
	fmt.Printf("%-8s %v (%d sed -i, %d new files, rm -rf of %d files)\n", "edit", d.Round(time.Millisecond), *edits, *edits, *files / *dirs)
	out, d, err = cli("branch", "diff", "--stat", "--mount", mnt, "m")
	if err != nil {
		benchkit.Fatalf("branch diff: %v\n%s", err, out)
	}
	fmt.Printf("%-8s %v (%d paths)\n", "diff", d.Round(time.Millisecond), strings.Count(out, "\n"))
	out, d, err = cli("branch", "merge", "--mount", mnt, "m")
	if err != nil {
		benchkit.Fatalf("branch merge: %v\n%s", err, out)
	}
	fmt.Printf("%-8s %v (%s)\n", "merge", d.Round(time.Millisecond), lastLine(out))
	if b, err := os.ReadFile(filepath.Join(ws, "d000/f00000")); err != nil || !strings.Contains(string(b), "line three") {
		benchkit.Fatalf("after the merge d000/f00000 = %q (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("d%03d", *dirs-1))); !os.IsNotExist(err) {
		benchkit.Fatalf("after the merge the removed directory: %v", err)
	}
	out, d, err = cli("branch", "merge", "--mount", mnt, "m")
	if err != nil {
		benchkit.Fatalf("branch merge again: %v\n%s", err, out)
	}
	fmt.Printf("%-8s %v (%s)\n", "remerge", d.Round(time.Millisecond), lastLine(out))
}

// makeTree writes files small files ("line 1" to "line 5") into dirs
// directories d000, d001, ... of root, named f00000, f00001, ....
func makeTree(root string, files, dirs int) error {
	body := []byte("line 1\nline 2\nline 3\nline 4\nline 5\n")
	for d := 0; d < dirs; d++ {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%03d", d)), 0o755); err != nil {
			return err
		}
	}
	for i := 0; i < files; i++ {
		p := filepath.Join(root, fmt.Sprintf("d%03d", i%dirs), fmt.Sprintf("f%05d", i))
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ms parses a count of milliseconds.
func ms(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Millisecond))
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	ls := strings.Split(strings.TrimSpace(out), "\n")
	return ls[len(ls)-1]
}
