package journal

// Queries over a session's records: its checkpoints, and what changed
// since one of them. They are pure functions of the records, so a CLI can
// run them on a log read with ReadLog while the mount appends to it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// CheckpointInfo describes one checkpoint of a session: its ID, Label and
// Time, Changes (the change records up to the next checkpoint) and Paths
// (the distinct paths whose pre-image that interval saved) and Stopped:
// why the journal was stopped in that interval, or ""
// (docs/DESIGN.md#journal-budget).
type CheckpointInfo struct {
	ID      string
	Label   string
	Time    time.Time
	Changes int
	Paths   int
	Stopped string
}

// Checkpoints lists the checkpoints in recs, oldest first (after-notes and
// the end record are not changes).
func Checkpoints(recs []Record) []CheckpointInfo {
	var out []CheckpointInfo
	for _, r := range recs {
		out = addCheckpointInfo(out, r)
	}
	return out
}

// Rename is one rename (or exchange, Exchange set) since a checkpoint,
// with both names, in order of Seq.
type Rename struct {
	Seq      uint64
	From, To string
	Exchange bool
}

// Change is one path changed since a checkpoint: Pre is its state at the
// checkpoint (the earliest pre-image after it) and Ops the ops that named
// it, in order.
type Change struct {
	Path string
	Pre  PreImage
	Ops  []string
}

// Changes is what changed since a checkpoint: Paths sorted by path, and
// Renames in order.
type Changes struct {
	Paths   []Change
	Renames []Rename
}

// OpRename and OpExchange are the ops Since reports as renames.
const (
	OpRename   = "rename"
	OpExchange = "exchange"
)

// Since returns the paths changed in recs after the checkpoint id (its
// later checkpoints included), each with its pre-image at that checkpoint,
// and the renames. An unknown id is an error.
func Since(recs []Record, id string) (Changes, error) {
	start := -1
	for i, r := range recs {
		if r.Op == OpCheckpoint && r.ID == id {
			start = i
			break
		}
	}
	if start < 0 {
		return Changes{}, fmt.Errorf("journal: no checkpoint %q", id)
	}
	byPath := map[string]*Change{}
	var out Changes
	note := func(p, op string) {
		if p == "" {
			return
		}
		c := byPath[p]
		if c == nil {
			c = &Change{Path: p}
			byPath[p] = c
		}
		c.Ops = append(c.Ops, op)
	}
	for _, r := range recs[start+1:] {
		if r.Op == OpCheckpoint {
			continue
		}
		for _, pre := range r.Pre {
			if byPath[pre.Path] == nil {
				byPath[pre.Path] = &Change{Path: pre.Path, Pre: pre}
			}
		}
		note(r.Path, r.Op)
		if r.Path2 != r.Path {
			note(r.Path2, r.Op)
		}
		if r.Op == OpRename || r.Op == OpExchange {
			out.Renames = append(out.Renames, Rename{Seq: r.Seq, From: r.Path, To: r.Path2, Exchange: r.Op == OpExchange})
		}
	}
	for _, c := range byPath {
		out.Paths = append(out.Paths, *c)
	}
	sort.Slice(out.Paths, func(a, b int) bool { return out.Paths[a].Path < out.Paths[b].Path })
	return out, nil
}

// Records reads the complete records of session from its log on disk (a
// torn last line ignored); a session never used has none.
func (j *Journal) Records(sessionName string) ([]Record, error) {
	if !ValidSession(sessionName) {
		return nil, fmt.Errorf("journal: bad session name %q", sessionName)
	}
	recs, _, err := ReadLog(j.LogPath(sessionName))
	markFailed(recs)
	return recs, err
}

// markFailed sets Failed on every change record of recs that a failure
// note names.
func markFailed(recs []Record) {
	failed := map[uint64]bool{}
	for _, r := range recs {
		if r.Op == OpFailed {
			failed[r.Ref] = true
		}
	}
	if len(failed) == 0 {
		return
	}
	for i := range recs {
		if failed[recs[i].Seq] && isChange(recs[i]) {
			recs[i].Failed = true
		}
	}
}

// Sessions lists the sessions that have a log, sorted by name.
func (j *Journal) Sessions() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(j.dir, "sessions"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if ok && e.Type().IsRegular() && ValidSession(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// LogOwner reports whether session has a log (exists) and the uid its
// first record names (Record.Owner; known false for a log begun before
// logs named their uid, or by a session whose uid was not known). The
// session registry asks it before a name is registered, so a new session
// never continues another uid's log (docs/DESIGN.md#session-names). It
// reads the log's first line only. Errors other than a missing log count
// as a log of unknown owner.
func (j *Journal) LogOwner(session string) (uid uint32, known, exists bool) {
	if !ValidSession(session) {
		return 0, false, false
	}
	f, err := os.Open(j.LogPath(session))
	if os.IsNotExist(err) {
		return 0, false, false
	}
	if err != nil {
		return 0, false, true
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if err != nil && len(line) == 0 {
		return 0, false, true
	}
	var first struct {
		Owner *uint32 `json:"owner"`
	}
	if json.Unmarshal(line, &first) != nil || first.Owner == nil {
		return 0, false, true
	}
	return *first.Owner, true, true
}
