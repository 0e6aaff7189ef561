package guard

// The denial log (.rubino/guard/denials) and the per-session summaries
// beside it (docs/DESIGN.md#denial-summary): the log keeps the newest
// MaxDenials lines, the summaries count every refusal of each session by
// (path, code), so one loud command can push every earlier line out of the
// log but not out of the summary.

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// The summaries' bounds (docs/DESIGN.md#denial-summary). Counts stay exact
// past them: a refusal whose (path, code) cannot get an entry is counted
// in its session's Other bucket.
const (
	// MaxSummaryKeys bounds the distinct (path, code) entries of one
	// session's summary, in entries.
	MaxSummaryKeys = 1000
	// MaxSummaryBytes bounds the bytes one session's entries hold (each
	// entry counts its path's length plus SummaryEntryCost).
	MaxSummaryBytes = 256 << 10
	// MaxSummaryTotalBytes bounds the bytes of every session's entries
	// together.
	MaxSummaryTotalBytes = 16 << 20
	// MaxSummarySessions bounds the sessions with a summary: one more
	// drops the summary of the session with the oldest last denial, an
	// ended one (without a tracker) first.
	MaxSummarySessions = 4096
	// SummaryEntryCost is what an entry counts against the byte bounds
	// besides its path: the map slot, code, count and time.
	SummaryEntryCost = 96
)

// SummaryEntry is one (path, code) of a session's summary: how many times
// the session was refused (or, in warn mode, would have been) with code
// on path, and when last.
type SummaryEntry struct {
	Path  string    `json:"path"`
	Code  Code      `json:"code"`
	Count uint64    `json:"count"`
	Last  time.Time `json:"last"`
}

// DenialSummary is one session's summary, a line of
// .rubino/guard/denials.summary: Denials and Warnings count every refusal
// and would-be refusal (warn mode) of the session since the mount (or
// since its summary was dropped, MaxSummarySessions); Entries list them by
// (path, code), most counted first; Other counts those whose (path, code)
// got no entry (past MaxSummaryKeys or the byte bounds).
type DenialSummary struct {
	Session  string         `json:"session"`
	Denials  uint64         `json:"denials"`
	Warnings uint64         `json:"warnings"`
	Other    uint64         `json:"other"`
	Entries  []SummaryEntry `json:"entries"`
}

type summaryKey struct {
	path string
	code Code
}

type summaryCount struct {
	count uint64
	last  time.Time
}

// sessionSummary is one session's counts.
type sessionSummary struct {
	denials, warnings, other uint64
	keys                     map[summaryKey]*summaryCount
	bytes                    int
	last                     time.Time
}

// denialLog is the newest denials (a ring of at most the guard's maxDen)
// and the per-session summaries. One mutex guards both.
type denialLog struct {
	mu    sync.Mutex
	ring  []Denial
	next  int // the slot the next denial takes once the ring is full
	sums  map[string]*sessionSummary
	bytes int // of every summary's entries
}

// RecordDenial appends d to the bounded denial log, counts it (as a
// warning when d.Warned) and adds it to d.Session's summary
// (docs/DESIGN.md#denial-summary). O(1) but for the rare eviction of a
// summary (O(MaxSummarySessions)). Safe for concurrent use.
func (g *Guard) RecordDenial(d Denial) {
	if g.onDenial != nil {
		g.onDenial(d)
	}
	if d.Warned {
		g.warned.Add(1)
	} else {
		g.denied.Add(1)
	}
	l := &g.den
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) < g.maxDen {
		l.ring = append(l.ring, d)
	} else {
		l.ring[l.next] = d
		l.next = (l.next + 1) % len(l.ring)
	}
	l.count(d, g.trackerExists)
}

// count adds d to its session's summary (made by summary, with live).
// Called with l.mu held.
func (l *denialLog) count(d Denial, live func(string) bool) {
	s := l.summary(d.Session, live)
	if d.Warned {
		s.warnings++
	} else {
		s.denials++
	}
	s.last = d.Time
	k := summaryKey{path: d.Path, code: d.Code}
	if c, ok := s.keys[k]; ok {
		c.count++
		c.last = d.Time
		return
	}
	cost := len(d.Path) + SummaryEntryCost
	if len(s.keys) >= MaxSummaryKeys || s.bytes+cost > MaxSummaryBytes || l.bytes+cost > MaxSummaryTotalBytes {
		s.other++
		return
	}
	s.keys[k] = &summaryCount{count: 1, last: d.Time}
	s.bytes += cost
	l.bytes += cost
}

