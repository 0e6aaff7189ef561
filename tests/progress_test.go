package tests

// Progress: the foreground mount's initial watcher walk
// and `rubinofs compact run` draw progress on stderr only when it is a
// terminal. Here stderr is a file: not a byte of progress. With
// RUBINOFS_PROGRESS=1 (drawing forced, as on a terminal) the same runs do
// draw, which shows the check can fail.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// progressMarks are bytes only a progress bar writes: the carriage return
// it redraws with and its descriptions.
var progressMarks = []string{"\r", "watching the workspace", "compacting "}

// runForegroundMount mounts dm in the foreground with stderr to a file and
// the given extra environment, runs `compact new` and `compact run` with
// the same environment, stops the mount with SIGTERM and returns everything
// written to stderr.
func runForegroundMount(t *testing.T, dm *cliMount, env ...string) string {
	t.Helper()
	env = append(os.Environ(), env...)
	fg := startForeground(t, dm.tmp, env, true, "--state-dir", dm.state, dm.ws, dm.mnt)
	run := func(args ...string) string {
		c := cliCommand(t, dm.tmp, env, args...)
		var out strings.Builder
		c.Stdout = &out
		c.Stderr = fg.log // the progress goes to stderr: collect it with the mount's
		if err := runCmd(t, c); err != nil {
			t.Fatalf("rubinofs %v: %v", args, err)
		}
		return strings.TrimSpace(out.String())
	}
	id := run("compact", "new", "--mount", dm.mnt)
	run("compact", "run", "--mount", dm.mnt, id)
	if err := fg.stop(); err != nil {
		t.Fatalf("mount: %v\n%s", err, fg.output())
	}
	return fg.output()
}

// TestProgressOnlyOnTerminal checks no progress reaches a non-terminal
// stderr, for a workspace big enough (1100 directories) that the walk
// reports progress.
func TestProgressOnlyOnTerminal(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	for i := 0; i < 1100; i++ {
		if err := os.MkdirAll(filepath.Join(dm.ws, fmt.Sprintf("d%02d/e%03d", i%20, i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	quiet := runForegroundMount(t, dm, "RUBINOFS_PROGRESS=")
	for _, m := range progressMarks {
		if strings.Contains(quiet, m) {
			t.Errorf("stderr is a file, yet it got progress output (%q):\n%q", m, quiet)
		}
	}
	forced := runForegroundMount(t, dm, "RUBINOFS_PROGRESS=1")
	for _, m := range []string{"\r", "watching the workspace", "watching 1121 directories", "compacting "} {
		if !strings.Contains(forced, m) {
			t.Errorf("with RUBINOFS_PROGRESS=1, no %q in stderr:\n%q", m, forced)
		}
	}
}
