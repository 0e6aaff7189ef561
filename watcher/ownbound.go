package watcher

// The own-change tables' bound (docs/DESIGN.md#own-records-bound): records
// wait ownTTL for their events, a name's record that decides nothing is
// dropped at the next prune, and past ownMaxBytes records go before their
// TTL: the older first, then, past twice it, names before identities.

import "time"

const (
	// ownTTL is how long a recorded own change is kept to match its
	// events when the tables are under ownMaxBytes.
	ownTTL = 30 * time.Second
	// ownPressTTL is how long records are kept once the tables hold more
	// than ownMaxBytes: events reach the watcher within milliseconds of
	// their change unless the machine is starved.
	ownPressTTL = 5 * time.Second
	// ownMaxBytes bounds the tables' estimated size (bytes). Past it
	// records older than ownPressTTL are dropped; past twice it every
	// record no own change is using, whatever its age.
	ownMaxBytes = 16 << 20
	// pathCost, idCost and moveCost estimate what a record holds besides
	// its names (bytes): the struct, its map slot or slice element.
	pathCost = 160
	idCost   = 240
	moveCost = 120
	// ownMaxMoves bounds the own directory moves kept: each event's
	// classify follows its path through every one of them, under the
	// lock every own change takes. Past it by a quarter the oldest go.
	ownMaxMoves = 1024
)

// capMoves drops the oldest own moves past ownMaxMoves (counted in
// dropped), once they are more than a quarter over it. Called with mu
// held.
func (t *ownTable) capMoves() {
	if len(t.moves) <= ownMaxMoves+ownMaxMoves/4 {
		return
	}
	n := len(t.moves) - ownMaxMoves
	for i := range t.moves[:n] {
		t.bytes -= t.moves[i].cost()
	}
	t.dropped += uint64(n)
	keep := copy(t.moves, t.moves[n:])
	clear(t.moves[keep:])
	t.moves = t.moves[:keep]
}

// cost is what m holds (bytes, estimated).
func (m *ownMove) cost() int64 { return int64(len(m.from) + len(m.to) + moveCost) }

// putPath keeps p under rel. Called with mu held; rel must not be kept.
func (t *ownTable) putPath(rel string, p *pathState) {
	t.paths[rel] = p
	t.bytes += int64(len(rel) + pathCost)
}

// dropPath drops the record kept under rel, if any. Called with mu held.
func (t *ownTable) dropPath(rel string) {
	if _, ok := t.paths[rel]; ok {
		delete(t.paths, rel)
		t.bytes -= int64(len(rel) + pathCost)
	}
}

// pruneOwn drops the own records past ownTTL and the settled records of
// existing names, and, while the tables are past ownMaxBytes, records
// before their TTL (see the top of this file). It runs at most once a
// second (it walks the whole tables), or at once when the tables grew by
// a quarter of ownMaxBytes past the last prune's size.
func (w *Watcher) pruneOwn() {
	now := time.Now()
	t := &w.own
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.lastPrune) < time.Second && t.bytes < max(t.nextPrune, ownMaxBytes) {
		return
	}
	t.lastPrune = now
	t.prune(now, ownTTL, allRecords)
	if t.bytes > ownMaxBytes {
		t.prune(now, ownPressTTL, allRecords)
	}
	if t.bytes > 2*ownMaxBytes {
		// Names first: they are what is large (up to 4 KiB each), and
		// those left are removed names, whose late event only makes a
		// name that is gone look removed from outside.
		t.prune(now, 0, nameRecords)
	}
	if t.bytes > 2*ownMaxBytes {
		t.prune(now, 0, allRecords)
	}
	t.nextPrune = t.bytes + ownMaxBytes/4
}

// Which records a prune may drop.
const (
	nameRecords = iota // the per-name table only
	allRecords         // names, identities and directory moves
)

// prune drops every record of kinds (nameRecords, allRecords) no own
// change is using that is older than ttl, and every settled record of a
// name that exists: such a record decides nothing (classifyOnce judges an
// existing name by its identity's record, and pathGens' gens are never
// reused). A record dropped before ownTTL is counted in dropped. Called
// with mu held.
func (t *ownTable) prune(now time.Time, ttl time.Duration, kinds int) {
	early := func(at time.Time) bool {
		old := now.Sub(at) > ttl
		if old && ttl < ownTTL && now.Sub(at) <= ownTTL {
			t.dropped++
		}
		return old
	}
	for rel, p := range t.paths {
		if !p.busy() && (p.exists || early(p.at)) {
			t.dropPath(rel)
		}
	}
	if kinds == nameRecords {
		return
	}
	for id, s := range t.ids {
		if !s.busy() && early(s.at) {
			delete(t.ids, id)
			t.bytes -= idCost
		}
	}
	keep := t.moves[:0]
	for _, m := range t.moves {
		if early(m.at) {
			t.bytes -= m.cost()
			continue
		}
		keep = append(keep, m)
	}
	clear(t.moves[len(keep):])
	t.moves = keep
}
