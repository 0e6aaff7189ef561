package journal

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// TestTreeMapBelow: the subtree of "a" is a/... only; names that sort
// next to it ("a-b", "a0", "ab", "a.") are not below it.
func TestTreeMapBelow(t *testing.T) {
	m := newTreeMap[int]()
	for i, p := range []string{"a", "a-b", "a.", "a/b", "a/b/c", "a/z", "a0", "ab", "b", "a/b0"} {
		m.set(p, i)
	}
	var got []string
	m.below("a", func(k string, _ int) bool { got = append(got, k); return true })
	if want := []string{"a/b", "a/b/c", "a/b0", "a/z"}; !slices.Equal(got, want) {
		t.Fatalf("below a: %q, want %q", got, want)
	}
	m.moveBelow("a/b", "x")
	if !m.has("x/c") || m.has("a/b/c") || !m.has("a/b") || !m.has("a/b0") {
		t.Fatalf("moveBelow a/b x left x/c %v a/b/c %v a/b %v a/b0 %v", m.has("x/c"), m.has("a/b/c"), m.has("a/b"), m.has("a/b0"))
	}
	m.dropBelow("a")
	if m.has("a/z") || m.has("a/b0") || !m.has("a") || !m.has("a0") || !m.has("a-b") || m.len() != 7 {
		t.Fatalf("after dropBelow a: %d entries", m.len())
	}
	got = nil
	m.below("", func(k string, _ int) bool { got = append(got, k); return true })
	if len(got) != m.len() {
		t.Fatalf("below the root: %q", got)
	}
}

// TestReplaySimOrigin: the indexed walk back through the replay's moves
// gives the same name as applying every move, newest first, in turn.
func TestReplaySimOrigin(t *testing.T) {
	names := []string{"a", "b", "c", "a/x", "b/x", "a/x/y", "c/y", "\x00exchange"}
	rnd := rand.New(rand.NewSource(1))
	for trial := 0; trial < 500; trial++ {
		r := newReplaySim(nil)
		for i := rnd.Intn(12); i > 0; i-- {
			from, to := names[rnd.Intn(len(names))], names[rnd.Intn(len(names))]
			if from == to || strings.HasPrefix(to, from+"/") {
				continue
			}
			r.move(from, to)
		}
		for _, p := range append(names, "a/x/y/z", "b/q", "ab") {
			want := p
			for i := len(r.moves) - 1; i >= 0; i-- {
				m := r.moves[i]
				if want == m.to || strings.HasPrefix(want, m.to+"/") {
					want = m.from + want[len(m.to):]
				}
			}
			if got := r.origin(p); got != want {
				t.Fatalf("trial %d: origin(%q) = %q, want %q (moves %q)", trial, p, got, want, r.moves)
			}
		}
	}
}
