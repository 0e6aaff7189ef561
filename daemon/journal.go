package daemon

// The change journal's life in the daemon (docs/DESIGN.md#journal-hook):
// opened at STATE_DIR/journal before mounting, a session's log ended when
// its registration ends, collected at start and hourly, closed at unmount.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/journal"
	"github.com/rubinofs/rubinofs/sessions"
)

// JournalGCInterval is how often the journal is collected while mounted
// (journal.Journal.GC: ended sessions past retention, unreferenced blobs,
// the budget), besides once at start.
const JournalGCInterval = time.Hour

// journalDir is where the journal lives: STATE_DIR/journal.
func (d *Daemon) journalDir() string { return filepath.Join(d.cfg.StateDir, "journal") }

// openJournal opens the journal when it is on (Config.Journal.Enabled and a
// state directory), with the matcher of the paths it skips (git-ignored
// ones, unless Config.Journal.Ignored). That matcher is guard, the guard's
// own, when the two would answer alike (no --exempt globs, git-ignored
// paths exempt from the guard too): one set of rules read and one memo of
// answers, where each new path was worked out twice. It returns nils when
// the journal is off: then no journal call is made at all.
func (d *Daemon) openJournal(backing string, guard *ignore.Matcher) (*journal.Journal, *ignore.Matcher, error) {
	cfg := d.cfg
	if !cfg.Journal.Enabled || cfg.StateDir == "" {
		return nil, nil, nil
	}
	j, err := journal.Open(d.journalDir(), journal.Options{MaxBlobSize: cfg.Journal.MaxFileSize, Budget: cfg.Journal.Budget,
		Sync: cfg.Journal.Sync, FlushError: d.journalFlushError,
		OwnerBudget: cfg.Journal.BudgetPerUID, OthersBudget: cfg.Journal.BudgetOtherUIDs, OwnerOf: d.sessionOwner, Exempt: d.shareExempt, Live: d.sessionLive})
	if err != nil {
		return nil, nil, fmt.Errorf("journal %s: %w", d.journalDir(), err)
	}
	var m *ignore.Matcher
	switch {
	case cfg.Journal.Ignored:
	case len(cfg.Exempt) == 0 && !cfg.GuardIgnored:
		m = guard
	default:
		// Its own matcher without --exempt globs: an exempt path is still
		// the session's change to rewind; only git-ignored ones are not.
		if m, err = ignore.New(backing, nil, false); err != nil {
			j.Close()
			return nil, nil, err
		}
	}
	return j, m, nil
}

// sessionOwner returns the owner uid of session name: the uid of a
// default session ("default" the mount owner's, "default-U" U's), else
// the registry's owner of a live or listed session; false for a name
// neither knows (and before the registry is made).
func (d *Daemon) sessionOwner(name string) (uint32, bool) {
	reg := d.Sessions
	if reg == nil {
		return 0, false
	}
	if uid, ok := sessions.DefaultUID(name, reg.MountOwner); ok {
		return uid, true
	}
	return reg.OwnerOf(name)
}

// sessionLive is the journal's Options.Live: whether a session of the
// name is registered and live now.
func (d *Daemon) sessionLive(name string) bool {
	if d.Sessions == nil {
		return false
	}
	_, ok := d.Sessions.Lookup(name)
	return ok
}

// journalNameHeld is the registry's NameHeld: a name whose journal log
// another uid's session began may not be registered by owner, since the
// new session would go on with that log: its changes, diff and rewind
// (docs/DESIGN.md#session-names). A log that names no uid (written before
// logs named theirs) holds nothing, as before.
func (d *Daemon) journalNameHeld(name string, owner uint32) error {
	if d.Journal == nil {
		return nil
	}
	uid, known, _ := d.Journal.LogOwner(name)
	if known && uid != owner {
		return fmt.Errorf("%w: %s is the name of uid %d's session, whose journal is kept until it is collected (journal.retention): choose another name", sessions.ErrSessionExists, name, uid)
	}
	return nil
}

// journalLogOwner is the registry's KeptOwner: the uid session name's
// journal log names, so its owner still reaches its journal (changes,
// diff, rewind) once the registry has forgotten the session
// (docs/DESIGN.md#session-names).
func (d *Daemon) journalLogOwner(name string) (uint32, bool) {
	if d.Journal == nil {
		return 0, false
	}
	uid, known, _ := d.Journal.LogOwner(name)
	return uid, known
}

