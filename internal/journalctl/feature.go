// Package journalctl is the journal's control files, plugged into the
// control tree as a ctltree.SessionFeature (docs/DESIGN.md#ctl-room): in
// every session's directory .rubino/sessions/NAME/
// (docs/DESIGN.md#journal-hook),
//
//	checkpoints  JSON lines {"id","label","time","changes","paths"}, oldest
//	             first
//	changes      JSON lines of journal.PathChange since the session start
//	journal      request file: open O_RDWR, write one request, read the
//	             reply from offset 0 of the same handle:
//	               checkpoint [LABEL]                       -> "ID\n"
//	               changes [--since CP]                     -> JSON lines
//	               diff [--since CP] [-- PATH...]           -> unified diff
//	               rewind --to CP [--force] [--dry-run] [-- PATH...]
//	                   -> {"dry_run":B,"plan":PLAN,"result":RESULT}
//	ctl          also takes "checkpoint [LABEL]" and
//	             "rewind CP [--force] [--dry-run] [-- PATH...]"
//
// Tokens are separated by spaces; a token may be a Go-quoted string
// (strconv.Quote) for a name with spaces or odd bytes. A PATH is absolute
// inside the mount or relative to the writer's cwd (ctlhost.Host.CallerRel).
// Errors: EINVAL with a reason naming the option; ENOENT for an unknown
// checkpoint; EOPNOTSUPP "the journal is off (--journal=false)"; EPERM for
// a caller that may not act on the session (ctlhost.Host.MayActOn), for every
// file; EACCES for a rewind step the requester could not make itself;
// EFBIG for a request over 64 KiB. A diff withholds the bytes, and changes
// the hashes, the requester could not read itself
// (docs/DESIGN.md#as-caller).
package journalctl

import (
	"encoding/json"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/ctlhost"
	"github.com/rubinofs/rubinofs/journal"
)

// Workspace is what the journal's files need of the backing workspace
// beyond ctlhost.Host; *rewind.Room implements it over the mount
// (internal/rewind). Every method is safe for concurrent use.
type Workspace interface {
	// Inspector is the journal.Inspector of the backing workspace, as
	// the mount journals it.
	Inspector() journal.Inspector
	// ReaderGate is Inspector as a journal.ContentGate for c: a diff
	// shows a side's bytes only where c could read them itself
	// (docs/DESIGN.md#as-caller). done ends what the gate holds (a
	// credential-switched thread); call it once the diff is written.
	ReaderGate(c ctltree.Caller) (ins journal.Inspector, done func())
	// Redactor returns what blanks, in a batch of changes, the hashes c
	// could not see itself; c's groups are read once, here.
	Redactor(c ctltree.Caller) func(batch []journal.PathChange)
	// CurrentBytes reads a workspace path's current bytes for a diff.
	CurrentBytes(p string) ([]byte, error)
	// Checkpointed tells the mount a checkpoint was taken: open
	// handles start a new generation of their journal records.
	Checkpointed()
	// Rewind plans and, unless dryRun, applies the rewind of session to
	// checkpoint to as the session's own changes, each step one c could
	// make itself (EACCES otherwise). Errors: the journal's.
	Rewind(session, to string, opt journal.RewindOptions, dryRun bool, c ctltree.Caller) (journal.Plan, journal.Result, error)
}

// Feature is the journal's control files over one journal (nil: the
// journal is off, and every file answers EOPNOTSUPP). It adds no entry at
// the control tree's root; its files are in each session's directory.
// Safe for concurrent use.
type Feature struct {
	j    *journal.Journal
	host ctlhost.Host
	ws   Workspace
}

// New returns the journal's feature over j (nil when the journal is off),
// host (who may act on a session, a caller's paths) and ws (the
// workspace: changes, diff, rewind); plug it with fusefs.FS.Plug before
// mounting.
func New(j *journal.Journal, host ctlhost.Host, ws Workspace) *Feature {
	return &Feature{j: j, host: host, ws: ws}
}

var _ ctltree.SessionFeature = (*Feature)(nil)

// CtlEntries is empty: the journal's files are per session
// (SessionEntries).
func (*Feature) CtlEntries() []ctltree.Entry { return nil }

