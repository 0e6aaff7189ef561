package journal

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
)

// TestTouchedSetMatchesNaive checks the indexed set against the plain
// rule it replaces: after a rename, forget every member strictly below
// either name.
func TestTouchedSetMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	tab := newPathTable()
	names := []string{"a", "b", "c"}
	var paths []string
	var gen func(prefix string, depth int)
	gen = func(prefix string, depth int) {
		for _, n := range names {
			p := n
			if prefix != "" {
				p = prefix + "/" + n
			}
			paths = append(paths, p)
			if depth < 4 {
				gen(p, depth+1)
			}
		}
	}
	gen("", 1)
	s := newTouchedSet(tab)
	naive := map[string]bool{}
	for i := 0; i < 20000; i++ {
		p := paths[rng.Intn(len(paths))]
		if rng.Intn(3) > 0 {
			s.add(tab.intern(p))
			naive[p] = true
			continue
		}
		s.forgetBelow(tab.intern(p))
		for q := range naive {
			if strings.HasPrefix(q, p+"/") {
				delete(naive, q)
			}
		}
		if s.len() != len(naive) {
			t.Fatalf("step %d: %d members, want %d", i, s.len(), len(naive))
		}
		for _, q := range paths {
			if s.has(tab.intern(q)) != naive[q] {
				t.Fatalf("step %d: %s member %v, want %v", i, q, s.has(tab.intern(q)), naive[q])
			}
		}
	}
	// Forgetting everything leaves no index behind.
	for _, n := range names {
		s.forgetBelow(tab.intern(n))
		s.remove(tab.intern(n))
	}
	if s.len() != 0 || len(s.below) != 0 || len(s.kids) != 0 {
		t.Fatalf("left %d members, %d counts, %d child sets", s.len(), len(s.below), len(s.kids))
	}
}

// TestChangeCostIndependentOfHistory is the rule of
// docs/DESIGN.md#journal-interval-cost: 1,000 atomic saves (create a
// temporary name, rename it over the file) do the same work on the
// interval's captured set after 100,000 earlier changes as in a fresh
// session. The work is counted (ids visited), not timed.
func TestChangeCostIndependentOfHistory(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	absent := func(string) (PreImage, error) { return PreImage{Kind: KindAbsent}, nil }
	saves := func(session string) int {
		s, err := j.session(session)
		if err != nil {
			t.Fatal(err)
		}
		before := s.touched.steps
		s.mu.Unlock()
		for i := 0; i < 1000; i++ {
			f := fmt.Sprintf("src/pkg%d/file%d.go", i%10, i)
			mustRecord(t, j, session, "create", f+".tmp", "", absent)
			mustRecord(t, j, session, OpRename, f+".tmp", f, absent)
		}
		s, _ = j.session(session)
		defer s.mu.Unlock()
		return s.touched.steps - before
	}
	fresh := saves("fresh")
	for i := 0; i < 100000; i++ {
		mustRecord(t, j, "old", "create", fmt.Sprintf("gen/d%d/f%d", i%100, i), "", absent)
	}
	old := saves("old")
	if old != fresh {
		t.Fatalf("1,000 saves visited %d ids after 100,000 changes, %d in a fresh session", old, fresh)
	}
}