// journaledTaskIDs returns the largest N of the journal's task-N session
// logs (0: none), so the mount's tasks take ids past it: ids start at 1
// at every mount, and a task-N session registered again would go on with
// an earlier task's log, another uid's perhaps
// (docs/DESIGN.md#session-names).
func (d *Daemon) journaledTaskIDs() uint64 {
	if d.Journal == nil {
		return 0
	}
	names, err := d.Journal.Sessions()
	if err != nil {
		return 0
	}
	var top uint64
	for _, n := range names {
		if id, ok := strings.CutPrefix(n, sessions.TaskPrefix); ok {
			if v, err := strconv.ParseUint(id, 10, 64); err == nil {
				top = max(top, v)
			}
		}
	}
	return top
}

// shareExempt is the journal's Options.Exempt: the mount owner's and
// root's sessions have no share of the journal budget, every other uid's
// have one (docs/DESIGN.md#journal-share).
// The mount's owner is the daemon's uid (sessions.Registry.MountOwner);
// the journal may ask before the registry is made.
func (d *Daemon) shareExempt(uid uint32) bool { return uid == 0 || uid == uint32(os.Getuid()) }

// journalFlushError logs a failed background flush of the journal
// (journal.SyncWrite) at error: the records written since the last flush
// may not survive an OS crash, though they survive a daemon crash
// (docs/DESIGN.md#journal-sync). The next write retries.
func (d *Daemon) journalFlushError(err error) {
	d.cfg.Slog.Error("journal: flushing records to disk failed; they may not survive an OS crash", "dir", d.journalDir(), "err", err)
}

// startJournalGC collects the journal every JournalGCInterval until
// stopJournalGC (Start collects it once before mounting).
func (d *Daemon) startJournalGC() {
	if d.Journal == nil {
		return
	}
	d.stopGC, d.gcDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.gcDone)
		t := time.NewTicker(JournalGCInterval)
		defer t.Stop()
		for {
			select {
			case <-d.stopGC:
				return
			case <-t.C:
			}
			d.collectJournal()
		}
	}()
}

// collectJournal runs one GC; a failure is logged at warn and retried at
// the next tick. Start runs it once before mounting, so its record is in
// the log before the mount answers.
func (d *Daemon) collectJournal() {
	res, err := d.Journal.GC(journal.GCOptions{Budget: d.cfg.Journal.Budget, Retention: d.cfg.Journal.Retention})
	if err != nil {
		d.cfg.Slog.Warn("journal: collection failed; retried in an hour", "dir", d.journalDir(), "err", err)
		return
	}
	if res.Sessions > 0 || res.Blobs > 0 {
		d.cfg.Slog.Info("journal collected", "sessions", res.Sessions, "blobs", res.Blobs,
			"freed_bytes", res.FreedBytes, "store_bytes", res.StoreBytes)
	}
	if res.Lost > 0 {
		d.cfg.Slog.Warn("journal: blobs named by records are missing or short (an OS crash before they were flushed?); a rewind reports their paths as unrecoverable",
			"dir", d.journalDir(), "lost", res.Lost)
	}
}

// stopJournalGC stops the collection goroutine and waits for it.
func (d *Daemon) stopJournalGC() {
	if d.stopGC != nil {
		close(d.stopGC)
		<-d.gcDone
		d.stopGC = nil
	}
}

// endJournalSession ends name's journal (its registration ended); a
// failure is logged at warn: the log is kept (retention never starts).
func (d *Daemon) endJournalSession(name string) {
	if d.Journal == nil || !journal.ValidSession(name) {
		return
	}
	if _, err := os.Stat(d.Journal.LogPath(name)); err != nil {
		return // it changed nothing: no log to end (End would make one)
	}
	if err := d.Journal.End(name, time.Now()); err != nil {
		d.cfg.Slog.Warn("journal: a session's end was not recorded; its log is kept until it is", "session", name, "err", err)
	}
}

// closeJournal stops the collection and closes the journal, after the
// server has stopped (no request records any more).
func (d *Daemon) closeJournal() error {
	if d.Journal == nil {
		return nil
	}
	d.stopJournalGC()
	return d.Journal.Close()
}
