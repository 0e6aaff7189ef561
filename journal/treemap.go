package journal

// treeMap: a map from workspace paths to values that also answers "what
// is below this path" in time proportional to the answer. The replays of
// a rewind's planning (the reverse replay's simulation, the conflict
// rule's forward replay, the pruning of repeated steps) move and drop
// whole subtrees at each rename, rmdir and removal; a Go map made each
// of those a scan of every path the replay knew, so a session that made
// and removed 8,000 files planned in seconds (docs/DESIGN.md#journal-rewind).

import "github.com/google/btree"

// treeEntry is one path and its value, ordered by the path's bytes.
type treeEntry[V any] struct {
	path string
	val  V
}

// treeMap maps slash-separated relative paths ("" is the workspace root)
// to values. The paths below p are the contiguous run of keys from
// p+"/" up to, not including, p+"0" ('0' is the byte after '/'), so a
// subtree is one range of the ordered tree. Not safe for concurrent use.
type treeMap[V any] struct {
	t *btree.BTreeG[treeEntry[V]]
}

func newTreeMap[V any]() *treeMap[V] {
	return &treeMap[V]{t: btree.NewG(32, func(a, b treeEntry[V]) bool { return a.path < b.path })}
}

// get is p's value, and whether p has one.
func (m *treeMap[V]) get(p string) (V, bool) {
	e, ok := m.t.Get(treeEntry[V]{path: p})
	return e.val, ok
}

// has reports whether p has a value.
func (m *treeMap[V]) has(p string) bool { return m.t.Has(treeEntry[V]{path: p}) }

// set gives p the value v.
func (m *treeMap[V]) set(p string, v V) { m.t.ReplaceOrInsert(treeEntry[V]{path: p, val: v}) }

// del removes p's value (the paths below it keep theirs).
func (m *treeMap[V]) del(p string) { m.t.Delete(treeEntry[V]{path: p}) }

// len is the number of paths with a value.
func (m *treeMap[V]) len() int { return m.t.Len() }

// below calls fn for each path strictly below p, in path order, until fn
// returns false. fn must not change m.
func (m *treeMap[V]) below(p string, fn func(path string, v V) bool) {
	visit := func(e treeEntry[V]) bool { return fn(e.path, e.val) }
	if p == "" {
		m.t.Ascend(visit)
		return
	}
	m.t.AscendRange(treeEntry[V]{path: p + "/"}, treeEntry[V]{path: p + "0"}, visit)
}

// take removes and returns the entries strictly below p, in path order.
func (m *treeMap[V]) take(p string) []treeEntry[V] {
	var out []treeEntry[V]
	m.below(p, func(k string, v V) bool {
		out = append(out, treeEntry[V]{path: k, val: v})
		return true
	})
	for _, e := range out {
		m.t.Delete(e)
	}
	return out
}

// dropBelow removes the values of every path strictly below p.
func (m *treeMap[V]) dropBelow(p string) { m.take(p) }

// dropRelated removes the values of p, of every path below it and of
// every ancestor of p: what a step naming p may affect in the replays.
func (m *treeMap[V]) dropRelated(p string) {
	m.del(p)
	m.dropBelow(p)
	for a := parentOf(p); a != ""; a = parentOf(a) {
		m.del(a)
	}
}

// swapBelow exchanges the values strictly below a with those below b (the
// values at a and b themselves are the caller's to set). Neither may be
// below the other.
func (m *treeMap[V]) swapBelow(a, b string) {
	belowA, belowB := m.take(a), m.take(b)
	for _, e := range belowA {
		m.set(b+e.path[len(a):], e.val)
	}
	for _, e := range belowB {
		m.set(a+e.path[len(b):], e.val)
	}
}

// moveBelow moves the values strictly below from to the same relative
// paths below to, after dropping what was below to; the values at from
// and to themselves are the caller's to set.
func (m *treeMap[V]) moveBelow(from, to string) {
	moved := m.take(from)
	m.dropBelow(to)
	for _, e := range moved {
		m.set(to+e.path[len(from):], e.val)
	}
}
