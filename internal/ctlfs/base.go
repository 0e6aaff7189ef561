package ctlfs

// The base files of /.rubino: README, status, errors, and guard/ (the
// caller's session's read records and denials), with the per-session
// copies of the guard files the sessions feature shows in
// sessions/NAME/ (GuardFiles).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
)

// controlReadme is .rubino/README: the base files. Features plugged in
// (Tree.Plug) carry their own help in their own directories.
const controlReadme = `rubinofs control tree

This directory is virtual: it is never created in the workspace, and the
mount root does not list it (recursive tools and git never see it); reach it
by name. Read files
with cat; drive ctl and clone files with echo. A write that fails returns an
errno, and reading the same handle again returns "error: REASON" once; the
errors file keeps the last %d failures of every caller.

  README           this file
  status           JSON: version, workspace, mode, uptime, counters, watcher
  errors           JSON lines: {time, session, pid, path, errno, message}
  metrics          Prometheus text format: FUSE ops and latencies, guard
                   decisions, hash cache, watcher, tasks, compactions
  accesslog        one line per FUSE operation, streamed to each reader
                   (cat it; "#" heartbeat lines when idle; a reader opened
                   with O_NONBLOCK gets EAGAIN when nothing is pending)
  guard/denials    JSON lines of refused (or, in warn mode, would-be refused)
                   mutations: {time, session, pid, comm, op, path, code,
                   message}, the newest %d
  guard/denials.summary
                   JSON lines, one per session: {session, denials,
                   warnings, other, entries: [{path, code, count, last}]},
                   every refusal counted, at most %d entries a session
  guard/tracked    the caller's session's read records: path, state, hash
  guard/why        the caller's session's last denial, one line
  policy           JSON: the accepted ignore rules and those waiting; the
                   mount owner writes "reload" from outside every session
                   to accept them (owner and root only)

Nothing here can loosen the guard from inside the mount.
`

// baseTree assembles the base control files; the policy file and the
// features are added after them (New, Plug).
func (t *Tree) baseTree() *ctltree.Dir {
	entries := []ctltree.Entry{
		{Name: "README", Node: ctltree.Static(t.readme())},
		{Name: "status", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.readStatus}},
		{Name: "errors", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.readErrors}},
	}
	entries = append(entries, t.cfg.Observed...) // metrics, accesslog (internal/observe)
	entries = append(entries, ctltree.Entry{Name: "guard", Node: ctltree.NewDir(
		ctltree.Entry{Name: "denials", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.Denials("")}},
		ctltree.Entry{Name: "denials.summary", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.DenialSummary("")}},
		ctltree.Entry{Name: "tracked", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.readTracked}},
		ctltree.Entry{Name: "why", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.readWhy}},
	)})
	return ctltree.NewDir(entries...)
}

// GuardFiles are the guard files of session's directory,
// .rubino/sessions/NAME/ (docs/DESIGN.md#sessions), in this order:
// tracked (Tracked), denials (Denials), denials.summary (DenialSummary)
// and why (Why). Access to the directory is checked by the sessions
// feature, not here.
func (t *Tree) GuardFiles(session string) []ctltree.Entry {
	return []ctltree.Entry{
		{Name: "tracked", Node: ctltree.Text(func(c ctltree.Caller) string { return string(t.Tracked(c, session)) })},
		{Name: "denials", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.Denials(session)}},
		{Name: "denials.summary", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: t.DenialSummary(session)}},
		{Name: "why", Node: ctltree.Text(func(ctltree.Caller) string { return string(t.Why(session)) })},
	}
}

// statusDoc builds the JSON document of .rubino/status: the base keys and
// one key per AddStatus contributor.
func (t *Tree) statusDoc() map[string]any {
	g := t.cfg.Guard
	doc := map[string]any{
		"version":      t.cfg.Version,
		"workspace":    t.cfg.Workspace,
		"mode":         g.Mode().String(),
		"started":      t.cfg.Started.UTC().Format(time.RFC3339Nano),
		"uptime_s":     time.Since(t.cfg.Started).Seconds(),
		"pid":          os.Getpid(),
		"unregistered": map[bool]string{true: "allow", false: "guard"}[t.cfg.AllowUnregistered],
		"counts":       g.Counts(),
	}
	if t.cfg.Shadowed {
		doc["shadowed_rubino"] = true
	}
	t.statusMu.Lock()
	extra := append([]StatusFunc(nil), t.statusExtra...)
	t.statusMu.Unlock()
	for _, fn := range extra {
		k, v := fn()
		doc[k] = v
	}
	return doc
}

