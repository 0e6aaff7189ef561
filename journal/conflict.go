package journal

// The conflict rule of a rewind: what the session last knew of a path,
// against what the path is now (docs/DESIGN.md#journal-rewind).

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// SameState reports whether the current state cur of a path is the state
// rec its session recorded last: same Kind and Mode, and for anything but
// a directory the same Ino, Size and MtimeNs too (a directory's size and
// mtime move with its entries, which other rules track). Hash is not
// compared: a changed file changes its size or mtime.
func SameState(rec, cur After) bool {
	if rec.Kind != cur.Kind {
		return false
	}
	if rec.Kind == KindAbsent {
		return true
	}
	if rec.Mode != cur.Mode || rec.Ino != cur.Ino {
		return false
	}
	if rec.Kind == KindDir {
		return true
	}
	return rec.Size == cur.Size && rec.MtimeNs == cur.MtimeNs
}

// expect is what the session last knew of one path: the after-state it
// noted (After set), or else the kind its last change implies ("absent",
// "dir", "symlink", or "exists" for any kind), and when.
type expect struct {
	after *After
	kind  string
	time  time.Time
}

// otherChange is the latest change of a path in another session's log.
type otherChange struct {
	session string
	time    time.Time
}

// otherChanges maps each path named by a change record of another session
// to its latest such change.
func (j *Journal) otherChanges(self string) (map[string]otherChange, error) {
	names, err := j.Sessions()
	if err != nil {
		return nil, err
	}
	out := map[string]otherChange{}
	for _, n := range names {
		if n == self {
			continue
		}
		recs, err := j.Records(n)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if !isChange(r) || r.Failed {
				continue
			}
			for _, p := range []string{r.Path, r.Path2} {
				if p != "" && r.Time.After(out[p].time) {
					out[p] = otherChange{session: n, time: r.Time}
				}
			}
		}
	}
	return out, nil
}

// lastKnown replays a session's records forward: after-notes set a path's
// state; a change sets the kind it implies; a rename moves the entries of
// its source (and below) to its target, an exchange swaps them, an unlink
// or rmdir drops those below.
//
// A rename is recorded before the backing rename and its after-note
// written after it, and requests that take no lock of the renamed
// directory (a handle's write, its release) run meanwhile: a record or an
// after-note between the two naming the source or a path below it names
// the file by its name before the move, while the file is moving to the
// target. Such names are read as the target's (inFlight), until the
// rename's after-note, a change naming the source itself (the name is
// free again), or the end of a daemon's run (a stop or an end record).
//
// It also returns the last after-note of each inode (any name): a path
// whose current state is the one the session last noted for its inode
// through another name (a hard link) is explained by the session's own
// change.
func lastKnown(recs []Record) (*treeMap[expect], map[uint64]After) {
	exp := newTreeMap[expect]()
	byIno := map[uint64]After{}
	var flying inFlight
	for _, r := range recs {
		t := r.Time
		switch {
		case r.Op == OpEnd || r.Op == OpStop:
			flying = nil
		case r.Op == OpAfter && flying.land(r.Ref):
		case r.Op == OpAfter && len(flying) > 0:
			after := slices.Clone(r.After) // recs is the caller's
			for i := range after {
				after[i].Path = flying.name(after[i].Path)
			}
			r.After = after
		case isChange(r) && !r.Failed:
			flying.freed(r.Path, r.Path2)
			r.Path, r.Path2 = flying.name(r.Path), flying.name(r.Path2)
		}
		switch {
		case r.Op == OpAfter:
			for i := range r.After {
				a := r.After[i]
				exp.set(a.Path, expect{after: &a, kind: a.Kind, time: t})
				if a.Ino != 0 && a.Kind == KindFile {
					byIno[a.Ino] = a
				}
			}
		case !isChange(r), r.Failed: // a failed change left its names as they were
		case r.Op == OpRename && r.Path2 != "" && r.Path2 != r.Path:
			flying = append(flying, flight{seq: r.Seq, from: r.Path, to: r.Path2})
			if e, ok := exp.get(r.Path); ok {
				exp.set(r.Path2, e)
			}
			exp.moveBelow(r.Path, r.Path2)
			e, _ := exp.get(r.Path2)
			if e.kind == "" {
				e.kind = "exists"
			}
			e.time = t
			exp.set(r.Path2, e)
			exp.set(r.Path, expect{kind: KindAbsent, time: t})
		case r.Op == OpExchange && r.Path2 != "":
			flying = append(flying, flight{seq: r.Seq, from: r.Path, to: r.Path2, exchange: true})
			ea, _ := exp.get(r.Path)
			eb, _ := exp.get(r.Path2)
			exp.swapBelow(r.Path, r.Path2)
			for p, e := range map[string]expect{r.Path2: ea, r.Path: eb} {
				if e.kind == "" {
					e.kind = "exists"
				}
				e.time = t
				exp.set(p, e)
			}
		case r.Op == "unlink" || r.Op == "rmdir":
			exp.dropBelow(r.Path)
			exp.set(r.Path, expect{kind: KindAbsent, time: t})
		default:
			p := r.Path
			if r.Op == "link" && r.Path2 != "" {
				p = r.Path2
			}
			kind := "exists"
			switch r.Op {
			case "mkdir":
				kind = KindDir
			case "symlink":
				kind = KindSymlink
			}
			exp.set(p, expect{kind: kind, time: t})
		}
	}
	return exp, byIno
}

