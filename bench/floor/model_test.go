package main

import (
	"testing"
	"time"
)

func TestFloorModel(t *testing.T) {
	c := Costs{Getattr: 10 * time.Microsecond, OpenPair: 25 * time.Microsecond}
	counts := map[string]float64{"lookup": 3, "getattr": 2, "open": 4, "release": 4, "forget": 7, "opendir": 1, "releasedir": 1}
	// 5 round trips at 10 µs, 5 opens at 25 µs; forgets and releases free.
	want := time.Millisecond + 50*time.Microsecond + 125*time.Microsecond
	if got := c.Floor(time.Millisecond, counts); got != want {
		t.Fatalf("Floor = %v, want %v", got, want)
	}
	if n := total(counts); n != 15 {
		t.Fatalf("total = %v, want 15 (forget left out)", n)
	}
}

func TestCounts(t *testing.T) {
	m := medianCounts([]map[string]float64{{"open": 3, "read": 1}, {"open": 5}, {"open": 4, "read": 2}})
	if m["open"] != 4 || m["read"] != 1 || len(m) != 2 {
		t.Fatalf("medianCounts = %v", m)
	}
	d := delta(map[string]float64{"open": 2, "lookup": 1}, map[string]float64{"open": 5, "lookup": 1, "read": 2})
	if format(d) != "open=3 read=2" {
		t.Fatalf("delta = %q", format(d))
	}
	if x := excess(map[string]float64{"open": 5, "getattr": 2}, map[string]float64{"open": 5, "getattr": 1}); format(x) != "getattr=1" {
		t.Fatalf("excess = %q", format(x))
	}
}
