package watcher

import (
	"strings"
	"syscall"
	"time"
)

// ownMove is one own rename of a directory, or exchange of two names one of
// which is a directory (BeginMove): from and to are workspace-relative; an
// exchange moves what was below from to below to and what was below to to
// below from, at once. ref is a time no change made after the rename began
// can have as its ctime (the scan rule of classify), at is when it was
// recorded. watched: the moved directories lay in watched subtrees, so
// every change below them before the move raised an event of its own.
type ownMove struct {
	from, to string
	exchange bool
	ref      syscall.Timespec
	watched  bool
	at       time.Time
}

// apply returns where the move took p.
func (m *ownMove) apply(p string) string {
	switch {
	case underOrSame(p, m.from):
		return m.to + p[len(m.from):]
	case m.exchange && underOrSame(p, m.to):
		return m.from + p[len(m.to):]
	}
	return p
}

// moves reports whether the move took what was at p elsewhere.
func (m *ownMove) moves(p string) bool {
	return underOrSame(p, m.from) || m.exchange && underOrSame(p, m.to)
}

// BeginMove brackets an own rename of from to to, as Begin(from, to), and
// returns the function that ends it; call it exactly once, after the
// rename, with moved set when the rename succeeded (RENAME_EXCHANGE
// included: the watcher tells an exchange by the identities it finds).
// When a directory moved, the watcher records the move before the bracket
// ends: the own records of paths below the moved names are kept under their
// new paths, events that name the old paths are matched there, and the scan
// of a moved directory does not report its entries as external changes
// (classify). Safe for concurrent use.
func (w *Watcher) BeginMove(from, to string) (end func(moved bool)) {
	b := w.begin([]string{from, to})
	return func(moved bool) {
		if moved {
			w.noteMove(b, from, to)
		}
		w.end(b)
	}
}

// noteMove records an own move of from to to that has happened (nothing
// when no directory moved: no path lies below a file). It is an exchange
// when each name now holds the file the other held. Called while both
// names are bracketed, so no event below them is classified meanwhile.
func (w *Watcher) noteMove(b *bracket, from, to string) {
	var fst, tst syscall.Stat_t
	fok := w.lstat(from, &fst) == nil
	tok := w.lstat(to, &tst) == nil
	exchange := fok && tok && b.preOf[0] >= 0 && b.preOf[1] >= 0 &&
		b.preID[b.preOf[0]] != b.preID[b.preOf[1]] &&
		idOf(&tst) == b.preID[b.preOf[0]] && idOf(&fst) == b.preID[b.preOf[1]]
	isDir := func(st *syscall.Stat_t) bool { return st.Mode&syscall.S_IFMT == syscall.S_IFDIR }
	var dirs []*syscall.Stat_t
	if tok && isDir(&tst) {
		dirs = append(dirs, &tst)
	}
	if exchange && isDir(&fst) {
		dirs = append(dirs, &fst)
	}
	if len(dirs) == 0 {
		return
	}
	// ref: the moved directories' ctime, which the rename itself stamped
	// in the filesystem's own clock and resolution (the local coarse or
	// multigrain clock, a server's for NFS, 2 s for FAT): a change made
	// after the rename gets a ctime not before it. A filesystem that does
	// not stamp a renamed directory leaves an older ctime: more entries
	// are reported, none is missed.
	ref := dirs[0].Ctim
	for _, st := range dirs[1:] {
		if tsBefore(st.Ctim, ref) {
			ref = st.Ctim
		}
	}
	m := ownMove{from: from, to: to, exchange: exchange, ref: ref, watched: true, at: time.Now()}
	w.mu.Lock()
	for _, top := range []string{from, to} {
		if top == to && !exchange {
			break
		}
		for p := top; p != ""; p = parentOf(p) {
			if w.unwatched[p] || w.cfg.Skip(p) {
				m.watched = false
			}
		}
	}
	if w.unwatched[""] {
		m.watched = false
	}
	w.mu.Unlock()
	t := &w.own
	t.mu.Lock()
	defer t.mu.Unlock()
	moved := map[string]*pathState{}
	for rel, p := range t.paths {
		switch {
		case m.moves(rel) && rel != from && rel != to:
			moved[m.apply(rel)] = p
			t.dropPath(rel)
		case below(rel, to) && !p.busy():
			t.dropPath(rel) // of what was there before: the move replaced it
		}
	}
	for rel, p := range moved {
		p.rel = rel
		t.dropPath(rel)
		t.putPath(rel, p)
	}
	t.moves = append(t.moves, m)
	t.bytes += m.cost()
	t.nmoves++
	t.capMoves()
}