// summary returns session's summary, making one; at MaxSummarySessions
// it first drops the one with the oldest last denial, of a session that
// has no tracker (ended: live(name) false) when there is one. Called with
// l.mu held.
func (l *denialLog) summary(session string, live func(string) bool) *sessionSummary {
	if s, ok := l.sums[session]; ok {
		return s
	}
	if l.sums == nil {
		l.sums = make(map[string]*sessionSummary)
	}
	if len(l.sums) >= MaxSummarySessions {
		victim, victimLive := "", true
		var oldest time.Time
		for name, s := range l.sums {
			lv := live(name)
			if victim == "" || (victimLive && !lv) || (victimLive == lv && s.last.Before(oldest)) {
				victim, victimLive, oldest = name, lv, s.last
			}
		}
		l.bytes -= l.sums[victim].bytes
		delete(l.sums, victim)
	}
	s := &sessionSummary{keys: make(map[summaryKey]*summaryCount)}
	l.sums[session] = s
	return s
}

// ForgetDenials drops session's refusals from before (its lines of the
// denial log and its summary): a session registered at before starts with
// none, and another uid's new session of the name never sees an earlier
// one's (docs/DESIGN.md#session-names). When the new session was refused
// already, its summary is counted again from its lines. The counts in
// status keep them all. Safe for concurrent use.
func (g *Guard) ForgetDenials(session string, before time.Time) {
	l := &g.den
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sums[session]
	if ok {
		l.bytes -= s.bytes
		delete(l.sums, session)
	}
	n := len(l.ring)
	stale := false // any line to drop? (most new names have none: no copy)
	for i := range l.ring {
		if d := &l.ring[i]; d.Session == session && d.Time.Before(before) {
			stale = true
			break
		}
	}
	if !stale && !ok {
		return
	}
	kept := make([]Denial, 0, n)
	var newer []Denial
	for i := range l.ring {
		d := l.ring[(l.next+i)%n]
		if d.Session == session {
			if d.Time.Before(before) {
				continue
			}
			newer = append(newer, d)
		}
		kept = append(kept, d)
	}
	if len(kept) != n {
		l.ring, l.next = kept, 0
	}
	if ok && !s.last.Before(before) {
		for _, d := range newer {
			l.count(d, g.trackerExists)
		}
	}
}

// trackerExists reports whether session has a tracker (it has not ended).
func (g *Guard) trackerExists(session string) bool { return g.tracker(session) != nil }

// Denials returns the logged denials of session, oldest first ("" = all).
func (g *Guard) Denials(session string) []Denial {
	l := &g.den
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Denial, 0, len(l.ring))
	for i := range l.ring {
		d := l.ring[(l.next+i)%len(l.ring)]
		if session == "" || d.Session == session {
			out = append(out, d)
		}
	}
	return out
}

// DenialCount returns how many refusals (denials) and warn-mode would-be
// refusals (warnings) session has had (DenialSummary's counts; 0, 0 for a
// session without a summary). O(1).
func (g *Guard) DenialCount(session string) (denials, warnings uint64) {
	l := &g.den
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.sums[session]; ok {
		return s.denials, s.warnings
	}
	return 0, 0
}

// DenialSummaries returns the summaries of the sessions keep accepts (nil:
// every one), sorted by session; each one's entries most counted first,
// then by path and code. At most MaxSummarySessions summaries of at most
// MaxSummaryKeys entries each.
func (g *Guard) DenialSummaries(keep func(session string) bool) []DenialSummary {
	l := &g.den
	l.mu.Lock()
	out := make([]DenialSummary, 0, len(l.sums))
	for name, s := range l.sums {
		if keep != nil && !keep(name) {
			continue
		}
		ds := DenialSummary{Session: name, Denials: s.denials, Warnings: s.warnings, Other: s.other,
			Entries: make([]SummaryEntry, 0, len(s.keys))}
		for k, c := range s.keys {
			ds.Entries = append(ds.Entries, SummaryEntry{Path: k.path, Code: k.code, Count: c.count, Last: c.last})
		}
		out = append(out, ds)
	}
	l.mu.Unlock()
	for i := range out {
		slices.SortFunc(out[i].Entries, func(a, b SummaryEntry) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Code, b.Code))
		})
	}
	slices.SortFunc(out, func(a, b DenialSummary) int { return cmp.Compare(a.Session, b.Session) })
	return out
}

// DenialLogStats are the denial log's sizes for .rubino/status: lines
// kept and their bound, sessions with a summary, and the bytes their
// entries count (docs/DESIGN.md#denial-summary).
type DenialLogStats struct {
	Lines        int `json:"lines"`
	MaxLines     int `json:"max_lines"`
	Summaries    int `json:"summaries"`
	SummaryBytes int `json:"summary_bytes"`
}

// DenialLogStats returns the denial log's sizes.
func (g *Guard) DenialLogStats() DenialLogStats {
	l := &g.den
	l.mu.Lock()
	defer l.mu.Unlock()
	return DenialLogStats{Lines: len(l.ring), MaxLines: g.maxDen, Summaries: len(l.sums), SummaryBytes: l.bytes}
}

// renameSummary moves from's summary to to (RenameSession); an existing
// summary of to is replaced.
func (g *Guard) renameSummary(from, to string) {
	l := &g.den
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.sums[from]; ok {
		if old, ok := l.sums[to]; ok {
			l.bytes -= old.bytes
		}
		delete(l.sums, from)
		l.sums[to] = s
	}
}
