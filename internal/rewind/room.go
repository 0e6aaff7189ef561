// Package rewind is the mount's side of the change journal's requests
// (docs/DESIGN.md#journal-hook, docs/DESIGN.md#rewind-mount-restore): the
// journal.Inspector the journal plans and lists changes against, a diff's
// current bytes, the as-caller gate and redaction of what a requester may
// see (docs/DESIGN.md#as-caller), and the rewind applier, whose every step
// is one change through the mount's mutation path as the session's own.
//
// It never imports the FUSE adapter: it reaches the mount through Mount,
// which package fusefs implements (FS.RewindMount), and it is what the
// journal's control files (internal/journalctl) take as their Workspace.
package rewind

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/ascaller"
	"github.com/rubinofs/rubinofs/journal"
)

// Mount is the mount as the rewind sees it; package fusefs implements it.
// Every method is safe for concurrent use.
type Mount interface {
	// Walker opens a path's parent directory below the workspace root
	// (ascaller.Walker).
	ascaller.Walker
	// Lstat stats the workspace-relative path rel without following a
	// final symlink or any on the way (ENOENT, ENOTDIR, ELOOP, ...).
	Lstat(rel string, st *syscall.Stat_t) syscall.Errno
	// LookupTarget is rel as the guard's hash cache takes it
	// (fusefs.FS.LookupTarget).
	LookupTarget(rel string) (guard.Target, error)
	// OpenForHash opens the regular file rel for reading, as the guard
	// hashes it.
	OpenForHash(rel string) (*os.File, error)
	// Apply runs ch as one change through the mount's mutation path, of
	// the rewind kind (docs/DESIGN.md#mutation-path): by's session's own
	// change, without the guard's decision (the conflict rule replaced
	// it), journaled, bracketed for the watcher, noted to the guard and
	// credited. Its errno is the backing operation's or the journal's.
	Apply(by By, ch Change) syscall.Errno
	// Invalidate drops the kernel's caches of rels from a goroutine,
	// never from the calling request handler, and returns a channel
	// closed once the notifications were sent.
	Invalidate(rels []string) <-chan struct{}
	// Checkpointed tells the mount a checkpoint was taken: open handles
	// start a new generation of their journal records.
	Checkpointed()
}

// By is the synthetic caller a rewind's steps run as: the rewound
// session, and the requester's uid and gid (the owner of a new entry
// whose pre-image recorded none).
type By struct {
	Session  string
	Uid, Gid uint32
}

// Change is one step of a rewind as the mutation path runs it.
type Change struct {
	// Op is the journal op recorded (journalhook.Op*): chmod, mkdir,
	// symlink, create (a new entry under Rel); rmdir, unlink (Rel
	// removed); write (Rel's bytes replaced in place); rename, exchange
	// (Rel and To).
	Op string
	// Rel is the name changed; To the other name of a rename or
	// exchange.
	Rel, To string
	// Run is the backing operation, given the parent directory of each
	// name as the mutation's lock step resolved it (-1 for one it did
	// not resolve, which Run resolves itself with Mount.OpenParent).
	Run func(at []int) syscall.Errno
	// Forced marks a rename or exchange applied over another's change
	// (a conflict at Rel, To or below them, applied with --force): what
	// is there now may not be what the session moved, so Apply refuses it
	// (EXDEV) when it would give content the guard covers an exempt name
	// or a tool tree's exemption (docs/DESIGN.md#exempt-widening).
	Forced bool
}

// Room is the journal's workspace side over one mount: what
// internal/journalctl asks of the mount for a session's changes, diff and
// rewind. Safe for concurrent use.
type Room struct {
	j *journal.Journal
	m Mount
	g *guard.Guard
}

// New returns the room over journal j (nil: the journal is off, and
// Rewind fails), mount m and the guard g whose hash cache hashes current
// files.
func New(j *journal.Journal, m Mount, g *guard.Guard) *Room { return &Room{j: j, m: m, g: g} }

// Inspector is the journal.Inspector of the backing workspace, as the
// mount journals it.
func (r *Room) Inspector() journal.Inspector { return inspector{r} }

// ReaderGate is the workspace's Inspector gated for c: a diff shows the
// bytes c could read itself (docs/DESIGN.md#as-caller); done ends the
// credential-switched thread the checks started.
func (r *Room) ReaderGate(c ctltree.Caller) (journal.Inspector, func()) {
	gate := gateInspector{inspector{r}, &asChecks{r: r, cr: ascaller.Of(c)}}
	return gate, gate.close
}

// Redactor returns what blanks, in a batch of changes, the hashes c could
// not see itself (redactChanges); c's groups are read once, here, within
// procfs.Bound.
func (r *Room) Redactor(c ctltree.Caller) func([]journal.PathChange) {
	cr := ascaller.Of(c)
	return func(batch []journal.PathChange) { r.redactChanges(cr, batch) }
}

// CurrentBytes reads path's current bytes, for a diff (at most 1 GiB: a
// larger file is binary to a diff anyway).
func (r *Room) CurrentBytes(p string) ([]byte, error) {
	fl, err := r.m.OpenForHash(p)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	return io.ReadAll(io.LimitReader(fl, 1<<30))
}

// Checkpointed tells the mount a checkpoint was taken (Mount.Checkpointed).
func (r *Room) Checkpointed() { r.m.Checkpointed() }

// Rewind plans the rewind of session to checkpoint to and, unless dryRun,
// applies it (journal.Rewind) as the session's own changes: each step is
// one Mount.Apply call that skips the guard's decision (the conflict rule
// replaced it) but keeps the journal record, the watcher bracket, the
// guard's notes and the credit. The requester c may make only the steps
// it could make itself (docs/DESIGN.md#as-caller): the whole plan is
// checked first (a refusal changes nothing and is the error: EACCES with
// the reason, also for a dry run), then each step again as it is applied
// (a refused step is one of the Result's Errors). An entry made anew gets
// the owner and group of its pre-image (the requester's for a pre-image
// from before they were recorded) when the daemon is root. The kernel's
// caches of the touched paths are invalidated from a goroutine; Rewind
// returns once that is done (it runs inside a control-file request, which
// a notification must not be sent from, but may wait for). Errors: the
// journal's.
func (r *Room) Rewind(session, to string, opt journal.RewindOptions, dryRun bool, c ctltree.Caller) (journal.Plan, journal.Result, error) {
	if r.j == nil {
		return journal.Plan{}, journal.Result{}, errors.New("the journal is off")
	}
	plan, err := r.j.PlanRewind(session, to, inspector{r}, opt)
	if err != nil {
		return plan, journal.Result{}, err
	}
	checks := &asChecks{r: r, cr: ascaller.Of(c)}
	defer checks.close()
	if err := checks.mayApplyPlan(plan); err != nil || dryRun {
		return plan, journal.Result{}, err
	}
	a := &Applier{m: r.m, by: By{Session: session, Uid: c.Uid, Gid: c.Gid}, checks: checks}
	if opt.Force {
		for _, cf := range plan.Conflicts {
			a.forced = append(a.forced, cf.Path)
		}
	}
	res, err := r.j.Rewind(plan, a)
	r.m.Checkpointed() // its automatic checkpoint
	<-r.m.Invalidate(a.Touched())
	return plan, res, err
}
