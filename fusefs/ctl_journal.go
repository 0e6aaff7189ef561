package fusefs

// The journal's control files under .rubino/sessions/NAME/
// (docs/DESIGN.md#journal-hook):
//
//   checkpoints  JSON lines {"id","label","time","changes","paths"}, oldest
//                first
//   changes      JSON lines of journal.PathChange since the session start
//   journal      request file: open O_RDWR, write one request, read the
//                reply from offset 0 of the same handle:
//                  checkpoint [LABEL]                       -> "ID\n"
//                  changes [--since CP]                     -> JSON lines
//                  diff [--since CP] [-- PATH...]           -> unified diff
//                  rewind --to CP [--force] [--dry-run] [-- PATH...]
//                      -> {"dry_run":B,"plan":PLAN,"result":RESULT}
//   ctl          also takes "checkpoint [LABEL]" and
//                "rewind CP [--force] [--dry-run] [-- PATH...]"
//
// Tokens are separated by spaces; a token may be a Go-quoted string
// (strconv.Quote) for a name with spaces or odd bytes. A PATH is absolute
// inside the mount or relative to the writer's cwd (callerRel). Errors:
// EINVAL with a reason naming the option; ENOENT for an unknown
// checkpoint; EOPNOTSUPP "the journal is off (--journal=false)"; EPERM for
// a caller that may not act on the session (FS.mayActOn), for every file;
// EACCES for a rewind step the requester could not make itself. A diff
// withholds the bytes, and changes the hashes, the requester could not
// read itself (docs/DESIGN.md#as-caller).

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/journal"
)

// maxJournalRequest bounds one request to the journal files, in bytes.
const maxJournalRequest = 64 << 10

// errJournalOff is the answer of every journal control file with the
// journal off.
func errJournalOff() error {
	return ctltree.Errorf(syscall.EOPNOTSUPP, "the journal is off (--journal=false)")
}

