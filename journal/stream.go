package journal

// Streaming queries: the checkpoints, changes and diff of a session read
// its log line by line, holding the path table and one entry per changed
// path, never every record or every path string (docs/DESIGN.md#journal-paths).

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// CheckpointList lists session's checkpoints, oldest first, as
// Checkpoints does, streaming its log (memory: one entry per checkpoint).
// A checkpoint's Stopped is why the journal was stopped during its
// interval ("" when it was not: docs/DESIGN.md#journal-budget). Errors
// are the log's; a session never used has none.
func (j *Journal) CheckpointList(sessionName string) ([]CheckpointInfo, error) {
	if !ValidSession(sessionName) {
		return nil, fmt.Errorf("journal: bad session name %q", sessionName)
	}
	var out []CheckpointInfo
	_, err := scanRaw(j.LogPath(sessionName), func(r *Record, _ *pathTable) error {
		out = addCheckpointInfo(out, *r)
		return nil
	})
	return out, err
}

// addCheckpointInfo folds one record into the checkpoint list.
func addCheckpointInfo(out []CheckpointInfo, r Record) []CheckpointInfo {
	if r.Op == OpCheckpoint {
		return append(out, CheckpointInfo{ID: r.ID, Label: r.Label, Time: r.Time})
	}
	if len(out) == 0 {
		return out
	}
	c := &out[len(out)-1]
	if r.Op == OpStop {
		c.Stopped = r.Label
	}
	if isChange(r) {
		c.Changes++
		c.Paths += len(r.Pre)
	}
	return out
}

// sinceIndex is what changed since a checkpoint, keyed by the ids of the
// reader's path table, in a few bytes a path: each changed path's slot
// (index+1 into changes, by id), its earliest pre-image after the
// checkpoint (an index into the distinct pre-images, Path empty) and its
// ops (codes into opNames); and the renames in order.
type sinceIndex struct {
	tab     *pathTable
	slot    []int32
	changes []sinceChange
	pres    []PreImage
	opNames []string
	renames []Rename
}

// sinceChange is one changed path: pre is an index into pres (-1: none
// seen after the checkpoint), ops codes into opNames, touches the
// records that named it (by a name or a pre-image) and did not fail.
type sinceChange struct {
	id      uint64
	pre     int32
	ops     []byte
	touches int32
}

// recentRecords is how many of the latest change records sinceScan
// remembers the entries of, so that a failure note can take back what its
// record added. A failure note follows its record within the same
// request, so only records of requests running at the same time come in
// between.
const recentRecords = 4096

// recentRecord is what one change record added to a sinceIndex: its op's
// code, and the entries it touched (op: the code was appended to that
// entry's ops).
type recentRecord struct {
	code    byte
	touched []recentTouch
}

type recentTouch struct {
	entry int32
	op    bool
}

// errNoCheckpoint marks a since of an unknown checkpoint.
var errNoCheckpoint = errors.New("journal: no checkpoint")

