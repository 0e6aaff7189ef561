package journal

// Per-uid shares of the journal budget: the sessions of one uid other
// than the mount's owner may hold at most Options.OwnerBudget bytes of
// it, and those of all such uids together at most Options.OthersBudget,
// so no such uid, nor several, can spend the budget that keeps the
// owner's journal running (docs/DESIGN.md#journal-share).

import (
	"fmt"
	"math"
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
// nil *Share bounds nothing. A uid's share has a parent, the share of
// every bounded uid together (Options.OthersBudget): what it takes or
// adds is taken from or added to the parent too, and it is spent when
// the parent is. Safe for concurrent use.
type Share struct {
	uid    uint32
	limit  int64
	used   atomic.Int64
	parent *Share // nil: none
	others bool   // the parent share of every bounded uid
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
	if !s.parent.take(n) {
		return false
	}
	for {
		u := s.used.Load()
		if u+n > s.limit {
			s.parent.give(n)
			return false
		}
		if s.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// give takes n bytes off the charge, and off the parent's (nil: nothing).
func (s *Share) give(n int64) {
	if s != nil {
		s.used.Add(-n)
		s.parent.give(n)
	}
}

// add charges n bytes whatever the limit (a record already appended),
// to the parent too.
func (s *Share) add(n int64) {
	if s != nil {
		s.used.Add(n)
		s.parent.add(n)
	}
}

// spent reports whether the share, or its parent, has reached its limit
// (nil: never).
func (s *Share) spent() bool {
	return s != nil && (s.used.Load() >= s.limit || s.parent.spent())
}

// stopReason is the label of the stop record of a session whose uid's
// share (or the share of all bounded uids) is spent.
func (s *Share) stopReason() string {
	if s.used.Load() < s.limit && s.parent != nil {
		return s.parent.stopReason()
	}
	if s.others {
		return fmt.Sprintf("the share of the journal budget that uids other than the mount's owner and root hold together, %d bytes, is spent (%d bytes): later changes of their sessions are not recorded until a checkpoint under it (end sessions for GC to collect, or raise --journal-budget-other-uids)",
			s.limit, s.used.Load())
	}
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
	if (j.ownerBudget <= 0 && j.others == nil) || j.ownerOf == nil {
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
		limit := j.ownerBudget
		if limit <= 0 {
			limit = math.MaxInt64 // the others' share alone bounds it
		}
		sh = &Share{uid: uid, limit: limit, parent: j.others}
		j.shares[uid] = sh
	}
	return sh
}

// Others is the share of every bounded uid together (nil when
// Options.OthersBudget is 0).
func (j *Journal) Others() *Share { return j.others }

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
	if (j.ownerBudget <= 0 && j.others == nil) || j.ownerOf == nil {
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
	uidOf := map[*logInfo]uint32{}
	var bounded []*logInfo
	for uid, mine := range byUID {
		kept := mine
		if j.ownerBudget > 0 {
			var shed []*logInfo
			var err error
			kept, shed, err = j.shedEnded(mine, func(ls []*logInfo) bool { return holds(ls) > j.ownerBudget })
			for _, li := range shed {
				gone[li] = true
			}
			removed += len(shed)
			if err != nil {
				return dropLogs(logs, gone), removed, err
			}
		}
		for _, li := range kept {
			uidOf[li] = uid
		}
		bounded = append(bounded, kept...)
	}
	// byUIDHolds is what ls holds, each uid's counted as its share counts
	// it (a blob two uids name counts for each).
	byUIDHolds := func(ls []*logInfo) map[uint32]int64 {
		per := map[uint32][]*logInfo{}
		for _, li := range ls {
			per[uidOf[li]] = append(per[uidOf[li]], li)
		}
		out := map[uint32]int64{}
		for uid, mine := range per {
			out[uid] = holds(mine)
		}
		return out
	}
	if j.others != nil {
		// Then, while all bounded uids together hold more than theirs,
		// their ended logs go, earliest ended first, whoever's.
		sum := func(ls []*logInfo) int64 {
			var n int64
			for _, v := range byUIDHolds(ls) {
				n += v
			}
			return n
		}
		kept, shed, err := j.shedEnded(bounded, func(ls []*logInfo) bool { return sum(ls) > j.others.limit })
		for _, li := range shed {
			gone[li] = true
		}
		removed += len(shed)
		if err != nil {
			return dropLogs(logs, gone), removed, err
		}
		bounded = kept
	}
	totals = byUIDHolds(bounded)
	logs = dropLogs(logs, gone)
	for uid := range totals {
		j.shareFor(uid)
	}
	j.sharesMu.Lock()
	var all int64
	for uid, sh := range j.shares {
		sh.used.Store(totals[uid])
		all += totals[uid]
	}
	j.sharesMu.Unlock()
	if j.others != nil {
		j.others.used.Store(all)
	}
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
