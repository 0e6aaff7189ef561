package journalctl

// The journal's requests: the journal file's checkpoint, changes, diff and
// rewind, and the checkpoint and rewind verbs of sessions/NAME/ctl.

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/journal"
)

// maxRequest bounds one request to the journal files, in bytes: a longer
// one fails with EFBIG (and a longer ctl command is not the journal's).
const maxRequest = 64 << 10

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

// changesRender checks a changes request of session since checkpoint
// since ("": the session start) and returns what writes the changes as
// JSON lines of journal.PathChange, one path at a time
// (docs/DESIGN.md#ctl-render), without the hashes c may not see
// (Workspace.Redactor, a batch of redactBatch paths at a time).
func (f *Feature) changesRender(c ctltree.Caller, session, since string) (func(io.Writer) error, error) {
	if f.j == nil {
		return nil, errOff()
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
		redact := f.ws.Redactor(c)
		batch := make([]journal.PathChange, 0, redactBatch)
		flush := func() error {
			redact(batch) // docs/DESIGN.md#as-caller
			for _, pc := range batch {
				if err := enc.Encode(pc); err != nil {
					return err
				}
			}
			batch = batch[:0]
			return nil
		}
		err := f.j.EachChange(session, since, f.ws.Inspector(), func(pc journal.PathChange) error {
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

// splitRequest splits a request line into tokens (ctltree.SplitRequest).
func splitRequest(line string) ([]string, error) { return ctltree.SplitRequest(line) }

// args are the options of a journal request.
type args struct {
	since, to     string
	force, dryRun bool
	paths         []string // as the caller wrote them
}

// parseArgs parses the options after a request's verb; allowed names the
// options the verb takes ("--since", "--to", "--force", "--dry-run", "--"
// for paths). EINVAL names the option at fault.
func parseArgs(verb string, toks []string, allowed ...string) (args, error) {
	var a args
	ok := map[string]bool{}
	for _, o := range allowed {
		ok[o] = true
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !ok[t] {
			return a, ctltree.Errorf(syscall.EINVAL, "%s: unknown option %q (want %s)", verb, ctltree.Clip(t), strings.Join(allowed, ", "))
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

// request serves one request to session's journal file: the request is
// checked (and a checkpoint or rewind done) before it returns; the reply
// is what the returned function writes, read back by the handle in order
// (changes and diff render as they are read: docs/DESIGN.md#ctl-render).
func (f *Feature) request(c ctltree.Caller, session string, req []byte) (func(io.Writer) error, error) {
	if len(req) > maxRequest {
		return nil, ctltree.Errorf(syscall.EFBIG, "request of %d bytes exceeds the limit of %d bytes", len(req), maxRequest)
	}
	if f.j == nil {
		return nil, errOff()
	}
	if err := f.mayUse(c, session); err != nil {
		return nil, err
	}
	line := strings.TrimRight(string(req), "\n")
	verb, rest, _ := strings.Cut(strings.TrimLeft(line, " \t"), " ")
	if verb == "checkpoint" {
		id, err := f.checkpoint(session, rest)
		return textReply(id), err
	}
	toks, err := splitRequest(rest)
	if err != nil {
		return nil, err
	}
	switch verb {
	case "changes":
		a, err := parseArgs(verb, toks, "--since")
		if err != nil {
			return nil, err
		}
		return f.changesRender(c, session, a.since)
	case "diff":
		a, err := parseArgs(verb, toks, "--since", "--")
		if err != nil {
			return nil, err
		}
		return f.diff(c, session, a)
	case "rewind":
		a, err := parseArgs(verb, toks, "--to", "--force", "--dry-run", "--")
		if err != nil {
			return nil, err
		}
		if a.to == "" {
			return nil, ctltree.Errorf(syscall.EINVAL, "rewind: --to CP is required")
		}
		reply, err := f.rewind(c, session, a)
		return textReply(reply), err
	}
	return nil, ctltree.Errorf(syscall.EINVAL, "unknown request %q: want checkpoint, changes, diff or rewind", ctltree.Clip(verb))
}

// checkpoint takes a checkpoint of session labelled rest (the rest of the
// line, unquoted when it is one Go-quoted string) and returns its id.
func (f *Feature) checkpoint(session, rest string) (string, error) {
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
		return "", ctltree.Errorf(syscall.EINVAL, "session %q cannot have a journal", ctltree.Clip(session))
	}
	rec, err := f.j.Checkpoint(session, label)
	f.ws.Checkpointed()
	if err != nil {
		return "", ctltree.Errorf(syscall.EIO, "checkpoint of %s: %v", session, err)
	}
	return rec.ID + "\n", nil
}

// paths resolves the PATHs of a request as c names them.
func (f *Feature) paths(c ctltree.Caller, ps []string) ([]string, error) {
	var out []string
	for _, p := range ps {
		rel, err := f.host.CallerRel(c, p)
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

// diff checks a diff request and returns what writes the unified diff of
// session's changes, one path at a time.
func (f *Feature) diff(c ctltree.Caller, session string, a args) (func(io.Writer) error, error) {
	if none, err := f.startOnly(session, a.since); none || err != nil {
		return noReply, err
	}
	if a.since != "" {
		if err := f.checkCheckpoint(session, a.since); err != nil {
			return nil, err
		}
	}
	paths, err := f.paths(c, a.paths)
	if err != nil {
		return nil, err
	}
	if !journal.ValidSession(session) {
		return noReply, nil
	}
	return func(w io.Writer) error {
		gate, done := f.ws.ReaderGate(c) // bytes c may read only (docs/DESIGN.md#as-caller)
		defer done()
		if err := f.j.DiffTo(w, session, a.since, paths, gate, f.ws.CurrentBytes); err != nil {
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

// rewind plans and (unless a dry run) applies the rewind of session to
// a.to, and returns the reply as one JSON object.
func (f *Feature) rewind(c ctltree.Caller, session string, a args) (string, error) {
	none, err := f.startOnly(session, a.to)
	if err != nil {
		return "", err
	}
	plan, res := journal.Plan{Session: session, To: a.to, Steps: []journal.Step{}}, journal.Result{}
	if !none { // a session without a log has nothing to rewind (and takes no checkpoint)
		if err := f.checkCheckpoint(session, a.to); err != nil {
			return "", err
		}
		paths, err := f.paths(c, a.paths)
		if err != nil {
			return "", err
		}
		plan, res, err = f.ws.Rewind(session, a.to, journal.RewindOptions{Paths: paths, Force: a.force}, a.dryRun, c)
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

// SessionCtl runs the journal's commands of sessions/NAME/ctl:
// "checkpoint [LABEL]" and "rewind CP [--force] [--dry-run] [-- PATH...]".
// handled is false for any other verb, and for a command over the
// request limit (the session's own verbs refuse it).
func (f *Feature) SessionCtl(c ctltree.Caller, session string, cmd []byte) (handled bool, err error) {
	if len(cmd) > maxRequest {
		return false, nil
	}
	verb, rest, _ := strings.Cut(strings.TrimLeft(string(cmd), " \t"), " ")
	if verb != "checkpoint" && verb != "rewind" {
		return false, nil
	}
	if f.j == nil {
		return true, errOff()
	}
	if err := f.mayUse(c, session); err != nil {
		return true, err
	}
	if verb == "checkpoint" {
		_, err := f.checkpoint(session, rest)
		return true, err
	}
	toks, err := splitRequest(rest)
	if err != nil {
		return true, err
	}
	if len(toks) == 0 || strings.HasPrefix(toks[0], "-") {
		return true, ctltree.Errorf(syscall.EINVAL, "rewind: want `rewind CP [--force] [--dry-run] [-- PATH...]`")
	}
	a, err := parseArgs("rewind", toks[1:], "--force", "--dry-run", "--")
	if err != nil {
		return true, err
	}
	a.to = toks[0]
	_, err = f.rewind(c, session, a)
	return true, err
}
