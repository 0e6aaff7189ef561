package tests

// The journal's bounded state through a real mount: a deep tree made by a
// shell loop costs linear log space, and its changes, checkpoints and
// rewind still work; a small --journal-budget reached by log growth alone
// stops the session's journal, and .rubino/status and `rubinofs
// checkpoints` say so (docs/DESIGN.md#journal-paths,
// docs/DESIGN.md#journal-budget).

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// deepLevels and deepDirName are the deep tree: 200 nested directories
// of 200-byte names (a 40 KB path at the bottom). Whole paths in every
// record would make its log about 12 MB (60 KB a level); the path table
// makes it a few hundred bytes a level. (The 1,000-level figures are in
// docs/BENCHMARKS.md#journal-bounds: each level costs the mount time
// linear in its depth, too long for a test on a loaded machine.)
const deepLevels = 200

func deepDirName() string { return strings.Repeat("d", 196) }

// TestJournalDeepTreeLinear: `mkdir NAME; cd NAME` 200 times in a
// session (a bash loop, 25 levels a script) costs at most 2 KiB of log
// per level, and `changes`, `checkpoints` and `rewind` work on it: the
// rewind removes the tree.
func TestJournalDeepTreeLinear(t *testing.T) {
	m := journalMount(t)
	s := m.startSession("deep")
	for from := 1000; from < 1000+deepLevels; from += 25 {
		// bash, whose cd works past PATH_MAX; PWD unexported, else the
		// long path no longer fits in mkdir's environment. Each script
		// goes down the levels made so far, then makes 25 more.
		script := fmt.Sprintf(`bash -ec 'export -n PWD OLDPWD
n=%s
while :; do set -- [0-9]*/; [ -d "$1" ] || break; cd "$1"; done
for i in $(seq %d %d); do mkdir "$i$n"; cd "$i$n"; done
echo deep-done'`, deepDirName(), from, from+24)
		if out := s.must(script); !strings.Contains(out, "deep-done") {
			t.Fatalf("the loop did not finish:\n%s", out)
		}
	}
	st, err := os.Stat(m.state + "/journal/sessions/deep.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if per := st.Size() / deepLevels; per > 2048 {
		t.Fatalf("the log is %d bytes for %d levels: %d bytes per level, want at most 2048", st.Size(), deepLevels, per)
	}
	t.Logf("log %d bytes, %d per level", st.Size(), st.Size()/deepLevels)
	// changes: one line per directory, streamed (counted by wc, never
	// held by the test); the deepest path is 1,000 names long.
	out := s.must(`wc -l < .rubino/sessions/deep/changes; cat .rubino/sessions/deep/changes | tail -n 1 | tr -cd / | wc -c`)
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != strconv.Itoa(deepLevels) {
		t.Fatalf("changes: %q lines, want %d", out, deepLevels)
	}
	// The same through the CLI, streamed.
	if out, code := m.sh("rubinofs changes --session deep --json | wc -l"); code != 0 || strings.TrimSpace(out) != strconv.Itoa(deepLevels) {
		t.Fatalf("rubinofs changes --json: exit %d: %q", code, out)
	}
	if n, _ := strconv.Atoi(f[1]); n < deepLevels-1 {
		t.Fatalf("the last change's line has %d slashes, want at least %d", n, deepLevels-1)
	}
	cps, code := m.sh("rubinofs checkpoints --session deep")
	if code != 0 || !strings.Contains(cps, "cp000000") || !strings.Contains(cps, strconv.Itoa(deepLevels)) {
		t.Fatalf("checkpoints: exit %d\n%s", code, cps)
	}
	s.close()
	rw, code := m.sh("rubinofs rewind --session deep --to cp000000")
	if code != 0 {
		t.Fatalf("rewind: exit %d\n%.2000s", code, rw)
	}
	if _, err := os.Stat(m.ws + "/1000" + deepDirName()); !os.IsNotExist(err) {
		t.Fatalf("the rewind left the tree's top: %v\n%.2000s", err, rw)
	}
}

// TestJournalBudgetStopsOnLogGrowth: with --journal-budget 65536 and no
// file content saved (only creates), the session's log alone reaches the
// budget; its journal stops (the log stops growing), the files are still
// made, and .rubino/status ("journal": "stopped") and `rubinofs
// checkpoints` say why.
func TestJournalBudgetStopsOnLogGrowth(t *testing.T) {
	const budget = 65536
	m := journalMount(t, "--journal-budget", strconv.Itoa(budget))
	s := m.startSession("small")
	s.must(`set -e; for i in $(seq 1000); do : > "new-$i"; done; ls new-* | wc -l`)
	if _, err := os.Stat(m.ws + "/new-1000"); err != nil {
		t.Fatalf("a change past the budget was refused: %v", err)
	}
	st, err := os.Stat(m.state + "/journal/sessions/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > budget+4096 {
		t.Fatalf("the log grew to %d bytes past a budget of %d", st.Size(), budget)
	}
	j, _ := m.status()["journal"].(map[string]any)
	stopped, _ := j["stopped"].(map[string]any)
	why, _ := stopped["small"].(string)
	if !strings.Contains(why, "budget of 65536 bytes is spent") {
		t.Fatalf("status journal = %v", j)
	}
	if lb, _ := j["log_bytes"].(float64); lb < budget {
		t.Fatalf("status log_bytes %v, want at least the budget", j["log_bytes"])
	}
	out, code := m.sh("rubinofs checkpoints --session small")
	if code != 0 || !strings.Contains(out, "journal stopped: the journal budget of 65536 bytes is spent") {
		t.Fatalf("checkpoints: exit %d\n%s", code, out)
	}
}
