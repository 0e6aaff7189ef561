package guard

import (
	"fmt"
	"testing"
	"time"
)

// TestDenialSummaryBounds: counts stay exact; the first MaxSummaryKeys
// (path, code) entries stay listed and later ones land in Other; the log
// ring keeps the newest lines in order; past MaxSummarySessions an ended
// session's summary goes first.
func TestDenialSummaryBounds(t *testing.T) {
	g := New(Config{MaxDenials: 5})
	g.ForSession("s") // live
	g.RecordDenial(Denial{Session: "s", Path: "first", Code: CodeUnread})
	for i := 0; i < MaxSummaryKeys+500; i++ {
		g.RecordDenial(Denial{Session: "s", Path: fmt.Sprint("loud/", i), Code: CodeUnread})
	}
	g.RecordDenial(Denial{Session: "s", Path: "first", Code: CodeUnread, Warned: true})
	sums := g.DenialSummaries(nil)
	if len(sums) != 1 {
		t.Fatalf("summaries %d", len(sums))
	}
	s := sums[0]
	if s.Denials != MaxSummaryKeys+501 || s.Warnings != 1 || len(s.Entries) != MaxSummaryKeys || s.Other != 501 {
		t.Fatalf("summary: %d denials, %d warnings, %d entries, other %d", s.Denials, s.Warnings, len(s.Entries), s.Other)
	}
	if e := s.Entries[0]; e.Path != "first" || e.Count != 2 {
		t.Fatalf("most counted entry %+v, want first ×2", e)
	}
	if d, w := g.DenialCount("s"); d != MaxSummaryKeys+501 || w != 1 {
		t.Fatalf("DenialCount %d %d", d, w)
	}
	log := g.Denials("")
	if len(log) != 5 || log[4].Path != "first" || log[3].Path != fmt.Sprint("loud/", MaxSummaryKeys+499) {
		t.Fatalf("log %+v", log)
	}
	// Sessions: fill to the bound with ended sessions, then one more
	// evicts an ended one, never the live s.
	for i := 1; i <= MaxSummarySessions; i++ {
		g.RecordDenial(Denial{Session: fmt.Sprint("ended-", i), Path: "p"})
	}
	if st := g.DenialLogStats(); st.Summaries != MaxSummarySessions {
		t.Fatalf("%d summaries, want %d", st.Summaries, MaxSummarySessions)
	}
	if d, _ := g.DenialCount("s"); d == 0 {
		t.Fatal("the live session's summary was dropped")
	}
	g.RenameSession("s", "t")
	if d, _ := g.DenialCount("t"); d != MaxSummaryKeys+501 {
		t.Fatalf("after rename: %d", d)
	}
}

// TestForgetDenials: a session's summary and log lines go, in a full
// ring too; other sessions' stay, in order, and the ring fills on.
func TestForgetDenials(t *testing.T) {
	g := New(Config{MaxDenials: 4})
	for i, s := range []string{"a", "b", "a", "b", "a", "b"} { // the ring wraps
		g.RecordDenial(Denial{Session: s, Path: fmt.Sprint("p", i), Code: CodeUnread})
	}
	g.ForgetDenials("a", time.Now())
	if d, _ := g.DenialCount("a"); d != 0 {
		t.Fatalf("a's count after ForgetDenials: %d", d)
	}
	var paths []string
	for _, d := range g.Denials("") {
		paths = append(paths, d.Path)
	}
	if fmt.Sprint(paths) != "[p3 p5]" {
		t.Fatalf("the log after ForgetDenials: %v, want [p3 p5]", paths)
	}
	if d, _ := g.DenialCount("b"); d != 3 {
		t.Fatalf("b's count: %d", d)
	}
	for i := 6; i < 10; i++ {
		g.RecordDenial(Denial{Session: "c", Path: fmt.Sprint("p", i), Code: CodeUnread})
	}
	paths = paths[:0]
	for _, d := range g.Denials("") {
		paths = append(paths, d.Path)
	}
	if fmt.Sprint(paths) != "[p6 p7 p8 p9]" {
		t.Fatalf("the ring after refilling: %v", paths)
	}
	// A new session of the name refused already (after before) keeps
	// that refusal, in the log and in its counted-again summary.
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	g.RecordDenial(Denial{Session: "c", Path: "new", Code: CodeUnread, Time: t0.Add(time.Second)})
	g.ForgetDenials("c", t0)
	if d, _ := g.DenialCount("c"); d != 1 {
		t.Fatalf("c's count after forgetting what came before: %d, want 1", d)
	}
	if ds := g.Denials("c"); len(ds) != 1 || ds[0].Path != "new" {
		t.Fatalf("c's lines: %+v", ds)
	}
}
