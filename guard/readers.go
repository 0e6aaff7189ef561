package guard

// Whose reads count (docs/DESIGN.md#scanner-reads): a read by a tree
// scanner counts for its own process only, and a harness root's own reads
// do not count at all. fusefs supplies the facts about the reading process
// (sessions.ProcFacts); the guard alone decides what they mean.

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/sessions"
)

// DefaultScanners are the programs whose reads count for their own process
// only (Config.Scanners, the config's guard.scanners): tools that walk
// whole trees and show the model a summary (matching lines, names, tags,
// diagnostics, a status), never the bytes they read. "vet" is the process
// of `go vet`, which runs the vet tool as a separate program. "ugrep" is
// also Claude Code's Bash `grep`: a shell function that runs the client's
// own binary as `exec -a ugrep`, so only its argv[0] names it.
var DefaultScanners = []string{"grep", "egrep", "fgrep", "ugrep", "rg", "ag", "ack", "git", "find", "fd", "ctags", "vet", "gopls"}

// commLen is the longest comm the kernel keeps (TASK_COMM_LEN - 1), in
// bytes: longer program names are truncated to it.
const commLen = 15

// interpreters are programs that run scripts named as scanners (ack is a
// perl script; a shell wrapper may exec nothing): a process whose comm is
// a scanner's and whose exe is one of these is still that scanner.
var interpreters = map[string]bool{"sh": true, "bash": true, "dash": true, "perl": true,
	"python": true, "python3": true, "ruby": true, "node": true, "busybox": true}

// Caller is the process a read or a mutation comes from, as fusefs knows
// it: its session, and lazily its facts and command name. The guard calls
// Facts and Comm only when its decision depends on them, at most once each
// per call; either may be nil (unknown).
type Caller struct {
	Session string
	Facts   func() sessions.ProcFacts
	Comm    func() string
	// MayName reports whether a refusal of this caller may name session
	// other (it replaced the file: docs/DESIGN.md#stale-replaced): true
	// only when the caller may see that session (docs/DESIGN.md#trust).
	// nil names no session.
	MayName func(other string) bool
}

func (c Caller) facts() sessions.ProcFacts {
	if c.Facts == nil {
		return sessions.ProcFacts{}
	}
	return c.Facts()
}

// scannerSet is the set of scanner names, each clipped to commLen bytes
// as the kernel clips comm.
type scannerSet map[string]bool

func newScannerSet(names []string) scannerSet {
	if names == nil {
		names = DefaultScanners
	}
	s := scannerSet{}
	for _, n := range names {
		s[clipComm(n)] = true
	}
	return s
}

func clipComm(s string) string {
	if len(s) > commLen {
		return s[:commLen]
	}
	return s
}

// IsScanner reports whether the process f describes is a tree scanner
// (docs/DESIGN.md#scanner-reads): its comm names a scanner and its exe
// confirms it (the exe is unknown, names a scanner too, or is a script
// interpreter running a script of that name), or its exe or argv[0] names a
// scanner whatever its comm (a multi-call binary run as a scanner). A
// process whose facts are unknown is not a scanner.
func (g *Guard) IsScanner(f sessions.ProcFacts) bool {
	if !f.Known {
		return false
	}
	exe := clipComm(f.Exe)
	if g.scanners[f.Comm] && (exe == "" || g.scanners[exe] || interpreters[exe]) {
		return true
	}
	return g.scanners[exe] || g.scanners[clipComm(f.Argv0)]
}

// HarnessRoots tells which process is the harness root of a session
// (sessions.Registry implements it): ok is false for a session not started in
// harness mode.
type HarnessRoots interface {
	HarnessRoot(session string) (root sessions.ProcKey, ok bool)
}

// SetHarnessRoots installs the registry of harness roots; until then no
// session is in harness mode. Call before serving requests.
func (g *Guard) SetHarnessRoots(h HarnessRoots) { g.roots = h }

// MaxProcTrackers bounds the per-process read records (one set per live
// scanner process that read a file), in processes. A scanner's read beyond
// it is not registered: a later write by that process is refused as unread
// (fail closed).
const MaxProcTrackers = 4096

// procTrackers holds the read records of scanner processes: each counts
// for its own process only and is dropped when the process exits (noticed
// through a pidfd).
type procTrackers struct {
	mu sync.Mutex
	m  map[sessions.ProcKey]*Tracker
}

// NoteReadBy registers that c was served t's content (Tracker.Register),
// counting it where c's reads count (readsOf). Errors are those of
// hashing. A no-op in ModeOff and for sessions.Unknown.
func (g *Guard) NoteReadBy(c Caller, t Target) error {
	if g.mode == ModeOff || c.Session == sessions.Unknown {
		return nil
	}
	tr := g.readsOf(c)
	if tr == nil || !g.recordAllowed(c, tr, t.Stat.ID) {
		return nil
	}
	g.reads.Add(1)
	return tr.Register(t, Hash{})
}

