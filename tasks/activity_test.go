package tasks

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestActivityRingAndOutputTail(t *testing.T) {
	r := NewRegistry(Caps{})
	tk := mustReserve(t, r, "", "s")
	for i := 1; i <= 8; i++ {
		r.RecordToolStarted(tk.ID, fmt.Sprintf("tool %d", i))
		r.RecordToolFinished(tk.ID, fmt.Sprintf("done %d", i))
	}
	got, _ := r.Find(tk.ID)
	if got.ToolCount != 8 || got.LastActivity != "tool 8" || !slices.Equal(got.Activity, []string{"done 3", "done 4", "done 5", "done 6", "done 7", "done 8"}) {
		t.Fatalf("ring: %+v", got)
	}
	// The tail: complete lines plus the partial, across chunks.
	r.RecordToolOutput(tk.ID, "l1\nl2\r\nl3")
	r.RecordToolOutput(tk.ID, "-more\n")
	got, _ = r.Find(tk.ID)
	if !slices.Equal(got.Output, []string{"l1", "l2", "l3-more", ""}) {
		t.Fatalf("tail %q", got.Output)
	}
	for i := 4; i <= 10; i++ {
		r.RecordToolOutput(tk.ID, fmt.Sprintf("l%d\n", i))
	}
	r.RecordToolOutput(tk.ID, "partial")
	got, _ = r.Find(tk.ID)
	if !slices.Equal(got.Output, []string{"l5", "l6", "l7", "l8", "l9", "l10", "partial"}) {
		t.Fatalf("tail %q", got.Output)
	}
	// A newline-free stream is cut at 200 bytes, on a rune boundary.
	r.RecordToolOutput(tk.ID, "\n"+strings.Repeat("é", 150))
	r.RecordToolOutput(tk.ID, strings.Repeat("x", 5000))
	got, _ = r.Find(tk.ID)
	last := got.Output[len(got.Output)-1]
	if len(last) != 200 || last != strings.Repeat("é", 100) {
		t.Fatalf("cut line: %d bytes %q", len(last), last[:10])
	}
	// A huge chunk of lines keeps the bounds.
	r.RecordToolOutput(tk.ID, strings.Repeat("y\n", 100000))
	got, _ = r.Find(tk.ID)
	if len(got.Output) != OutputTailMax+1 || got.Output[OutputTailMax] != "" {
		t.Fatalf("tail bounds: %q", got.Output)
	}
	// A finished tool wipes the tail.
	r.RecordToolFinished(tk.ID, "ran")
	if got, _ = r.Find(tk.ID); got.Output != nil {
		t.Fatalf("tail after finish: %q", got.Output)
	}
	if n, ok := r.RecordLiveProbe(tk.ID); !ok || n != 1 {
		t.Fatal("probe")
	}
	if got, _ = r.Find(tk.ID); got.ProbeCount != 1 || got.LastProbe.IsZero() {
		t.Fatal("probe not recorded")
	}
	if _, ok := r.RecordLiveProbe("404"); ok {
		t.Fatal("probe of an unknown id")
	}
}
