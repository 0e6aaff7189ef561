package journal

// Garbage collection of the store: retention of ended sessions, the blob
// budget, and blobs no log refers to (docs/DESIGN.md#journal-rewind).

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// GC removes the logs of sessions ended (an OpEnd record, the last one
// counting, unless Options.Live says a session of the name is live now)
// longer than opt.Retention ago (0: kept forever); then, while the blobs
// the remaining logs refer to and those logs' own bytes exceed
// opt.Budget (0: no bound; docs/DESIGN.md#journal-budget), the logs of
// ended sessions, the earliest ended first (a live session's log is never
// removed); then the ended logs of each uid past its share, and it
// recounts the shares (docs/DESIGN.md#journal-share); then every blob no
// remaining log refers to. It reports the
// sessions and blobs removed, the bytes freed, the store's size after and
// the blobs the kept logs name that are lost (GCResult.Lost).
// The blob sweep holds the journal's GC lock for writing, so no Record
// runs during it (a record about to name a blob would otherwise lose it).
// Errors are the filesystem's; what was removed before one stays removed.
func (j *Journal) GC(opt GCOptions) (GCResult, error) {
	var res GCResult
	j.gcMu.Lock()
	defer j.gcMu.Unlock()
	names, err := j.Sessions()
	if err != nil {
		return res, err
	}
	var logs []*logInfo
	now := j.now()
	for _, n := range names {
		li := &logInfo{name: n, refs: map[string]int64{}}
		_, err := scanRaw(j.LogPath(n), func(r *Record, _ *pathTable) error {
			if r.Op == OpEnd {
				li.ended = r.Time // the last end counts
			}
			if r.Owner != nil {
				li.owner = r.Owner
			}
			for _, p := range r.Pre {
				if p.Blob != "" {
					li.refs[p.Blob] = p.Size
				}
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		if j.live != nil && j.live(n) {
			// A live session of the name (the same uid's:
			// docs/DESIGN.md#session-names) goes on with the log.
			li.ended = time.Time{}
		}
		if st, err := os.Stat(j.LogPath(n)); err == nil {
			li.size = st.Size()
		}
		if !li.ended.IsZero() && opt.Retention > 0 && now.Sub(li.ended) > opt.Retention {
			if err := j.removeLog(n); err != nil {
				return res, err
			}
			res.Sessions++
			continue
		}
		logs = append(logs, li)
	}
	// While over the budget, the ended sessions' logs go, earliest ended
	// first (the logs count too: docs/DESIGN.md#journal-budget).
	logs, gone, err := j.shedEnded(logs, func(ls []*logInfo) bool { return opt.Budget > 0 && holds(ls) > opt.Budget })
	res.Sessions += len(gone)
	if err != nil {
		return res, err
	}
	// Then each bounded uid's ended logs past its share
	// (docs/DESIGN.md#journal-share), which also recounts the shares.
	logs, removed, err := j.shareLogs(logs)
	res.Sessions += removed
	if err != nil {
		return res, err
	}
	live := map[string]bool{}
	for _, li := range logs {
		for a := range li.refs {
			live[a] = true
		}
	}
	var stored int64
	var dead []string
	found := map[string]int64{}
	err = j.blobs.Walk(func(addr string, size int64) error {
		if live[addr] {
			stored += size
			found[addr] = size
		} else {
			dead = append(dead, addr)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Lost = lostBlobs(logs, found)
	for _, a := range dead {
		n, err := j.blobs.Remove(a)
		if err != nil {
			return res, err
		}
		res.Blobs++
		res.FreedBytes += n
	}
	j.blobs.used.Store(stored)
	res.StoreBytes = stored
	return res, nil
}

// shedEnded removes, earliest ended first, the logs of ended sessions
// among logs (a live session's never) while over says the logs kept hold
// too much. It returns the logs kept and those it removed; on an error
// what was removed before it stays removed.
func (j *Journal) shedEnded(logs []*logInfo, over func([]*logInfo) bool) (kept, gone []*logInfo, err error) {
	if !over(logs) {
		return logs, nil, nil
	}
	var ended []*logInfo
	for _, li := range logs {
		if !li.ended.IsZero() {
			ended = append(ended, li)
		}
	}
	sort.Slice(ended, func(a, b int) bool { return ended[a].ended.Before(ended[b].ended) })
	kept = logs
	for _, victim := range ended {
		if !over(kept) {
			break
		}
		if err := j.removeLog(victim.name); err != nil {
			return kept, gone, err
		}
		gone = append(gone, victim)
		next := make([]*logInfo, 0, len(kept)-1)
		for _, li := range kept {
			if li != victim {
				next = append(next, li)
			}
		}
		kept = next
	}
	return kept, gone, nil
}

// logInfo is what GC knows of one session log: its name, when it ended
// (zero: live) and the blobs it names, with their sizes in bytes.
type logInfo struct {
	name  string
	ended time.Time
	size  int64
	refs  map[string]int64
	owner *uint32 // the uid its first record names (Record.Owner), or nil
}

// lostBlobs counts the distinct blobs the logs name that found (the
// store's blobs by address, with their sizes) lacks or holds at another
// size.
func lostBlobs(logs []*logInfo, found map[string]int64) int {
	lost := map[string]bool{}
	for _, li := range logs {
		for a, size := range li.refs {
			if got, ok := found[a]; !ok || got != size {
				lost[a] = true
			}
		}
	}
	return len(lost)
}

// removeLog closes session name's log if it is open and removes it; the
// session's in-memory state goes too, so a later use starts a new log.
func (j *Journal) removeLog(name string) error {
	j.mu.Lock()
	s := j.sessions[name]
	delete(j.sessions, name)
	j.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		if s.log != nil {
			s.log.close()
			s.log = nil
		}
		s.err = errRemoved
		s.mu.Unlock()
	}
	if st, err := os.Stat(j.LogPath(name)); err == nil {
		defer j.logGrew(-st.Size())
	}
	if err := os.Remove(j.LogPath(name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return syncDir(filepath.Dir(j.LogPath(name)))
}

// errRemoved is returned to a caller that was waiting on a session whose
// log GC removed meanwhile; its next call starts a new log.
var errRemoved = errors.New("journal: session log removed by GC")