// movedPaths returns rel and every path the own moves recorded since may
// have taken it to: starting at each move that moved rel, that move and
// every later one applied in order (a later directory of the same name is
// another directory, so each start is tried). Called with mu held.
func (t *ownTable) movedPaths(rel string) []string {
	out := []string{rel}
	var seen map[string]bool // made at the first chain: most paths were never moved
	t.chains(rel, func(_ int, p string) {
		if seen == nil {
			seen = map[string]bool{rel: true}
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	})
	return out
}

// scanRef returns the reference time of the latest own move that put a
// watched directory above rel, or nil. Called with mu held.
func (t *ownTable) scanRef(rel string) *syscall.Timespec {
	r, _ := scanRefIn(t.moves, rel)
	return r
}

// dirScanRef returns scanRef for the entries of directory dir: the
// reference time of the latest own move that put a watched directory at
// or above dir, or nil (none, or it lay in an unwatched subtree). It locks
// the table; the scan (addTree) calls it once per directory it reads.
func (t *ownTable) dirScanRef(dir string) *syscall.Timespec {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.moves) - 1; i >= 0; i-- {
		m := &t.moves[i]
		if underOrSame(dir, m.to) || m.exchange && underOrSame(dir, m.from) {
			if !m.watched {
				return nil
			}
			r := m.ref
			return &r
		}
	}
	return nil
}

// movedScanRefs returns, for each c of cands (distinct paths), the
// reference time for an entry the scan found at rel that own moves
// recorded later took to c (rel is gone): for each move that took rel to
// c, with the moves after it, the reference time of the latest own move
// before it that put a watched directory above rel (the directory the
// scan found the entry in); the latest of those, or nil when there is none
// or one of them lay in an unwatched subtree. One walk of the moves
// (chains) serves every c. Called with mu held.
func (t *ownTable) movedScanRefs(rel string, cands []string) []*syscall.Timespec {
	at := make(map[string]int, len(cands))
	for x, c := range cands {
		at[c] = x
	}
	got := make([]scanRefAt, len(cands))
	var before []scanRefAt // before[i]: scanRefIn(t.moves[:i], rel), made at the first need
	t.chains(rel, func(i int, p string) {
		x, ok := at[p]
		if !ok {
			return
		}
		if before == nil {
			before = scanRefsBefore(t.moves, rel)
		}
		r := before[i].ref
		got[x].unwatched = got[x].unwatched || before[i].unwatched
		if r != nil && (got[x].ref == nil || tsBefore(*got[x].ref, *r)) {
			got[x].ref = r
		}
	})
	out := make([]*syscall.Timespec, len(cands))
	for x := range got {
		if !got[x].unwatched {
			out[x] = got[x].ref
		}
	}
	return out
}

// scanRefAt is one answer of scanRefIn.
type scanRefAt struct {
	ref       *syscall.Timespec
	unwatched bool
}

// scanRefsBefore returns, for each i in [0, len(moves)], scanRefIn(moves[:i],
// rel), in one pass.
func scanRefsBefore(moves []ownMove, rel string) []scanRefAt {
	out := make([]scanRefAt, len(moves)+1)
	for i := range moves {
		out[i+1] = out[i]
		if m := &moves[i]; putsAbove(m, rel) {
			if !m.watched {
				out[i+1] = scanRefAt{unwatched: true}
			} else {
				r := m.ref
				out[i+1] = scanRefAt{ref: &r}
			}
		}
	}
	return out
}

// putsAbove reports whether m put a directory above rel.
func putsAbove(m *ownMove, rel string) bool {
	return below(rel, m.to) || m.exchange && below(rel, m.from)
}

// scanRefIn returns the reference time of the latest move in moves that
// put a directory above rel, or nil; unwatched: that move lay in an
// unwatched subtree (nil is returned then too).
func scanRefIn(moves []ownMove, rel string) (ref *syscall.Timespec, unwatched bool) {
	for i := len(moves) - 1; i >= 0; i-- {
		m := &moves[i]
		if putsAbove(m, rel) {
			if !m.watched {
				return nil, true
			}
			r := m.ref
			return &r, false
		}
	}
	return nil, false
}

// parentOf returns the directory above the workspace-relative path p ("" at
// the top), a prefix of p: a walk up a path of depth D builds no string and
// scans D components, where path.Dir cleans the whole path at each step
// (D squared bytes; a 1,500-level tree made each request wait on it).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// underOrSame reports whether p is dir or lies below it.
func underOrSame(p, dir string) bool {
	return strings.HasPrefix(p, dir) && (len(p) == len(dir) || p[len(dir)] == '/')
}

// below reports whether p lies below dir (not dir itself).
func below(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// tsBefore reports whether a is strictly earlier than b.
func tsBefore(a, b syscall.Timespec) bool {
	return a.Sec < b.Sec || (a.Sec == b.Sec && a.Nsec < b.Nsec)
}
