package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOwnRecordsBoundedThroughMount: a process that removes 12,000 files at
// paths of 3.6 KB through the mount, faster than the watcher's own-change
// records expire, leaves the records within their bound
// (docs/DESIGN.md#own-records-bound: about 36 MiB, where the removed names
// alone are 45 MB), counts the records dropped early in the status file,
// and costs no one a refusal: a file read before the flood is appended to
// through one handle twice after it. The daemon is the CLI binary's (built
// without -race), so the removals come as fast as a real tool's; the files
// are made in the workspace before the mount, under a git-ignored
// directory the guard exempts.
func TestOwnRecordsBoundedThroughMount(t *testing.T) {
	m := cliDirs(t, map[string]string{"notes.txt": "one\n", ".gitignore": "flood/\n"})
	dir := filepath.Join(append([]string{m.ws, "flood"}, strings.Split(strings.Repeat(strings.Repeat("d", 240)+"/", 14), "/")...)...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 12000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d_%s", i, strings.Repeat("x", 200))), []byte("y"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.mountDaemon()
	if out, code := m.sh("cat notes.txt >/dev/null && rm -rf flood"); code != 0 {
		t.Fatalf("rm -rf flood: exit %d\n%s", code, out)
	}
	w, _ := m.status()["watcher"].(map[string]any)
	held, _ := w["own_records_bytes"].(float64)
	dropped, _ := w["own_records_dropped"].(float64)
	t.Logf("own records: %.0f bytes held, %.0f dropped early", held, dropped)
	const bound = 2*16<<20 + 4<<20 + 64<<10
	if held > bound {
		t.Errorf("the own-change records hold %.0f bytes, past their bound of %d", held, bound)
	}
	if dropped == 0 {
		t.Error("no own-change record counted as dropped early")
	}
	if out, code := m.sh(`python3 -c "f=open('notes.txt','a'); f.write('two\n'); f.flush(); f.write('three\n'); f.close()"`); code != 0 {
		t.Fatalf("appends: exit %d\n%s", code, out)
	}
	if got, err := os.ReadFile(filepath.Join(m.ws, "notes.txt")); err != nil || string(got) != "one\ntwo\nthree\n" {
		t.Errorf("notes.txt holds %q (%v) after the appends", got, err)
	}
}