// readStatus renders the status document for c. A caller who is not an
// admin (Host.Admin) sees of the journal's per-session entries only those
// of sessions it may act on (Host.MayActOn), and no last_error, whose
// reason may name another session's path: the status file is everyone's
// on an allow_other mount (docs/DESIGN.md#session-names).
func (t *Tree) readStatus(_ context.Context, c ctltree.Caller) ([]byte, error) {
	doc := t.statusDoc()
	if !t.host.Admin(c) {
		if j, ok := doc["journal"].(map[string]any); ok {
			delete(j, "last_error")
			if stopped, ok := j["stopped"].(map[string]string); ok {
				mine := map[string]string{}
				for name, why := range stopped {
					if t.host.MayActOn(c, name) {
						mine[name] = why
					}
				}
				if len(mine) == 0 {
					delete(j, "stopped")
				} else {
					j["stopped"] = mine
				}
			}
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

// readErrors lists the failed control writes of the sessions the caller
// may see (Host.MayActOn): a record names paths and reasons of its
// session.
func (t *Tree) readErrors(_ context.Context, c ctltree.Caller) ([]byte, error) {
	recs := t.errs.Records(func(session string) bool { return t.host.MayActOn(c, session) })
	return ctltree.JSONLines(recs)
}

// Denials returns a reader of the denial log of session ("" = every
// session the caller may see, Host.MayActOn: a denial names its session's
// paths and command), JSON lines.
func (t *Tree) Denials(session string) func(context.Context, ctltree.Caller) ([]byte, error) {
	return func(_ context.Context, c ctltree.Caller) ([]byte, error) {
		ds := t.cfg.Guard.Denials(session)
		if session == "" && !t.host.Admin(c) {
			kept := ds[:0:0]
			for _, d := range ds {
				if t.host.MayActOn(c, d.Session) {
					kept = append(kept, d)
				}
			}
			ds = kept
		}
		return ctltree.JSONLines(ds)
	}
}

// DenialSummary returns a reader of the denial summary of session
// (docs/DESIGN.md#denial-summary), one JSON line; "" = one line for each
// session the caller may see (Host.MayActOn), as Denials filters the log.
// Access to one session's file is checked by its directory.
func (t *Tree) DenialSummary(session string) func(context.Context, ctltree.Caller) ([]byte, error) {
	return func(_ context.Context, c ctltree.Caller) ([]byte, error) {
		keep := func(name string) bool { return name == session }
		if session == "" {
			keep = func(name string) bool { return t.host.MayActOn(c, name) }
			if t.host.Admin(c) {
				keep = nil
			}
		}
		return ctltree.JSONLines(t.cfg.Guard.DenialSummaries(keep))
	}
}

// readTracked lists the caller's session's records, one per line:
// STATE HASH PATH, sorted by path.
func (t *Tree) readTracked(_ context.Context, c ctltree.Caller) ([]byte, error) {
	return t.Tracked(c, c.Session), nil
}

// Tracked renders session's records for reader c, one per line: STATE
// HASH PATH, tab-separated, sorted by path. A record's hash is "-" where c
// could not read the file itself (Host.Tracked; a gone one too),
// docs/DESIGN.md#as-caller. A PATH holding a tab, a newline, another
// control byte or a byte that is not UTF-8, or starting with a double
// quote, is written Go-quoted (strconv.Quote), so a file's name never
// makes a line or a field of its own.
func (t *Tree) Tracked(c ctltree.Caller, session string) []byte {
	var b strings.Builder
	for _, r := range t.host.Tracked(c, session) {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", r.State, r.Hash, linePath(r.Path))
	}
	return []byte(b.String())
}

// linePath is path as a line-based control file writes it (Tracked):
// itself, or Go-quoted when it holds a control byte or a byte that is not
// UTF-8, or starts with a double quote.
func linePath(path string) string {
	if strings.HasPrefix(path, `"`) || !utf8.ValidString(path) || strings.IndexFunc(path, unicode.IsControl) >= 0 {
		return strconv.Quote(path)
	}
	return path
}

// readWhy returns the caller's session's last denial as one line.
func (t *Tree) readWhy(_ context.Context, c ctltree.Caller) ([]byte, error) {
	return t.Why(c.Session), nil
}

// Why returns session's last denial as one line: TIME OP CODE: MESSAGE
// (nothing when it has none), a newline of a name in MESSAGE written \n.
func (t *Tree) Why(session string) []byte {
	ds := t.cfg.Guard.Denials(session)
	if len(ds) == 0 {
		return nil
	}
	d := ds[len(ds)-1]
	msg := strings.NewReplacer("\n", "\\n", "\r", "\\r").Replace(d.Message) // a name's newline stays in the one line
	return []byte(fmt.Sprintf("%s %s %s: %s\n", d.Time.UTC().Format(time.RFC3339), d.Op, d.Code, msg))
}
