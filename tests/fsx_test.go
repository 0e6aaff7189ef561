package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fsxOps bounds each fsx run: enough operations for every op kind fsx has
// to run many times on a 256 KiB file, few enough for seconds under -race.
const fsxOps = "1000"

// fsxModes are fsx's standard (mapped reads and writes included), no-mmap
// (-R -W) and O_DIRECT (-Z, which needs block-aligned reads, writes and
// truncates and no mapped I/O) runs.
var fsxModes = []struct {
	name string
	args []string
}{
	{"standard", nil},
	{"nommap", []string{"-R", "-W"}},
	{"odirect", []string{"-Z", "-R", "-W", "-r", "4096", "-w", "4096", "-t", "4096"}},
}

// TestTortureFsx runs xfstests' fsx in its standard, no-mmap and O_DIRECT
// modes through an enforcing mount, one after the other in one session
// (rubinofs run): every file fsx touches it created itself, so each run
// must end "All N operations completed A-OK!" with exit 0, the guard must
// refuse nothing and the watcher see no external change. Its mapped
// writes are stores through a shared writable mapping of the session's
// own file: they must stay its own (docs/DESIGN.md#mmap-page-in). Each mode
// first runs on a plain directory: a failure there skips the test.
func TestTortureFsx(t *testing.T) {
	fsx := xfstestsTool(t, "fsx")
	logs := t.TempDir()
	// cmd is the fsx command line of mode md on file.
	cmd := func(md []string, file string) []string {
		return append(append([]string{fsx, "-q", "-N", fsxOps, "-S", "1", "-P", logs}, md...), file)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tortureHang)
	defer cancel()
	native := t.TempDir()
	for _, md := range fsxModes {
		c := cmd(md.args, filepath.Join(native, md.name))
		if out, err := runTortureTool(ctx, t, c[0], c[1:]...); err != nil || !strings.Contains(out, "completed A-OK!") {
			t.Skipf("fsx %s fails on a plain directory (%v), so not the mount's:\n%s", md.name, err, out)
		}
	}
	m := newMount(t, nil, nil)
	if err := os.Mkdir(m.path("fsx"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The three runs in one session, one after the other.
	var script []string
	for _, md := range fsxModes {
		var words []string
		for _, w := range cmd(md.args, m.path("fsx/"+md.name)) {
			words = append(words, shq(w))
		}
		script = append(script, "echo mode "+md.name+" && "+strings.Join(words, " "))
	}
	out, err := runTortureTool(ctx, t, rubinofsBin(t), "run", "--mount", m.mnt, "--", "/bin/sh", "-c", strings.Join(script, " && "))
	if n := strings.Count(out, "All "+fsxOps+" operations completed A-OK!"); err != nil || n != len(fsxModes) {
		t.Errorf("fsx through the mount: %v, %d of %d runs A-OK\n%s", err, n, len(fsxModes), out)
	}
	m.assertUntouched(t, "")
}