// SessionEntries are checkpoints, changes and journal in session's
// directory.
func (f *Feature) SessionEntries(name string) []ctltree.Entry {
	return []ctltree.Entry{
		{Name: "checkpoints", Node: &ctltree.File{Kind: ctltree.ReadOnly, Render: func(c ctltree.Caller, w io.Writer) error {
			if err := f.mayUse(c, name); err != nil {
				return err
			}
			return f.writeCheckpoints(w, name)
		}}},
		{Name: "changes", Node: &ctltree.File{Kind: ctltree.ReadOnly, Render: func(c ctltree.Caller, w io.Writer) error {
			if err := f.mayUse(c, name); err != nil {
				return err
			}
			render, err := f.changesRender(c, name, "")
			if err != nil {
				return err
			}
			return render(w)
		}}},
		{Name: "journal", Node: &ctltree.File{Kind: ctltree.Clone, CloneRender: func(c ctltree.Caller, req []byte) (func(io.Writer) error, error) {
			return f.request(c, name, req)
		}}},
	}
}

// KeepsSession reports whether the journal is on and session has a log in
// it: a session the registry forgot keeps its journal's files.
func (f *Feature) KeepsSession(session string) bool {
	if f.j == nil || !journal.ValidSession(session) {
		return false
	}
	_, err := os.Stat(f.j.LogPath(session))
	return err == nil
}

// errOff is the answer of every journal control file with the journal
// off.
func errOff() error {
	return ctltree.Errorf(syscall.EOPNOTSUPP, "the journal is off (--journal=false)")
}

// mayUse authorises c for session's journal files, requests and ctl
// commands: ctlhost.Host.MayActOn; EPERM otherwise (docs/DESIGN.md#as-caller).
func (f *Feature) mayUse(c ctltree.Caller, session string) error {
	if f.host.MayActOn(c, session) {
		return nil
	}
	return ctltree.Errorf(syscall.EPERM, "uid %d in session %s may not use the journal of session %s", c.Uid, c.Session, session)
}

// checkpointInfo is one line of the checkpoints file.
type checkpointInfo struct {
	ID      string    `json:"id"`
	Label   string    `json:"label"`
	Time    time.Time `json:"time"`
	Changes int       `json:"changes"`
	Paths   int       `json:"paths"`
	// Stopped is why the journal was stopped in this checkpoint's
	// interval (docs/DESIGN.md#journal-budget); absent when it was not.
	Stopped string `json:"stopped,omitempty"`
}

// writeCheckpoints writes session's checkpoints as JSON lines, streaming
// its log (docs/DESIGN.md#ctl-render).
func (f *Feature) writeCheckpoints(w io.Writer, session string) error {
	cps, err := f.checkpointList(session)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, cp := range cps {
		if err := enc.Encode(checkpointInfo{ID: cp.ID, Label: cp.Label, Time: cp.Time, Changes: cp.Changes, Paths: cp.Paths, Stopped: cp.Stopped}); err != nil {
			return err
		}
	}
	return nil
}

// checkpointList returns session's checkpoints (none for a session with
// no log yet). EOPNOTSUPP with the journal off; EIO when the log cannot
// be read.
func (f *Feature) checkpointList(session string) ([]journal.CheckpointInfo, error) {
	if f.j == nil {
		return nil, errOff()
	}
	if !journal.ValidSession(session) {
		return nil, nil
	}
	cps, err := f.j.CheckpointList(session)
	if err != nil {
		return nil, ctltree.Errorf(syscall.EIO, "reading the journal of %s: %v", session, err)
	}
	return cps, nil
}

// checkCheckpoint returns nil when cp is one of session's checkpoints,
// else ENOENT naming it.
func (f *Feature) checkCheckpoint(session, cp string) error {
	cps, err := f.checkpointList(session)
	if err != nil {
		return err
	}
	for _, c := range cps {
		if c.ID == cp {
			return nil
		}
	}
	return ctltree.Errorf(syscall.ENOENT, "session %s has no checkpoint %q", session, ctltree.Clip(cp))
}

// startOnly reports whether session has no journal log yet (it has
// changed nothing and taken no checkpoint, so nothing wrote the log's
// cp000000): its one checkpoint is then the implicit start, and err is
// ENOENT for any other checkpoint cp names ("" names none). Changes, diff
// and rewind of such a session find nothing to do.
func (f *Feature) startOnly(session, cp string) (bool, error) {
	if !journal.ValidSession(session) {
		return false, nil
	}
	if _, err := os.Stat(f.j.LogPath(session)); !os.IsNotExist(err) {
		return false, nil
	}
	if cp != "" && cp != "cp000000" {
		return true, ctltree.Errorf(syscall.ENOENT, "session %s has no checkpoint %q", session, ctltree.Clip(cp))
	}
	return true, nil
}
