package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/sessionctl"
)

// TestSkeletonRanges: the outline rule (docs/DESIGN.md#read-tool): each
// unindented line and the first line of the indented run after it are
// shown, runs of readToolMinElide or more further lines are elided, a
// run's trailing blank lines are kept, and an outline over half the limit
// ends with one range to the end of the file.
func TestSkeletonRanges(t *testing.T) {
	src := strings.Split(strings.Join([]string{
		"package p", //  1
		"",          //  2
		"func a() {",
		"\tx := 1", //  4 shown: the first of the run
		"\ty := 2", //  5 elided
		"\tz := 3", //  6 elided
		"",         //  7 elided (inside the run)
		"\treturn", //  8 elided
		"}",        //  9
		"func b() {",
		"\tone()", // 11 shown
		"\ttwo()", // 12 shown: a run of one further line is not elided
		"}",
		"type T struct {",
		"\tA int", // 15 shown
		"\tB int", // 16 elided
		"\tC int", // 17 elided
		"",        // 18 kept: trailing blank
		"",        // 19 kept
		"var v = 1",
	}, "\n"), "\n")
	got := skeletonRanges(src, 2000)
	want := []guard.Range{{First: 5, Count: 4}, {First: 16, Count: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ranges %v, want %v", got, want)
	}

	// The cut: 100 blocks of 10 lines, 3 shown lines each; a limit of 20
	// shows at most 10 lines, then one range to the end.
	var big []string
	for i := 0; i < 100; i++ {
		big = append(big, fmt.Sprintf("block %d {", i))
		for j := 0; j < 8; j++ {
			big = append(big, "\tline")
		}
		big = append(big, "}")
	}
	got = skeletonRanges(big, 20)
	shown := len(big)
	for _, r := range got {
		shown -= int(r.Count)
	}
	last := got[len(got)-1]
	if shown > 10 || last.First+last.Count-1 != int64(len(big)) {
		t.Fatalf("cut outline shows %d lines, last range %v of %d lines", shown, last, len(big))
	}
	for i := 1; i < len(got); i++ {
		if got[i].First < got[i-1].First+got[i-1].Count+1 {
			t.Fatalf("ranges %v and %v touch or overlap", got[i-1], got[i])
		}
	}

	// Never more ranges than the daemon takes.
	var many []string
	for i := 0; i < 3*sessionctl.MaxSkeletonRanges; i++ {
		many = append(many, "x", "\ta", "\tb", "\tc")
	}
	if got := skeletonRanges(many, 1<<30); len(got) > sessionctl.MaxSkeletonRanges {
		t.Fatalf("%d ranges, over the daemon's %d", len(got), sessionctl.MaxSkeletonRanges)
	}
	if got := skeletonRanges(nil, 10); got != nil {
		t.Fatalf("empty file: %v", got)
	}
}

// TestNumbered: lines numbered as cat -n numbers them; a line over
// readToolMaxBytes clipped with a note.
func TestNumbered(t *testing.T) {
	if got := numbered([]string{"a", "\tb", "c"}, 2, 3); got != "     2\t\tb\n     3\tc\n" {
		t.Fatalf("numbered: %q", got)
	}
	got := numbered([]string{strings.Repeat("x", readToolMaxBytes+5)}, 1, 1)
	if len(got) > readToolMaxBytes+200 || !strings.Contains(got, "… (5 more bytes of this line") {
		t.Fatalf("a long line: %d bytes, ends %q", len(got), got[len(got)-100:])
	}
}
