package watcher

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ownBytes recounts what the own tables hold, as ownbound.go estimates it.
// Called with mu held.
func (t *ownTable) recount() int64 {
	var n int64
	for rel := range t.paths {
		n += int64(len(rel) + pathCost)
	}
	n += int64(len(t.ids)) * idCost
	for i := range t.moves {
		n += t.moves[i].cost()
	}
	return n
}

// TestSettledNameRecordsDropped: a name's record kept after an own change
// that left the name existing decides nothing, so the next prune drops it
// whatever its age; the identity's record stays and still makes the
// change's events own. A removed name's record stays for its TTL.
func TestSettledNameRecordsDropped(t *testing.T) {
	root := t.TempDir()
	r := newRec(t)
	w := start(t, r.config(root))
	for i := 0; i < 20; i++ {
		name := "f" + strconv.Itoa(i)
		own(t, w, func() error { return os.WriteFile(filepath.Join(root, name), []byte("own\n"), 0o644) }, name)
	}
	write(t, filepath.Join(root, "gone"), "x")
	r.waitEvent("gone", Create)
	r.reset()
	own(t, w, func() error { return os.Remove(filepath.Join(root, "gone")) }, "gone")

	w.own.mu.Lock()
	w.own.lastPrune = time.Time{}
	w.own.mu.Unlock()
	w.pruneOwn()
	w.own.mu.Lock()
	var kept []string
	for rel := range w.own.paths {
		kept = append(kept, rel)
	}
	ids := len(w.own.ids)
	bytes, recount := w.own.bytes, w.own.recount()
	w.own.mu.Unlock()
	if len(kept) != 1 || kept[0] != "gone" {
		t.Errorf("name records kept after the prune: %v, want only the removed name's", kept)
	}
	if ids < 20 {
		t.Errorf("%d identity records kept, want the 20 files'", ids)
	}
	if bytes != recount {
		t.Errorf("the tables' size is counted as %d bytes, recounted %d", bytes, recount)
	}
	barrier(t, r, root, "barrier")
	r.noneBut("barrier")
}

// TestOwnRecordsBounded: own changes of long names made faster than their
// TTL lets them go keep the tables within their bound, by dropping records
// before the TTL (counted), never one an own change is using, and names
// before identities; the size counted is the size held.
func TestOwnRecordsBounded(t *testing.T) {
	root := t.TempDir()
	w := start(t, newRec(t).config(root))
	kept := filepath.Join(root, "kept")
	own(t, w, func() error { return os.WriteFile(kept, []byte("own\n"), 0o644) }, "kept")
	var st syscall.Stat_t
	if err := syscall.Lstat(kept, &st); err != nil {
		t.Fatal(err)
	}
	endHeld := w.Begin("held")
	// Names of 3,600 bytes under a directory that does not exist: each
	// record is kept as a removed name's, for ownTTL.
	long := strings.Repeat(strings.Repeat("d", 240)+"/", 15)
	limit := int64(2*ownMaxBytes + ownMaxBytes/4 + len(long) + 2*pathCost)
	n := int(3*ownMaxBytes/len(long)) + 1
	var peak int64
	for i := 0; i < n; i++ {
		own(t, w, func() error { return nil }, filepath.Join("nowhere", long, strconv.Itoa(i)))
		w.own.mu.Lock()
		peak = max(peak, w.own.bytes)
		// Keep kept's identity record younger than ownPressTTL: on a
		// loaded machine the loop can take longer, and a record that
		// old is one pressure may drop.
		if s := w.own.ids[idOf(&st)]; s != nil {
			s.at = time.Now()
		}
		w.own.mu.Unlock()
	}
	w.own.mu.Lock()
	_, held := w.own.paths["held"]
	_, idKept := w.own.ids[idOf(&st)]
	bytes, recount, dropped := w.own.bytes, w.own.recount(), w.own.dropped
	w.own.mu.Unlock()
	endHeld()
	if peak > limit {
		t.Errorf("the own records reached %d bytes, past their bound of %d", peak, limit)
	}
	if !held {
		t.Error("the record of an own change in flight was dropped")
	}
	if !idKept {
		t.Error("an identity's record was dropped while dropping names was enough")
	}
	if dropped == 0 {
		t.Error("no record counted as dropped before its TTL")
	}
	if bytes != recount {
		t.Errorf("the tables' size is counted as %d bytes, recounted %d", bytes, recount)
	}
	if st := w.Stats(); st.OwnDropped != dropped || st.OwnBytes <= 0 {
		t.Errorf("stats: %d bytes, %d dropped; want >0 and %d", st.OwnBytes, st.OwnDropped, dropped)
	}
}

// movedScanRef is movedScanRefs of one path.
func (t *ownTable) movedScanRef(rel, c string) *syscall.Timespec {
	return t.movedScanRefs(rel, []string{c})[0]
}

// chainsNaive is chains as it was first written: each chain followed on
// its own through every later move (quadratic in the moves).
func chainsNaive(moves []ownMove, rel string, each func(i int, p string)) {
	for i := range moves {
		if !moves[i].moves(rel) {
			continue
		}
		p := rel
		for j := range moves[i:] {
			p = moves[i+j].apply(p)
		}
		each(i, p)
	}
}

