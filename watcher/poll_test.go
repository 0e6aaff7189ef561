package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

func evString(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Path+" "+e.Op.String())
	}
	sort.Strings(out)
	return out
}

// TestPollerPass: a pass reports a created, a written, a chmod'ed and a
// removed name once, and nothing when nothing changed; a change whose stat
// the Own filter claims is not reported.
func TestPollerPass(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		if err := os.WriteFile(filepath.Join(root, rel), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	write("d/a", "1")
	write("b", "1")
	write("gone", "1")
	var ownIno uint64
	p := NewPoller(PollConfig{Root: root, Own: func(st *unix.Stat_t) bool { return st.Ino == ownIno }})
	if evs := p.Pass(); len(evs) != 0 {
		t.Fatalf("no change: %v", evString(evs))
	}
	write("d/a", "22")
	write("new", "n")
	os.Chmod(filepath.Join(root, "b"), 0o600)
	os.Remove(filepath.Join(root, "gone"))
	got := fmt.Sprint(evString(p.Pass()))
	want := fmt.Sprint([]string{"b " + Chmod.String(), "d/a " + Write.String(), "gone " + Remove.String(), "new " + Create.String()})
	if got != want {
		t.Fatalf("pass: %s, want %s", got, want)
	}
	var st unix.Stat_t
	write("b", "own change")
	unix.Stat(filepath.Join(root, "b"), &st)
	ownIno = st.Ino
	if evs := p.Pass(); len(evs) != 0 {
		t.Fatalf("own change reported: %v", evString(evs))
	}
	ownIno = 0
	write("b", "another mount's change")
	if got := evString(p.Pass()); len(got) != 1 || got[0] != "b "+Write.String() {
		t.Fatalf("change after an own one: %v", got)
	}
}

// BenchmarkPollPass10k is the cost of one pass over 10,000 unchanged
// files in 100 directories (docs/multihost.md).
func BenchmarkPollPass10k(b *testing.B) {
	root := b.TempDir()
	for d := 0; d < 100; d++ {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", d))
		os.Mkdir(dir, 0o755)
		for f := 0; f < 100; f++ {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), []byte("x"), 0o644)
		}
	}
	p := NewPoller(PollConfig{Root: root})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if evs := p.Pass(); len(evs) != 0 {
			b.Fatal(evs)
		}
	}
	b.ReportMetric(float64(p.Stats().Names)/float64(p.Stats().Passes), "names/pass")
}