// sinceScan streams session's log into a sinceIndex from checkpoint id
// ("" is cp000000). An unknown checkpoint is an error wrapping
// errNoCheckpoint.
func (j *Journal) sinceScan(sessionName, id string) (*sinceIndex, error) {
	if !ValidSession(sessionName) {
		return nil, fmt.Errorf("journal: bad session name %q", sessionName)
	}
	if id == "" {
		id = "cp000000"
	}
	idx := &sinceIndex{}
	preIdx := map[PreImage]int32{}
	opIdx := map[string]byte{}
	entry := func(k uint64) int32 {
		for uint64(len(idx.slot)) <= k {
			idx.slot = append(idx.slot, 0)
		}
		if idx.slot[k] == 0 {
			idx.changes = append(idx.changes, sinceChange{id: k, pre: -1})
			idx.slot[k] = int32(len(idx.changes))
		}
		return idx.slot[k] - 1
	}
	// recent holds what the latest records added, by seq (order: oldest
	// first), until recentRecords newer ones came.
	recent := map[uint64]recentRecord{}
	var order []uint64
	started := false
	tab, err := scanRaw(j.LogPath(sessionName), func(r *Record, tab *pathTable) error {
		if !started {
			started = r.Op == OpCheckpoint && r.ID == id
			return nil
		}
		if r.Op == OpFailed {
			// A failed rename moved nothing: it names no path's origin.
			for i := len(idx.renames) - 1; i >= 0; i-- {
				if idx.renames[i].Seq == r.Ref {
					idx.renames = append(idx.renames[:i], idx.renames[i+1:]...)
					break
				}
			}
			// Nor did any failed change change a path: its op is taken
			// back, and a path no other change named is not listed. Its
			// pre-images stay the paths' states before (nothing moved).
			if rr, ok := recent[r.Ref]; ok {
				delete(recent, r.Ref)
				for _, t := range rr.touched {
					c := &idx.changes[t.entry]
					c.touches--
					if !t.op {
						continue
					}
					for i := len(c.ops) - 1; i >= 0; i-- {
						if c.ops[i] == rr.code {
							c.ops = append(c.ops[:i], c.ops[i+1:]...)
							break
						}
					}
				}
			}
			return nil
		}
		if !isChange(*r) {
			return nil
		}
		var rr recentRecord
		touch := func(e int32, op bool) {
			for i := range rr.touched {
				if rr.touched[i].entry == e {
					rr.touched[i].op = rr.touched[i].op || op
					return
				}
			}
			rr.touched = append(rr.touched, recentTouch{entry: e, op: op})
			idx.changes[e].touches++
		}
		for _, pre := range r.Pre {
			e := entry(tab.idOf(pre.PID, pre.Path))
			touch(e, false)
			c := &idx.changes[e]
			if c.pre >= 0 {
				continue
			}
			pre.Path, pre.PID = "", 0
			pi, ok := preIdx[pre]
			if !ok {
				pi = int32(len(idx.pres))
				idx.pres = append(idx.pres, pre)
				preIdx[pre] = pi
			}
			c.pre = pi
		}
		code, ok := opIdx[r.Op]
		if !ok {
			if len(idx.opNames) == 255 {
				return fmt.Errorf("journal: more than 255 kinds of op")
			}
			code = byte(len(idx.opNames))
			idx.opNames = append(idx.opNames, r.Op)
			opIdx[r.Op] = code
		}
		a, b := tab.idOf(r.PID, r.Path), tab.idOf(r.PID2, r.Path2)
		hasA, hasB := r.PID != 0 || r.Path != "", r.PID2 != 0 || r.Path2 != ""
		if hasA {
			e := entry(a)
			idx.changes[e].ops = append(idx.changes[e].ops, code)
			touch(e, true)
		}
		if hasB && (!hasA || b != a) {
			e := entry(b)
			idx.changes[e].ops = append(idx.changes[e].ops, code)
			touch(e, true)
		}
		if r.Seq != 0 {
			rr.code = code
			recent[r.Seq] = rr
			order = append(order, r.Seq)
			if len(order) > recentRecords {
				delete(recent, order[0])
				order = order[1:]
			}
		}
		if r.Op == OpRename || r.Op == OpExchange {
			from, err := tab.path(a)
			if err != nil {
				return err
			}
			to, err := tab.path(b)
			if err != nil {
				return err
			}
			idx.renames = append(idx.renames, Rename{Seq: r.Seq, From: from, To: to, Exchange: r.Op == OpExchange})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !started {
		return nil, fmt.Errorf("%w %q", errNoCheckpoint, id)
	}
	idx.tab = tab
	return idx, nil
}

// each calls fn with every changed path in path order, its Change's Path
// filled in (a fresh string per call, dropped after it).
func (idx *sinceIndex) each(fn func(Change) error) error {
	order := make([]int32, len(idx.changes))
	for i := range order {
		order[i] = int32(i)
	}
	sort.Slice(order, func(a, b int) bool {
		return idx.tab.less(idx.changes[order[a]].id, idx.changes[order[b]].id)
	})
	for _, i := range order {
		sc := &idx.changes[i]
		if sc.touches == 0 {
			continue // named only by changes that failed
		}
		p, err := idx.tab.path(sc.id)
		if err != nil {
			return err
		}
		c := Change{Path: p}
		if sc.pre >= 0 {
			c.Pre = idx.pres[sc.pre]
		}
		c.Pre.Path = p
		if len(sc.ops) > 0 {
			c.Ops = make([]string, len(sc.ops))
			for k, code := range sc.ops {
				c.Ops[k] = idx.opNames[code]
			}
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// EachChange calls fn with what session changed since checkpoint since
// ("": the session start), one path at a time in path order, each as
// ListChanges describes it; it streams the log and holds one small entry
// per changed path, never the list. An unknown checkpoint, the log's,
// ins's and fn's errors end it.
func (j *Journal) EachChange(sessionName, since string, ins Inspector, fn func(PathChange) error) error {
	idx, err := j.sinceScan(sessionName, since)
	if err != nil {
		return err
	}
	from := renamedFrom(idx.renames)
	return idx.each(func(c Change) error {
		pc := PathChange{Path: c.Path, Ops: c.Ops, RenamedFrom: from[c.Path],
			Before: After{Path: c.Path, Kind: c.Pre.Kind, Mode: c.Pre.Mode, Size: c.Pre.Size, Hash: c.Pre.Blob}}
		if pc.Ops == nil {
			pc.Ops = []string{}
		}
		a, err := ins.Lstat(c.Path)
		if err != nil {
			return fmt.Errorf("journal: state of %s: %w", c.Path, err)
		}
		if a.Kind == KindFile && a.Mode&0o170000 == 0o100000 && a.Hash == "" {
			if a.Hash, err = ins.HashOf(c.Path); err != nil {
				return fmt.Errorf("journal: hash of %s: %w", c.Path, err)
			}
		}
		pc.After = a
		return fn(pc)
	})
}

// DiffTo writes the diff Diff renders to w, one path at a time, streaming
// the log as EachChange does, withholding bytes as ContentGate says when
// ins is one. Errors are Diff's and w's.
func (j *Journal) DiffTo(w io.Writer, sessionName, since string, paths []string, ins Inspector, cur func(path string) ([]byte, error)) error {
	idx, err := j.sinceScan(sessionName, since)
	if err != nil {
		return err
	}
	return idx.each(func(c Change) error {
		if !within(c.Path, paths) {
			return nil
		}
		a, err := j.preSide(c.Pre)
		if err != nil {
			return fmt.Errorf("journal: pre-image of %s: %w", c.Path, err)
		}
		b, err := curSide(c.Path, ins, cur)
		if err != nil {
			return fmt.Errorf("journal: current %s: %w", c.Path, err)
		}
		if g, ok := ins.(ContentGate); ok {
			a, b = gated(g, c.Path, &c.Pre, a), gated(g, c.Path, nil, b)
		}
		var out strings.Builder
		writeFileDiff(&out, c.Path, a, b)
		_, err = io.WriteString(w, out.String())
		return err
	})
}