// TestChainsMatchNaive: on random sequences of own moves and exchanges
// among nested directories, chains (chains merged where they meet) and
// movedScanRef (scan references taken in one pass) give what following
// each chain alone gives.
func TestChainsMatchNaive(t *testing.T) {
	dirs := []string{"a", "b", "c", "a/x", "b/x", "c/y", "ab"}
	rels := []string{"a", "b", "a/f", "b/f", "a/x/f", "b/x/f", "c/y/f", "ab/f", "x/f", "x/s/f"}
	// Past chainsScan chains chains indexes them: a directory x moved to
	// one of many names, and those moved on, leaves more places than that.
	many := []string{"x", "x/s"}
	for i := range 60 {
		many = append(many, "y"+strconv.Itoa(i), "y"+strconv.Itoa(i)+"/s")
	}
	rng := rand.New(rand.NewPCG(48, 1))
	for round := range 400 {
		var moves []ownMove
		pool, n := dirs, rng.IntN(40)+1
		if round%2 == 1 {
			pool, n = many, rng.IntN(80)+40
		}
		for range n {
			from, to := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
			if round%2 == 1 && rng.IntN(2) == 0 {
				from = "x"
			}
			if underOrSame(to, from) || underOrSame(from, to) {
				continue
			}
			moves = append(moves, ownMove{from: from, to: to, exchange: rng.IntN(4) == 0, watched: rng.IntN(8) != 0,
				ref: syscall.Timespec{Sec: int64(len(moves))}})
		}
		tab := &ownTable{moves: moves}
		for _, rel := range rels {
			var got, want []chainEnd
			tab.chains(rel, func(i int, p string) { got = append(got, chainEnd{i, p}) })
			chainsNaive(moves, rel, func(i int, p string) { want = append(want, chainEnd{i, p}) })
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, %s through %+v:\nchains %v\nnaive  %v", round, rel, moves, got, want)
			}
			cands := tab.movedPaths(rel)
			together := tab.movedScanRefs(rel, cands)
			for x, c := range cands {
				if alone := tab.movedScanRef(rel, c); (alone == nil) != (together[x] == nil) || alone != nil && *alone != *together[x] {
					t.Fatalf("round %d, movedScanRefs(%s)[%s] = %v, alone %v", round, rel, c, together[x], alone)
				}
				var ref *syscall.Timespec
				unwatched := false
				chainsNaive(moves, rel, func(i int, p string) {
					if p != c {
						return
					}
					r, u := scanRefIn(moves[:i], rel)
					unwatched = unwatched || u
					if r != nil && (ref == nil || tsBefore(*ref, *r)) {
						ref = r
					}
				})
				if unwatched {
					ref = nil
				}
				if g := tab.movedScanRef(rel, c); (g == nil) != (ref == nil) || g != nil && *g != *ref {
					t.Fatalf("round %d, movedScanRef(%s, %s) = %v, want %v", round, rel, c, g, ref)
				}
			}
		}
	}
}

// TestOwnMovesCapped: a directory renamed back and forth by the daemon
// thousands of times leaves at most ownMaxMoves and a quarter recorded
// (the oldest dropped, counted), and an event under the latest name is
// still followed through the latest moves.
func TestOwnMovesCapped(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "d0"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := start(t, newRec(t).config(root))
	names := [2]string{"d0", "d1"}
	n := 3 * ownMaxMoves
	for i := range n {
		from, to := names[i%2], names[(i+1)%2]
		end := w.BeginMove(from, to)
		err := os.Rename(filepath.Join(root, from), filepath.Join(root, to))
		end(err == nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	w.own.mu.Lock()
	kept, dropped := len(w.own.moves), w.own.dropped
	paths := w.own.movedPaths("d1/f")
	w.own.mu.Unlock()
	if kept > ownMaxMoves+ownMaxMoves/4 {
		t.Errorf("%d own moves kept, past %d", kept, ownMaxMoves+ownMaxMoves/4)
	}
	if dropped < uint64(n-ownMaxMoves-ownMaxMoves/4) {
		t.Errorf("%d moves counted as dropped of %d", dropped, n-kept)
	}
	if !slices.Equal(paths, []string{"d1/f", "d0/f"}) {
		t.Errorf("movedPaths(d1/f) = %v, want [d1/f d0/f]", paths)
	}
}

// BenchmarkMovedPathsFlipFlop: the paths an event's path is followed to
// after 1,024 own moves of one directory back and forth.
func BenchmarkMovedPathsFlipFlop(b *testing.B) {
	var moves []ownMove
	for i := range ownMaxMoves {
		from, to := "d0", "d1"
		if i%2 == 1 {
			from, to = to, from
		}
		moves = append(moves, ownMove{from: from, to: to})
	}
	tab := &ownTable{moves: moves}
	b.Run("chains", func(b *testing.B) {
		for b.Loop() {
			tab.movedPaths("d0/f")
		}
	})
	b.Run("naive", func(b *testing.B) {
		for b.Loop() {
			chainsNaive(moves, "d0/f", func(int, string) {})
		}
	})
	// Each move takes a new x somewhere else: every chain ends apart.
	apart := make([]ownMove, ownMaxMoves)
	for i := range apart {
		apart[i] = ownMove{from: "x", to: "y" + strconv.Itoa(i)}
	}
	tabApart := &ownTable{moves: apart}
	b.Run("apart", func(b *testing.B) {
		for b.Loop() {
			tabApart.movedPaths("x/f")
		}
	})
	b.Run("apart-naive", func(b *testing.B) {
		for b.Loop() {
			chainsNaive(apart, "x/f", func(int, string) {})
		}
	})
}
