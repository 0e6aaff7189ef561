package ctltree

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestErrorRingBounded: the ring keeps the last MaxErrors records, oldest
// first, each message clipped to one line of at most MaxReason bytes, and
// Records filters by session.
func TestErrorRingBounded(t *testing.T) {
	var r ErrorRing
	huge := strings.Repeat("é\n", 100_000)
	for i := 0; i < MaxErrors+10; i++ {
		s := "a"
		if i%2 == 1 {
			s = "b"
		}
		r.Add(ErrorRecord{Session: s, Pid: uint32(i), Message: huge})
	}
	all := r.Records(nil)
	if len(all) != MaxErrors || all[0].Pid != 10 || all[MaxErrors-1].Pid != MaxErrors+9 {
		t.Fatalf("%d records, first pid %d", len(all), all[0].Pid)
	}
	for _, e := range all {
		if len(e.Message) > MaxReason+len("…") || !utf8.ValidString(e.Message) || strings.Contains(e.Message, "\n") {
			t.Fatalf("message of %d bytes", len(e.Message))
		}
	}
	if b := r.Records(func(s string) bool { return s == "b" }); len(b) != MaxErrors/2 || b[0].Session != "b" {
		t.Fatalf("%d records of session b", len(b))
	}
}

// TestErrorRingDrop: Drop removes one session's records from before a
// time and keeps the others, and its later ones, in order.
func TestErrorRingDrop(t *testing.T) {
	var r ErrorRing
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range []string{"a", "b", "a", "c", "a"} {
		r.Add(ErrorRecord{Session: s, Message: s, Time: t0.Add(time.Duration(i) * time.Second)})
	}
	r.Drop("a", t0.Add(4*time.Second)) // the last a is the new session's
	var got []string
	for _, rec := range r.Records(nil) {
		got = append(got, rec.Session)
	}
	if fmt.Sprint(got) != "[b c a]" {
		t.Fatalf("after Drop: %v", got)
	}
}
