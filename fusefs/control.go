package fusefs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// controlReadme is .rubino/README: the base files. Features plugged in
// (FS.Plug) carry their own help in their own directories.
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

// buildControlTree assembles the base control files and the features'.
func (f *FS) buildControlTree() *ctltree.Dir {
	root := ctltree.NewDir(
		ctltree.Entry{Name: "README", Node: ctltree.Static(fmt.Sprintf(controlReadme, maxCtlErrors, f.cfg.Guard.DenialLogStats().MaxLines, guard.MaxSummaryKeys))},
		ctltree.Entry{Name: "status", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readStatus}},
		ctltree.Entry{Name: "errors", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readErrors}},
		ctltree.Entry{Name: "metrics", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readMetrics}},   // metrics.go
		ctltree.Entry{Name: "accesslog", Node: &ctltree.File{Kind: ctltree.Stream, Open: f.openAccessLog}}, // accesslog.go
		ctltree.Entry{Name: "guard", Node: ctltree.NewDir(
			ctltree.Entry{Name: "denials", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readDenials("")}},
			ctltree.Entry{Name: "denials.summary", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readDenialSummary("")}},
			ctltree.Entry{Name: "tracked", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readTracked}},
			ctltree.Entry{Name: "why", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readWhy}},
		)},
	)
	return root
}

// addCtl adds an entry to the control tree root; call it before mounting.
func (f *FS) addCtl(e ctltree.Entry) {
	f.ctlRoot.Entries = append(f.ctlRoot.Entries, e)
}

// Plug adds a feature to the control tree, the one way features register
// (sessions, journal, agents, compaction; docs/DESIGN.md#ctl-room): its
// entries go under /.rubino in order, a feature that is also a
// ctltree.StatusSource contributes its key to .rubino/status, and one that
// is a ctltree.SessionFeature adds its files to every session's directory
// and its verbs to sessions/NAME/ctl. Call it before mounting; it is not safe to call
// concurrently with requests.
func (f *FS) Plug(feat ctltree.Feature) {
	for _, e := range feat.CtlEntries() {
		f.addCtl(e)
	}
	if sf, ok := feat.(ctltree.SessionFeature); ok {
		f.sessionFeats = append(f.sessionFeats, sf)
	}
	if src, ok := feat.(ctltree.StatusSource); ok {
		f.AddStatus(src.Status)
	}
}

// statusDoc builds the JSON document of .rubino/status: the base keys and
// one key per AddStatus contributor.
func (f *FS) statusDoc() map[string]any {
	doc := map[string]any{
		"version":      f.cfg.Version,
		"workspace":    f.cfg.Workspace,
		"mode":         f.cfg.Guard.Mode().String(),
		"started":      f.started.UTC().Format(time.RFC3339Nano),
		"uptime_s":     time.Since(f.started).Seconds(),
		"pid":          os.Getpid(),
		"unregistered": map[bool]string{true: "allow", false: "guard"}[f.cfg.AllowUnregistered],
		"counts":       f.cfg.Guard.Counts(),
	}
	if f.shadowed {
		doc["shadowed_rubino"] = true
	}
	f.statusMu.Lock()
	extra := append([]StatusFunc(nil), f.statusExtra...)
	f.statusMu.Unlock()
	for _, fn := range extra {
		k, v := fn()
		doc[k] = v
	}
	return doc
}

func (f *FS) readStatus(_ context.Context, _ ctltree.Caller) ([]byte, error) {
	b, err := json.MarshalIndent(f.statusDoc(), "", "  ")
	return append(b, '\n'), err
}

// readErrors lists the failed control writes of the sessions the caller
// may see (mayActOn): a record names paths and reasons of its session.
func (f *FS) readErrors(_ context.Context, c ctltree.Caller) ([]byte, error) {
	recs := f.errs.Records(func(session string) bool { return f.mayActOn(c, session) })
	return ctltree.JSONLines(recs)
}

// readDenials returns a reader of the denial log of session ("" = every
// session the caller may see, mayActOn: a denial names its session's
// paths and command).
func (f *FS) readDenials(session string) func(context.Context, ctltree.Caller) ([]byte, error) {
	return func(_ context.Context, c ctltree.Caller) ([]byte, error) {
		ds := f.cfg.Guard.Denials(session)
		if session == "" && !f.admin(c) {
			kept := ds[:0:0]
			for _, d := range ds {
				if f.mayActOn(c, d.Session) {
					kept = append(kept, d)
				}
			}
			ds = kept
		}
		return ctltree.JSONLines(ds)
	}
}

// readDenialSummary returns a reader of the denial summary of session
// (docs/DESIGN.md#denial-summary), one JSON line; "" = one line for each
// session the caller may see (mayActOn), as readDenials filters the log.
// Access to one session's file is checked by its directory.
func (f *FS) readDenialSummary(session string) func(context.Context, ctltree.Caller) ([]byte, error) {
	return func(_ context.Context, c ctltree.Caller) ([]byte, error) {
		keep := func(name string) bool { return name == session }
		if session == "" {
			keep = func(name string) bool { return f.mayActOn(c, name) }
			if f.admin(c) {
				keep = nil
			}
		}
		return ctltree.JSONLines(f.cfg.Guard.DenialSummaries(keep))
	}
}

// readTracked lists the caller's session's records, one per line:
// STATE HASH PATH, sorted by path.
func (f *FS) readTracked(_ context.Context, c ctltree.Caller) ([]byte, error) {
	return f.trackedText(c, c.Session), nil
}

// trackedText renders session's records for reader c: a record's hash
// is "-" where c could not read the file itself (accessAs; a gone one
// too), docs/DESIGN.md#as-caller.
func (f *FS) trackedText(c ctltree.Caller, session string) []byte {
	recs := f.cfg.Guard.Tracked(session, f.LookupTarget)
	if cr := credsOf(c); cr.Uid != 0 && len(recs) > 0 {
		rels := make([]string, len(recs))
		for i, r := range recs {
			rels[i] = r.Path
		}
		accessAll(f, cr, rels, unix.R_OK, func(i int, err error) {
			if err != nil {
				recs[i].Hash = "-"
			}
		})
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", r.State, r.Hash, r.Path)
	}
	return []byte(b.String())
}

// readWhy returns the caller's session's last denial as one line.
func (f *FS) readWhy(_ context.Context, c ctltree.Caller) ([]byte, error) {
	return f.whyText(c.Session), nil
}

func (f *FS) whyText(session string) []byte {
	ds := f.cfg.Guard.Denials(session)
	if len(ds) == 0 {
		return nil
	}
	d := ds[len(ds)-1]
	return []byte(fmt.Sprintf("%s %s %s: %s\n", d.Time.UTC().Format(time.RFC3339), d.Op, d.Code, d.Message))
}