// NoteReadInFluxBy registers a read of t served while another session was
// changing it (Tracker.RegisterInFlux), where c's reads count (readsOf).
// A no-op in ModeOff and for sessions.Unknown.
func (g *Guard) NoteReadInFluxBy(c Caller, t Target) {
	if g.mode == ModeOff || c.Session == sessions.Unknown {
		return
	}
	if tr := g.readsOf(c); tr != nil && g.recordAllowed(c, tr, t.Stat.ID) {
		g.reads.Add(1)
		tr.RegisterInFlux(t)
	}
}

// readsOf returns the tracker where c's reads count
// (docs/DESIGN.md#scanner-reads), or nil for nowhere:
//   - the harness root of a harness-mode session: nowhere (its reads are
//     snapshots and pre-write checks, not the model's; the harness
//     declares the model's reads with DeclareRead). In such a session a
//     reader whose facts could not be read in time counts nowhere either
//     (fail closed: it may be the root);
//   - a scanner (IsScanner): its own process's tracker (nil when the
//     process is gone or MaxProcTrackers are in use);
//   - anyone else: its session's tracker.
//
// c.Facts is called at most once, and only when a harness-mode session or
// a non-empty scanner list makes the answer depend on it.
func (g *Guard) readsOf(c Caller) *Tracker {
	var f sessions.ProcFacts
	known := false
	facts := func() sessions.ProcFacts {
		if !known {
			f, known = c.facts(), true
		}
		return f
	}
	if g.roots != nil {
		if root, ok := g.roots.HarnessRoot(c.Session); ok {
			if ff := facts(); !ff.Known || ff.Proc == root {
				return nil
			}
		}
	}
	if len(g.scanners) > 0 && c.Facts != nil && g.IsScanner(facts()) {
		return g.procTracker(f.Proc, c.Session)
	}
	return g.ForSession(c.Session)
}

// procTracker returns the tracker of process p (of session), creating it
// and watching the process's exit; nil when the process is gone or
// MaxProcTrackers are in use.
func (g *Guard) procTracker(p sessions.ProcKey, session string) *Tracker {
	g.procs.mu.Lock()
	if t, ok := g.procs.m[p]; ok {
		g.procs.mu.Unlock()
		return t
	}
	if len(g.procs.m) >= MaxProcTrackers {
		g.procs.mu.Unlock()
		return nil
	}
	g.procs.mu.Unlock()
	// The process is inside the request registering its read, so its pid
	// cannot have been reused since its facts were read: the pidfd refers
	// to it. pidfd_open never waits on the process's state.
	pidfd, err := unix.PidfdOpen(int(p.Pid), 0)
	if err != nil {
		return nil
	}
	g.procs.mu.Lock()
	defer g.procs.mu.Unlock()
	if t, ok := g.procs.m[p]; ok {
		unix.Close(pidfd)
		return t
	}
	if g.procs.m == nil {
		g.procs.m = map[sessions.ProcKey]*Tracker{}
	}
	t := newTracker(session, g.hashes, g.now, g.LastMutation)
	g.procs.m[p] = t
	go g.watchProc(p, pidfd)
	return t
}

// watchProc drops the records of process p when it exits.
func (g *Guard) watchProc(p sessions.ProcKey, pidfd int) {
	defer unix.Close(pidfd)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		break
	}
	g.procs.mu.Lock()
	delete(g.procs.m, p)
	g.procs.mu.Unlock()
}

// procTrackerOf returns the tracker of process p without creating one.
func (g *Guard) procTrackerOf(p sessions.ProcKey) *Tracker {
	g.procs.mu.Lock()
	defer g.procs.mu.Unlock()
	return g.procs.m[p]
}

// hasProcTrackers reports whether any scanner process has records.
func (g *Guard) hasProcTrackers() bool {
	g.procs.mu.Lock()
	defer g.procs.mu.Unlock()
	return len(g.procs.m) > 0
}

// ProcRecordCount returns how many files process p has records of
// (0 when it has none).
func (g *Guard) ProcRecordCount(p sessions.ProcKey) int {
	return g.procTrackerOf(p).count()
}

// allTrackers lists the sessions' and the scanner processes' trackers.
func (g *Guard) allTrackers() []*Tracker {
	return append(g.trackers(), g.procTrackerList()...)
}

// procTrackerList copies the scanner processes' trackers.
func (g *Guard) procTrackerList() []*Tracker {
	g.procs.mu.Lock()
	defer g.procs.mu.Unlock()
	out := make([]*Tracker, 0, len(g.procs.m))
	for _, t := range g.procs.m {
		out = append(out, t)
	}
	return out
}

// WantsFacts reports whether registering a read of session's callers
// depends on their process facts (a scanner list is set, or the session is
// in harness mode), so fusefs can read them before taking locks.
func (g *Guard) WantsFacts(session string) bool {
	if g.mode == ModeOff || session == sessions.Unknown {
		return false
	}
	if len(g.scanners) > 0 {
		return true
	}
	if g.roots != nil {
		_, ok := g.roots.HarnessRoot(session)
		return ok
	}
	return false
}