// journalEntries are the journal's files in session name's directory.
func (f *FS) journalEntries(name string) []ctltree.Entry {
	return []ctltree.Entry{
		{Name: "checkpoints", Node: &ctltree.File{Kind: ctltree.ReadOnly, Render: func(c ctltree.Caller, w io.Writer) error {
			if err := f.mayUseJournal(c, name); err != nil {
				return err
			}
			return f.writeCheckpoints(w, name)
		}}},
		{Name: "changes", Node: &ctltree.File{Kind: ctltree.ReadOnly, Render: func(c ctltree.Caller, w io.Writer) error {
			if err := f.mayUseJournal(c, name); err != nil {
				return err
			}
			render, err := f.changesRender(c, name, "")
			if err != nil {
				return err
			}
			return render(w)
		}}},
		{Name: "journal", Node: &ctltree.File{Kind: ctltree.Clone, CloneRender: func(c ctltree.Caller, req []byte) (func(io.Writer) error, error) {
			return f.journalRequest(c, name, req)
		}}},
	}
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
func (f *FS) writeCheckpoints(w io.Writer, session string) error {
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
func (f *FS) checkpointList(session string) ([]journal.CheckpointInfo, error) {
	j := f.cfg.Journal
	if j == nil {
		return nil, errJournalOff()
	}
	if !journal.ValidSession(session) {
		return nil, nil
	}
	cps, err := j.CheckpointList(session)
	if err != nil {
		return nil, ctltree.Errorf(syscall.EIO, "reading the journal of %s: %v", session, err)
	}
	return cps, nil
}

// checkCheckpoint returns nil when cp is one of session's checkpoints,
// else ENOENT naming it.
func (f *FS) checkCheckpoint(session, cp string) error {
	cps, err := f.checkpointList(session)
	if err != nil {
		return err
	}
	for _, c := range cps {
		if c.ID == cp {
			return nil
		}
	}
	return ctltree.Errorf(syscall.ENOENT, "session %s has no checkpoint %q", session, clipReason(cp))
}

// hasLog reports whether the journal is on and session has a log in it.
func (f *FS) hasLog(session string) bool {
	if f.cfg.Journal == nil || !journal.ValidSession(session) {
		return false
	}
	_, err := os.Stat(f.cfg.Journal.LogPath(session))
	return err == nil
}

// startOnly reports whether session has no journal log yet (it has
// changed nothing and taken no checkpoint, so nothing wrote the log's
// cp000000): its one checkpoint is then the implicit start, and err is
// ENOENT for any other checkpoint cp names ("" names none). Changes, diff
// and rewind of such a session find nothing to do.
func (f *FS) startOnly(session, cp string) (bool, error) {
	if !journal.ValidSession(session) {
		return false, nil
	}
	if _, err := os.Stat(f.cfg.Journal.LogPath(session)); !os.IsNotExist(err) {
		return false, nil
	}
	if cp != "" && cp != "cp000000" {
		return true, ctltree.Errorf(syscall.ENOENT, "session %s has no checkpoint %q", session, clipReason(cp))
	}
	return true, nil
}

// changesRender checks a changes request of session since checkpoint
// since ("": the session start) and returns what writes the changes as
// JSON lines of journal.PathChange, one path at a time
// (docs/DESIGN.md#ctl-render), without the hashes c may not see
// (redactChanges, a batch of redactBatch paths at a time).
func (f *FS) changesRender(c ctltree.Caller, session, since string) (func(io.Writer) error, error) {
	if f.cfg.Journal == nil {
		return nil, errJournalOff()
	}
	if none, err := f.startOnly(session, since); none || err != nil {
		return noReply, err
	}
	if since != "" {
		if err := f.checkCheckpoint(session, since); err != nil {
			return nil, err
		}
	}
	if !journal.ValidSession(session) {
		return noReply, nil
	}
	return func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		cr := credsOf(c)
		batch := make([]journal.PathChange, 0, redactBatch)
		flush := func() error {
			f.redactChanges(cr, batch) // docs/DESIGN.md#as-caller
			for _, pc := range batch {
				if err := enc.Encode(pc); err != nil {
					return err
				}
			}
			batch = batch[:0]
			return nil
		}
		err := f.cfg.Journal.EachChange(session, since, fsInspector{f}, func(pc journal.PathChange) error {
			if batch = append(batch, pc); len(batch) == redactBatch {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return journalErr(err)
		}
		return nil
	}, nil
}

// redactBatch is how many changes a streamed changes reply checks against
// the requester's access at once: one credential-switched thread serves a
// batch (docs/DESIGN.md#as-caller), and the reply holds no more than a
// batch in memory (docs/DESIGN.md#ctl-render).
const redactBatch = 256

// noReply writes nothing; textReply writes s.
func noReply(io.Writer) error { return nil }

func textReply(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// journalErr maps an error of the rewind engine to the control file's
// errno: a *ctltree.Error's own, EIO otherwise (with the reason).
func journalErr(err error) error {
	var ce *ctltree.Error
	if errors.As(err, &ce) {
		return err
	}
	return ctltree.Errorf(syscall.EIO, "%v", err)
}

// mayUseJournal authorises c for session's journal files, requests and
// ctl commands: mayActOn (the session itself; the mount's owner or root
// from outside every session; a caller outside every session for the
// sessions its uid owns); EPERM otherwise (docs/DESIGN.md#as-caller).
func (f *FS) mayUseJournal(c ctltree.Caller, session string) error {
	if f.mayActOn(c, session) {
		return nil
	}
	return ctltree.Errorf(syscall.EPERM, "uid %d in session %s may not use the journal of session %s", c.Uid, c.Session, session)
}

// splitRequest splits a request line into tokens: runs of non-space
// bytes, or Go-quoted strings. EINVAL for a malformed quoted token, NUL
// bytes or invalid UTF-8.
func splitRequest(line string) ([]string, error) {
	if !utf8.ValidString(line) || strings.IndexByte(line, 0) >= 0 {
		return nil, ctltree.Errorf(syscall.EINVAL, "request is not UTF-8 text without NUL bytes")
	}
	var out []string
	for {
		line = strings.TrimLeft(line, " \t\r\n")
		if line == "" {
			return out, nil
		}
		if line[0] == '"' || line[0] == '`' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, ctltree.Errorf(syscall.EINVAL, "malformed quoted token at %q", clipReason(line))
			}
			s, _ := strconv.Unquote(q)
			out = append(out, s)
			line = line[len(q):]
			if line != "" && !strings.ContainsRune(" \t\r\n", rune(line[0])) {
				return nil, ctltree.Errorf(syscall.EINVAL, "junk after the quoted token %s", clipReason(q))
			}
			continue
		}
		i := strings.IndexAny(line, " \t\r\n")
		if i < 0 {
			i = len(line)
		}
		out = append(out, line[:i])
		line = line[i:]
	}
}

// journalArgs are the options of a journal request.
type journalArgs struct {
	since, to     string
	force, dryRun bool
	paths         []string // as the caller wrote them
	label         string
}

// parseJournalArgs parses the options after a request's verb; allowed
// names the options the verb takes ("--since", "--to", "--force",
// "--dry-run", "--" for paths). EINVAL names the option at fault.
func parseJournalArgs(verb string, toks []string, allowed ...string) (journalArgs, error) {
	var a journalArgs
	ok := map[string]bool{}
	for _, o := range allowed {
		ok[o] = true
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !ok[t] {
			return a, ctltree.Errorf(syscall.EINVAL, "%s: unknown option %q (want %s)", verb, clipReason(t), strings.Join(allowed, ", "))
		}
		switch t {
		case "--":
			a.paths = append([]string{}, toks[i+1:]...)
			if len(a.paths) == 0 {
				return a, ctltree.Errorf(syscall.EINVAL, "%s: -- must be followed by at least one PATH", verb)
			}
			return a, nil
		case "--force":
			a.force = true
		case "--dry-run":
			a.dryRun = true
		case "--since", "--to":
			if i+1 >= len(toks) || toks[i+1] == "" {
				return a, ctltree.Errorf(syscall.EINVAL, "%s: %s needs a checkpoint id", verb, t)
			}
			i++
			if t == "--since" {
				a.since = toks[i]
			} else {
				a.to = toks[i]
			}
		}
	}
	return a, nil
}

// journalRequest serves one request to session's journal file: the
// request is checked (and a checkpoint or rewind done) before it returns;
// the reply is what the returned function writes, read back by the
// handle in order (changes and diff render as they are read:
// docs/DESIGN.md#ctl-render).
func (f *FS) journalRequest(c ctltree.Caller, session string, req []byte) (func(io.Writer) error, error) {
	if len(req) > maxJournalRequest {
		return nil, ctltree.Errorf(syscall.EFBIG, "request of %d bytes exceeds the limit of %d bytes", len(req), maxJournalRequest)
	}
	if f.cfg.Journal == nil {
		return nil, errJournalOff()
	}
	if err := f.mayUseJournal(c, session); err != nil {
		return nil, err
	}
	line := strings.TrimRight(string(req), "\n")
	verb, rest, _ := strings.Cut(strings.TrimLeft(line, " \t"), " ")
	if verb == "checkpoint" {
		id, err := f.checkpointRequest(session, rest)
		return textReply(id), err
	}
	toks, err := splitRequest(rest)
	if err != nil {
		return nil, err
	}
	switch verb {
	case "changes":
		a, err := parseJournalArgs(verb, toks, "--since")
		if err != nil {
			return nil, err
		}
		return f.changesRender(c, session, a.since)
	case "diff":
		a, err := parseJournalArgs(verb, toks, "--since", "--")
		if err != nil {
			return nil, err
		}
		return f.diffRequest(c, session, a)
	case "rewind":
		a, err := parseJournalArgs(verb, toks, "--to", "--force", "--dry-run", "--")
		if err != nil {
			return nil, err
		}
		if a.to == "" {
			return nil, ctltree.Errorf(syscall.EINVAL, "rewind: --to CP is required")
		}
		reply, err := f.rewindRequest(c, session, a)
		return textReply(reply), err
	}
	return nil, ctltree.Errorf(syscall.EINVAL, "unknown request %q: want checkpoint, changes, diff or rewind", clipReason(verb))
}

// checkpointRequest takes a checkpoint of session labelled rest (the rest
// of the line, unquoted when it is one Go-quoted string) and returns its
// id.
func (f *FS) checkpointRequest(session, rest string) (string, error) {
	label := strings.TrimSpace(rest)
	if !utf8.ValidString(label) || strings.IndexByte(label, 0) >= 0 {
		return "", ctltree.Errorf(syscall.EINVAL, "checkpoint: LABEL is not UTF-8 text without NUL bytes")
	}
	if strings.HasPrefix(label, `"`) {
		if s, err := strconv.Unquote(label); err == nil {
			label = s
		}
	}
	if !journal.ValidSession(session) {
		return "", ctltree.Errorf(syscall.EINVAL, "session %q cannot have a journal", clipReason(session))
	}
	rec, err := f.cfg.Journal.Checkpoint(session, label)
	f.journalCheckpointed()
	if err != nil {
		return "", ctltree.Errorf(syscall.EIO, "checkpoint of %s: %v", session, err)
	}
	return rec.ID + "\n", nil
}

// requestPaths resolves the PATHs of a request as c names them.
func (f *FS) requestPaths(c ctltree.Caller, ps []string) ([]string, error) {
	var out []string
	for _, p := range ps {
		rel, err := f.callerRel(c, p)
		if err != nil {
			return nil, err
		}
		if rel == "." {
			rel = ""
		}
		out = append(out, rel)
	}
	return out, nil
}

// diffRequest checks a diff request and returns what writes the unified
// diff of session's changes, one path at a time.
func (f *FS) diffRequest(c ctltree.Caller, session string, a journalArgs) (func(io.Writer) error, error) {
	if none, err := f.startOnly(session, a.since); none || err != nil {
		return noReply, err
	}
	if a.since != "" {
		if err := f.checkCheckpoint(session, a.since); err != nil {
			return nil, err
		}
	}
	paths, err := f.requestPaths(c, a.paths)
	if err != nil {
		return nil, err
	}
	if !journal.ValidSession(session) {
		return noReply, nil
	}
	return func(w io.Writer) error {
		gate := gateInspector{fsInspector{f}, &asChecks{f: f, cr: credsOf(c)}} // bytes c may read only (docs/DESIGN.md#as-caller)
		defer gate.close()
		if err := f.cfg.Journal.DiffTo(w, session, a.since, paths, gate, f.currentBytes); err != nil {
			return journalErr(err)
		}
		return nil
	}, nil
}

// rewindReply is the reply of a rewind request.
type rewindReply struct {
	DryRun bool            `json:"dry_run"`
	Plan   journal.Plan    `json:"plan"`
	Result *journal.Result `json:"result,omitempty"`
}

// rewindRequest plans and (unless a dry run) applies the rewind of
// session to a.to, and returns the reply as one JSON object.
func (f *FS) rewindRequest(c ctltree.Caller, session string, a journalArgs) (string, error) {
	none, err := f.startOnly(session, a.to)
	if err != nil {
		return "", err
	}
	plan, res := journal.Plan{Session: session, To: a.to, Steps: []journal.Step{}}, journal.Result{}
	if !none { // a session without a log has nothing to rewind (and takes no checkpoint)
		if err := f.checkCheckpoint(session, a.to); err != nil {
			return "", err
		}
		paths, err := f.requestPaths(c, a.paths)
		if err != nil {
			return "", err
		}
		plan, res, err = f.Rewind(session, a.to, journal.RewindOptions{Paths: paths, Force: a.force}, a.dryRun, c)
		if err != nil {
			return "", journalErr(err)
		}
	}
	reply := rewindReply{DryRun: a.dryRun, Plan: plan}
	if !a.dryRun {
		reply.Result = &res
	}
	b, _ := json.Marshal(reply)
	return string(b) + "\n", nil
}

// journalCtl runs the journal's commands of sessions/NAME/ctl:
// "checkpoint [LABEL]" and "rewind CP [--force] [--dry-run] [-- PATH...]".
// handled is false for any other verb.
func (f *FS) journalCtl(c ctltree.Caller, session, line string) (handled bool, err error) {
	verb, rest, _ := strings.Cut(strings.TrimLeft(line, " \t"), " ")
	if verb != "checkpoint" && verb != "rewind" {
		return false, nil
	}
	if f.cfg.Journal == nil {
		return true, errJournalOff()
	}
	if err := f.mayUseJournal(c, session); err != nil {
		return true, err
	}
	if verb == "checkpoint" {
		_, err := f.checkpointRequest(session, rest)
		return true, err
	}
	toks, err := splitRequest(rest)
	if err != nil {
		return true, err
	}
	if len(toks) == 0 || strings.HasPrefix(toks[0], "-") {
		return true, ctltree.Errorf(syscall.EINVAL, "rewind: want `rewind CP [--force] [--dry-run] [-- PATH...]`")
	}
	a, err := parseJournalArgs("rewind", toks[1:], "--force", "--dry-run", "--")
	if err != nil {
		return true, err
	}
	a.to = toks[0]
	_, err = f.rewindRequest(c, session, a)
	return true, err
}
