package journal

// Per-uid shares of the journal budget: the sessions of one uid other
// than the mount's owner may hold at most Options.OwnerBudget bytes of
// it, so no such uid can spend the budget that keeps everyone's journal
// running (docs/DESIGN.md#journal-share).

import (
	"fmt"
	"sync/atomic"
)

// Share is one uid's part of the journal budget: the bytes of the blobs
// its sessions' captures stored and of their logs, against Limit. GC
// recounts it from the logs (each log's bytes and every blob it names, at
// the size it names it); between collections each new blob (not one
// already stored) and each appended record adds its bytes. A blob past
// the limit is not stored (the pre-image is UnrecoverableOverBudget), and
// a session whose change finds its uid's share spent has its journal
// stopped, as with the whole budget (docs/DESIGN.md#journal-budget). A
// nil *Share bounds nothing. Safe for concurrent use.
type Share struct {
	uid   uint32
	limit int64
	used  atomic.Int64
}

// UID is the uid whose sessions the share bounds.
func (s *Share) UID() uint32 { return s.uid }

// Limit is the share's bound, in bytes.
func (s *Share) Limit() int64 { return s.limit }

// Used is the bytes charged to the share (see Share).
func (s *Share) Used() int64 { return s.used.Load() }

// take charges n bytes unless that passes the limit; it reports whether
// it did. A nil share takes anything.
func (s *Share) take(n int64) bool {
	if s == nil {
		return true
	}
	for {
		u := s.used.Load()
		if u+n > s.limit {
			return false
		}
		if s.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// give takes n bytes off the charge (nil: nothing).
func (s *Share) give(n int64) {
	if s != nil {
		s.used.Add(-n)
	}
}

// add charges n bytes whatever the limit (a record already appended).
func (s *Share) add(n int64) {
	if s != nil {
		s.used.Add(n)
	}
}

// spent reports whether the share has reached its limit (nil: never).
func (s *Share) spent() bool { return s != nil && s.used.Load() >= s.limit }

// stopReason is the label of the stop record of a session whose uid's
// share is spent.
func (s *Share) stopReason() string {
	return fmt.Sprintf("uid %d's share of the journal budget, %d bytes, is spent (%d bytes): later changes of its sessions are not recorded until a checkpoint under it (end sessions for GC to collect, or raise --journal-budget-per-uid)",
		s.uid, s.limit, s.used.Load())
}

// ShareOf returns the share of the budget session's changes are charged
// to: nil (no share: the whole budget alone bounds them) when
// Options.OwnerBudget is 0, Options.OwnerOf is nil or does not know the
// session, or the session's uid is Exempt (the mount's owner, root).
// Every session of one uid gets the same *Share. Safe for concurrent use;
// the recording hook calls it before Record, and hands the share to its
// captures (CaptureOptions.Share).
func (j *Journal) ShareOf(session string) *Share {
	if j.ownerBudget <= 0 || j.ownerOf == nil {
		return nil
	}
	if uid, ok := j.ownerOf(session); ok && !j.isExempt(uid) {
		return j.shareFor(uid)
	}
	return nil
}

// isExempt reports whether uid's sessions have no share (Options.Exempt).
func (j *Journal) isExempt(uid uint32) bool { return j.exempt != nil && j.exempt(uid) }

// shareFor returns uid's share, made at its first use.
func (j *Journal) shareFor(uid uint32) *Share {
	j.sharesMu.Lock()
	defer j.sharesMu.Unlock()
	sh := j.shares[uid]
	if sh == nil {
		sh = &Share{uid: uid, limit: j.ownerBudget}
		j.shares[uid] = sh
	}
	return sh
}

// OwnerBudget is Options.OwnerBudget, in bytes (0: no share).
func (j *Journal) OwnerBudget() int64 { return j.ownerBudget }

// MostByOneUID returns the uid whose share has the most bytes charged and
// that count (0, 0 when no share has any).
func (j *Journal) MostByOneUID() (uid uint32, used int64) {
	j.sharesMu.Lock()
	defer j.sharesMu.Unlock()
	for u, sh := range j.shares {
		if n := sh.Used(); n > used {
			uid, used = u, n
		}
	}
	return uid, used
}

// shareLogs is GC's part of the shares, under the GC lock (no Record
// runs): it removes the logs of ended sessions of each uid over its share,
// the earliest ended first, until the uid is back under it (a live
// session's log is never removed), and sets every share to what the kept
// logs hold. It returns the logs kept and how many it removed.
func (j *Journal) shareLogs(logs []*logInfo) ([]*logInfo, int, error) {
	if j.ownerBudget <= 0 || j.ownerOf == nil {
		return logs, 0, nil
	}
	byUID := map[uint32][]*logInfo{}
	for _, li := range logs {
		uid, ok := j.ownerOf(li.name)
		if li.owner != nil { // written when the log began: the registry may have forgotten the session
			uid, ok = *li.owner, true
		}
		if ok && !j.isExempt(uid) {
			byUID[uid] = append(byUID[uid], li)
		}
	}
	removed := 0
	gone := map[*logInfo]bool{}
	totals := map[uint32]int64{}
	for uid, mine := range byUID {
		kept, shed, err := j.shedEnded(mine, func(ls []*logInfo) bool { return holds(ls) > j.ownerBudget })
		for _, li := range shed {
			gone[li] = true
		}
		removed += len(shed)
		if err != nil {
			return dropLogs(logs, gone), removed, err
		}
		totals[uid] = holds(kept)
	}
	logs = dropLogs(logs, gone)
	for uid := range totals {
		j.shareFor(uid)
	}
	j.sharesMu.Lock()
	for uid, sh := range j.shares {
		sh.used.Store(totals[uid])
	}
	j.sharesMu.Unlock()
	return logs, removed, nil
}

// dropLogs returns logs without those in gone.
func dropLogs(logs []*logInfo, gone map[*logInfo]bool) []*logInfo {
	if len(gone) == 0 {
		return logs
	}
	kept := logs[:0]
	for _, li := range logs {
		if !gone[li] {
			kept = append(kept, li)
		}
	}
	return kept
}

// holds is the bytes logs hold: their own, and each distinct blob they
// name at the size they name it.
func holds(logs []*logInfo) int64 {
	seen := map[string]bool{}
	var total int64
	for _, li := range logs {
		total += li.size
		for a, size := range li.refs {
			if !seen[a] {
				seen[a] = true
				total += size
			}
		}
	}
	return total
}
