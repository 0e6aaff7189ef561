package watcher

// Following a path through the own directory moves kept (movedPaths,
// movedScanRefs, docs/DESIGN.md#own-records-bound "Directory moves").

import (
	"slices"
	"strings"
)

// chains calls each, in order of i, for every recorded own move i that
// moved rel, with p where that move and every later one applied in order
// took it. Chains that reach one path go on as one (a move takes a path to
// one place), so the walk costs one prefix check per move and distinct
// path, not per move and chain: a directory renamed back and forth a
// thousand times leaves two paths to follow, where following each chain
// alone took a quarter of a million steps, under the lock every own change
// takes. A path is kept as the directory a move took it to and the rest
// (chainPos), so a move builds no string. Called with mu held.
func (t *ownTable) chains(rel string, each func(i int, p string)) {
	var c chainSet
	for j := range t.moves {
		m := &t.moves[j]
		c.step(m)
		if np, ok := (chainPos{head: rel}).moved(m); ok {
			c.start(j, np)
		}
	}
	c.report(each)
}

// chainsScan is how many chains chains follows before it indexes them.
const chainsScan = 32

// chainSet is chains' state. Few places are live (a back-and-forth leaves
// two) and a scan finds them; past chainsScan, byTop indexes the live
// chains by the first element of their path, since a move can only take
// those whose top is its directory's (a directory moved to a new name each
// time leaves a chain at each).
type chainSet struct {
	ps     []chainPos       // the places the chains are at now
	starts [][]int          // starts[k]: the moves the chains at ps[k] began with (nil: merged away)
	byTop  map[string][]int // nil until indexing
	// scratch of step
	cands, moved []int
	to           []chainPos
}

// step applies m to every chain. Every chain moves first, then they join:
// an exchange swaps two chains, which must not meet halfway.
func (c *chainSet) step(m *ownMove) {
	c.cands = c.near(m.from, c.cands[:0])
	if c.byTop != nil && m.exchange && top(m.to) != top(m.from) {
		c.cands = c.near(m.to, c.cands)
	}
	c.moved, c.to = c.moved[:0], c.to[:0]
	for _, k := range c.cands {
		if np, ok := c.ps[k].moved(m); ok {
			c.moved, c.to = append(c.moved, k), append(c.to, np)
		}
	}
	for x, k := range c.moved {
		c.unindex(k)
		c.ps[k] = c.to[x]
	}
	for _, k := range c.moved {
		if o := c.find(c.ps[k], k); o >= 0 {
			c.starts[o] = append(c.starts[o], c.starts[k]...)
			c.starts[k] = nil
			continue
		}
		c.index(k)
	}
}

// start adds the chain that move j began at p, joining one already there.
func (c *chainSet) start(j int, p chainPos) {
	if o := c.find(p, -1); o >= 0 {
		c.starts[o] = append(c.starts[o], j)
		return
	}
	c.ps, c.starts = append(c.ps, p), append(c.starts, []int{j})
	c.index(len(c.ps) - 1)
	if c.byTop == nil && len(c.ps) > chainsScan {
		c.byTop = map[string][]int{}
		for k := range c.ps {
			c.index(k)
		}
	}
}

// report calls each for every chain, in order of the move it began with.
func (c *chainSet) report(each func(i int, p string)) {
	var out []chainEnd
	for k, st := range c.starts {
		if st == nil {
			continue
		}
		p := c.ps[k].head + c.ps[k].tail
		for _, i := range st {
			out = append(out, chainEnd{i: i, p: p})
		}
	}
	slices.SortFunc(out, func(a, b chainEnd) int { return a.i - b.i })
	for _, e := range out {
		each(e.i, e.p)
	}
}

// index adds live chain k to byTop (nothing before indexing).
func (c *chainSet) index(k int) {
	if c.byTop != nil && c.starts[k] != nil {
		t := top(c.ps[k].head)
		c.byTop[t] = append(c.byTop[t], k)
	}
}

// unindex removes chain k from byTop (nothing before indexing).
func (c *chainSet) unindex(k int) {
	if c.byTop == nil {
		return
	}
	t := top(c.ps[k].head)
	b := c.byTop[t]
	if x := slices.Index(b, k); x >= 0 {
		b[x] = b[len(b)-1]
		c.byTop[t] = b[:len(b)-1]
	}
}

// near appends to into the live chains a move of dir may take: all of
// them before indexing, else those with dir's top.
func (c *chainSet) near(dir string, into []int) []int {
	if c.byTop != nil {
		return append(into, c.byTop[top(dir)]...)
	}
	for k := range c.ps {
		if c.starts[k] != nil {
			into = append(into, k)
		}
	}
	return into
}

// find returns a live chain at q other than not, or -1.
func (c *chainSet) find(q chainPos, not int) int {
	if c.byTop != nil {
		for _, o := range c.byTop[top(q.head)] {
			if o != not && c.ps[o] == q {
				return o
			}
		}
		return -1
	}
	for o := range c.ps {
		if o != not && c.starts[o] != nil && c.ps[o] == q {
			return o
		}
	}
	return -1
}

// chainEnd is where the chain that began with move i ended (chains).
type chainEnd struct {
	i int
	p string
}

// top returns the first element of the slash-separated path p.
func top(p string) string {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

// chainPos is a path kept in two parts, head+tail, where tail is "" or
// begins with "/": a move of a directory that is head, or lies in head or
// tail, sets head to where it went and keeps the rest as a substring.
// Two places with different splits of one path are not merged (chains
// then follows both; the paths it reports are the same).
type chainPos struct{ head, tail string }

// under reports whether the path is dir or lies below it.
func (p chainPos) under(dir string) bool {
	h := len(p.head)
	if len(dir) <= h {
		if !strings.HasPrefix(p.head, dir) {
			return false
		}
		if len(dir) < h {
			return p.head[len(dir)] == '/'
		}
		return p.tail == "" || p.tail[0] == '/'
	}
	rest := dir[h:]
	if !strings.HasPrefix(dir, p.head) || !strings.HasPrefix(p.tail, rest) {
		return false
	}
	return len(p.tail) == len(rest) || p.tail[len(rest)] == '/'
}

// moved returns where m took the path, and whether it moved it. It is
// ownMove.moves and apply on the two parts; those stay as they are, the
// reference chains is checked against (TestChainsMatchNaive).
func (p chainPos) moved(m *ownMove) (chainPos, bool) {
	switch {
	case p.under(m.from):
		return p.rebase(m.from, m.to), true
	case m.exchange && p.under(m.to):
		return p.rebase(m.to, m.from), true
	}
	return p, false
}

// rebase replaces the prefix dir of the path (p.under(dir)) with to.
func (p chainPos) rebase(dir, to string) chainPos {
	h := len(p.head)
	if len(dir) > h {
		return chainPos{head: to, tail: p.tail[len(dir)-h:]}
	}
	rest := p.head[len(dir):]
	switch {
	case rest == "":
		return chainPos{head: to, tail: p.tail}
	case p.tail == "":
		return chainPos{head: to, tail: rest}
	}
	return chainPos{head: to, tail: rest + p.tail}
}
