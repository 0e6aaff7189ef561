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
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
		{Name: "checkpoints", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: func(_ context.Context, c ctltree.Caller) ([]byte, error) {
			if err := f.mayUseJournal(c, name); err != nil {
				return nil, err
			}
			return f.checkpointsText(name)
		}}},
		{Name: "changes", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: func(_ context.Context, c ctltree.Caller) ([]byte, error) {
			if err := f.mayUseJournal(c, name); err != nil {
				return nil, err
			}
			return f.changesText(c, name, "")
		}}},
		{Name: "journal", Node: &ctltree.File{Kind: ctltree.Clone, Clone: func(c ctltree.Caller, req []byte) (string, error) {
			reply, err := f.journalRequest(c, name, req)
			return strings.TrimSuffix(reply, "\n"), err
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
}

// checkpointsText renders session's checkpoints as JSON lines.
func (f *FS) checkpointsText(session string) ([]byte, error) {
	cps, err := f.checkpointList(session)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, cp := range cps {
		enc.Encode(checkpointInfo{ID: cp.ID, Label: cp.Label, Time: cp.Time, Changes: cp.Changes, Paths: cp.Paths})
	}
	return b.Bytes(), nil
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
	recs, err := j.Records(session)
	if err != nil {
		return nil, ctltree.Errorf(syscall.EIO, "reading the journal of %s: %v", session, err)
	}
	return journal.Checkpoints(recs), nil
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

// changesText renders what session changed since checkpoint since ("":
// the session start) as JSON lines of journal.PathChange, without the
// hashes c may not see (redactChanges).
func (f *FS) changesText(c ctltree.Caller, session, since string) ([]byte, error) {
	if f.cfg.Journal == nil {
		return nil, errJournalOff()
	}
	if none, err := f.startOnly(session, since); none || err != nil {
		return nil, err
	}
	if since != "" {
		if err := f.checkCheckpoint(session, since); err != nil {
			return nil, err
		}
	}
	if !journal.ValidSession(session) {
		return nil, nil
	}
	list, err := f.cfg.Journal.ListChanges(session, since, fsInspector{f})
	if err != nil {
		return nil, journalErr(err)
	}
	f.redactChanges(credsOf(c), list) // docs/DESIGN.md#as-caller
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, pc := range list {
		enc.Encode(pc)
	}
	return b.Bytes(), nil
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

// journalRequest serves one request to session's journal file and
// returns the reply.
func (f *FS) journalRequest(c ctltree.Caller, session string, req []byte) (string, error) {
	if len(req) > maxJournalRequest {
		return "", ctltree.Errorf(syscall.EFBIG, "request of %d bytes exceeds the limit of %d bytes", len(req), maxJournalRequest)
	}
	if f.cfg.Journal == nil {
		return "", errJournalOff()
	}
	if err := f.mayUseJournal(c, session); err != nil {
		return "", err
	}
	line := strings.TrimRight(string(req), "\n")
	verb, rest, _ := strings.Cut(strings.TrimLeft(line, " \t"), " ")
	if verb == "checkpoint" {
		return f.checkpointRequest(session, rest)
	}
	toks, err := splitRequest(rest)
	if err != nil {
		return "", err
	}
	switch verb {
	case "changes":
		a, err := parseJournalArgs(verb, toks, "--since")
		if err != nil {
			return "", err
		}
		b, err := f.changesText(c, session, a.since)
		return string(b), err
	case "diff":
		a, err := parseJournalArgs(verb, toks, "--since", "--")
		if err != nil {
			return "", err
		}
		return f.diffRequest(c, session, a)
	case "rewind":
		a, err := parseJournalArgs(verb, toks, "--to", "--force", "--dry-run", "--")
		if err != nil {
			return "", err
		}
		if a.to == "" {
			return "", ctltree.Errorf(syscall.EINVAL, "rewind: --to CP is required")
		}
		return f.rewindRequest(c, session, a)
	}
	return "", ctltree.Errorf(syscall.EINVAL, "unknown request %q: want checkpoint, changes, diff or rewind", clipReason(verb))
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

// diffRequest renders the unified diff of session's changes.
func (f *FS) diffRequest(c ctltree.Caller, session string, a journalArgs) (string, error) {
	if none, err := f.startOnly(session, a.since); none || err != nil {
		return "", err
	}
	if a.since != "" {
		if err := f.checkCheckpoint(session, a.since); err != nil {
			return "", err
		}
	}
	paths, err := f.requestPaths(c, a.paths)
	if err != nil {
		return "", err
	}
	if !journal.ValidSession(session) {
		return "", nil
	}
	gate := gateInspector{fsInspector{f}, &asChecks{f: f, cr: credsOf(c)}} // bytes c may read only (docs/DESIGN.md#as-caller)
	defer gate.close()
	out, err := f.cfg.Journal.Diff(session, a.since, paths, gate, f.currentBytes)
	if err != nil {
		return "", journalErr(err)
	}
	return out, nil
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