// flight is a rename (or exchange) recorded whose after-note has not come
// yet: the backing rename may not have happened.
type flight struct {
	seq      uint64
	from, to string
	exchange bool
}

// inFlight are the renames in flight, in record order (lastKnown).
type inFlight []flight

// name is p as it is once the renames in flight are done: a name the
// source of one (or a path below it) is read as the target's, and for an
// exchange the other way round too. "" stays "".
func (fl inFlight) name(p string) string {
	if p == "" {
		return p
	}
	for _, f := range fl {
		switch {
		case p == f.from || strings.HasPrefix(p, f.from+"/"):
			p = f.to + p[len(f.from):]
		case f.exchange && (p == f.to || strings.HasPrefix(p, f.to+"/")):
			p = f.from + p[len(f.to):]
		}
	}
	return p
}

// land ends the flight whose record is seq, at its after-note: true when
// ref was one (the note names the states after the move as they are).
func (fl *inFlight) land(ref uint64) bool {
	for i, f := range *fl {
		if f.seq == ref && ref != 0 {
			*fl = append((*fl)[:i], (*fl)[i+1:]...)
			return true
		}
	}
	return false
}

// freed ends the flights whose source a change names itself: the name
// is free again, so the rename is done (its after-note was lost).
func (fl *inFlight) freed(names ...string) {
	kept := (*fl)[:0]
	for _, f := range *fl {
		if !slices.Contains(names, f.from) || f.exchange {
			kept = append(kept, f)
		}
	}
	*fl = kept
}

// conflictChecker decides the conflicts of one plan, caching per path.
type conflictChecker struct {
	exp      *treeMap[expect]
	byIno    map[uint64]After
	others   map[string]otherChange
	oKeys    []string // others' keys, sorted
	ins      Inspector
	done     map[string][]Conflict
	reported map[string]bool
}

func newConflictChecker(recs []Record, others map[string]otherChange, ins Inspector) *conflictChecker {
	exp, byIno := lastKnown(recs)
	oKeys := make([]string, 0, len(others))
	for k := range others {
		oKeys = append(oKeys, k)
	}
	sort.Strings(oKeys)
	return &conflictChecker{exp: exp, byIno: byIno, others: others, oKeys: oKeys, ins: ins,
		done: map[string][]Conflict{}, reported: map[string]bool{}}
}

// check returns the conflicts of a step naming name: name itself, every
// path below it the session knows (a rename back moves them too), and
// every path below it another session changed after the session's last
// record of name.
func (c *conflictChecker) check(name string) ([]Conflict, error) {
	var out []Conflict
	one, err := c.checkOne(name)
	if err != nil {
		return nil, err
	}
	out = append(out, one...)
	prefix := name + "/"
	var mine []string // the paths below name the session knows
	c.exp.below(name, func(k string, _ expect) bool {
		mine = append(mine, k)
		return true
	})
	for _, k := range mine {
		one, err := c.checkOne(k)
		if err != nil {
			return nil, err
		}
		out = append(out, one...)
	}
	if e, known := c.exp.get(name); known {
		i := sort.SearchStrings(c.oKeys, prefix)
		for ; i < len(c.oKeys) && strings.HasPrefix(c.oKeys[i], prefix); i++ {
			k := c.oKeys[i]
			if c.exp.has(k) {
				continue // checked above, against the session's own record of it
			}
			if o := c.others[k]; o.time.After(e.time) {
				out = append(out, Conflict{Path: k, By: o.session,
					Reason: "changed by session " + o.session + " below " + name + " after this session's change of it"})
			}
		}
	}
	return out, nil
}

func (c *conflictChecker) checkOne(p string) ([]Conflict, error) {
	if cs, ok := c.done[p]; ok {
		return cs, nil
	}
	e, known := c.exp.get(p)
	var cs []Conflict
	if known {
		cur, err := c.ins.Lstat(p)
		if err != nil {
			return nil, err
		}
		reason := ""
		switch {
		case e.after != nil && !SameState(*e.after, cur) && !c.sameInode(*e.after, cur):
			reason = "changed since the session's last change of it"
		case e.after == nil && !kindMatches(e.kind, cur.Kind):
			reason = "is " + cur.Kind + ", the session's last change left it " + e.kind
		}
		o, byOther := c.others[p]
		byOther = byOther && o.time.After(e.time)
		switch {
		case byOther:
			if reason == "" {
				reason = "changed by session " + o.session + " after this session"
			}
			cs = []Conflict{{Path: p, By: o.session, Reason: reason}}
		case reason != "":
			cs = []Conflict{{Path: p, Reason: reason + " (outside the mount)"}}
		}
	}
	c.done[p] = cs
	return cs, nil
}

// sameInode reports whether cur is the state the session last noted for
// rec's inode under any name (a hard link changed through another name).
func (c *conflictChecker) sameInode(rec, cur After) bool {
	last, ok := c.byIno[rec.Ino]
	return ok && rec.Kind == KindFile && SameState(last, cur)
}

func kindMatches(want, got string) bool {
	if want == "exists" {
		return got != KindAbsent
	}
	return want == got
}
