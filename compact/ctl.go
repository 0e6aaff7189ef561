package compact

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/sessions"
)

// ctlReadme is .rubino/compact/README.
const ctlReadme = `rubinofs compaction: a session store you feed and compact through files

  new                    clone: open read-write, write options as one JSON object
                         ({"model":"gpt-4o","context_window":200000,"tokenizer":"",
                         "title":""}; an empty line means the defaults), then read
                         the new session's id from the same handle
  resolve                clone: write an id or a unique prefix (4+ hex digits),
                         read the full id (ENOENT unknown, EINVAL ambiguous)
  list                   JSON lines: every session you may see (your uid's; the
                         mount owner and root outside every agent session see
                         all) with its owner, bytes, counts and children
  config                 the effective compaction config (compact.json in the
                         state directory; not writable from the mount)
  sessions/ID/           one session; ID may be a unique prefix
    messages             append JSON lines in OpenAI chat-message form
                         ({"role":"user","content":"..."}, tool_calls,
                         tool_call_id); a malformed line fails the write with
                         EINVAL naming the line, and nothing of it is stored;
                         read it for the transcript
    status               JSON: messages, tokens, window, threshold,
                         needs_compaction (and reason, detail when it is false
                         above the threshold), thrashing, compacted_into
    ctl                  write "compact" (skipped when thrashing) or "force";
                         below the threshold both are a no-op, and so is a
                         compaction that would not shrink the session;
                         "delete" removes the session and the sessions
                         compacted from it
    result               JSON of the last compaction request on this session:
                         saved_tokens is net (tokens before minus after, the
                         summary included), removed_tokens the middle removed;
                         a no-op gives its reason and detail
    summary              the latest summary this session produced or holds
    lineage              JSON lines from the root session to this one, then the
                         sessions compacted from it

A compaction keeps the head and a recent tail, summarises the middle into a
new child session (parent_session_id = this one) and never splits a tool call
from its result. Continue in the child: result.target_session_id. A summary
about as large as the middle it would replace is not committed, even by
"force": the result says "would_not_shrink", with both token counts.

A session belongs to the uid that created it (a compacted child to its
parent's owner): only that uid, and the mount owner or root outside every
agent session, may list, read, append to, compact or delete it. A session
holds at most compact.max_transcript_bytes (an append past it fails with
EFBIG and stores nothing: compact, then continue in the child); a uid owns
at most compact.max_transcripts_per_uid sessions (EAGAIN past it), holding
at most compact.max_bytes_per_uid together (EFBIG past it).
`

// maxResults bounds the in-memory table of last results.
const maxResults = 4096

// Service serves .rubino/compact over a Store and a Compressor. Safe for
// concurrent use. Results live in memory (the last per session, at most
// 4,096 sessions), so a failed request never writes to the store.
type Service struct {
	store  *Store
	comp   *Compressor
	log    *slog.Logger
	ctx    context.Context // cancelled by Close: in-flight summaries stop
	cancel context.CancelFunc
	owned  bool // Close closes the store

	resMu   sync.Mutex
	results map[string]Result
	order   []string
}

// NewService serves comp's store. Close does not close the store. logger
// receives structured records (nil: text to stderr): a store that cannot
// be listed at level error; a failed compaction at level error (the store
// or the summarizer failed), warn (the summarizer timed out) or debug (the
// caller's mistake: an unknown id, an oversized input; the caller gets the
// errno and .rubino/errors the reason).
func NewService(comp *Compressor, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{store: comp.store, comp: comp, log: logger, ctx: ctx, cancel: cancel, results: map[string]Result{}}
}

// Open is the daemon's entry point: it opens the store at
// stateDir/compact.db (a temporary store removed on Close when stateDir is
// "") and serves it with cfg, the effective configuration (through
// WithDefaults and Validate: package config merged compact.json with the
// TOML files and the daemon hands the result over). Open reads no
// configuration file or variable of its own (docs/DESIGN.md#options-table).
// Errors: a store that cannot be opened, a config the compressor refuses.
func Open(stateDir string, cfg Config, logger *slog.Logger) (*Service, error) {
	var (
		store *Store
		err   error
	)
	if stateDir == "" {
		store, err = OpenTempStore()
	} else {
		store, err = OpenStore(filepath.Join(stateDir, "compact.db"))
	}
	if err != nil {
		return nil, err
	}
	comp, err := NewCompressor(store, cfg)
	if err != nil {
		store.Close()
		return nil, err
	}
	s := NewService(comp, logger)
	s.owned = true
	return s, nil
}

// Compressor returns the service's compressor.
func (s *Service) Compressor() *Compressor { return s.comp }

// Close cancels in-flight compactions and, for a service from Open, closes
// the store. Call it after unmounting.
func (s *Service) Close() error {
	s.cancel()
	if s.owned {
		return s.store.Close()
	}
	return nil
}

// ctlErrnos maps the package's errors to the errnos a control-file caller
// sees: ErrNotFound → ENOENT; ErrBadID, ErrAmbiguous → EINVAL; ErrLimit,
// ErrTooLarge → EFBIG; ErrTooMany → EAGAIN; ErrNotYours → EACCES; ErrSummarizerTimeout and an expired request deadline → ETIMEDOUT
// (a rule, so it comes before the table's common tail, which would give
// EINTR); a cancelled request → EINTR; any other failure (summarizer, flush
// hook, database) → EIO with its message.
var ctlErrnos = ctltree.ErrnoTable{Rules: []ctltree.ErrnoRule{
	ctltree.Is(ErrNotFound, syscall.ENOENT),
	ctltree.Is(ErrBadID, syscall.EINVAL),
	ctltree.Is(ErrAmbiguous, syscall.EINVAL),
	ctltree.Is(ErrLimit, syscall.EFBIG),
	ctltree.Is(ErrTooLarge, syscall.EFBIG),
	ctltree.Is(ErrTooMany, syscall.EAGAIN),
	ctltree.Is(ErrNotYours, syscall.EACCES),
	ctltree.Is(ErrSummarizerTimeout, syscall.ETIMEDOUT),
	ctltree.Is(context.DeadlineExceeded, syscall.ETIMEDOUT),
}}

// compactErrLevel is the log level of a failed compaction: debug for the
// caller's mistakes and an interrupted request (the caller gets the errno),
// warn for a summarizer timeout (retried at the next request), error for
// the rest (the store or the summarizer failed: the operator must look).
func compactErrLevel(err error) slog.Level {
	switch ctlErrnos.Errno(err) {
	case 0, syscall.EIO:
		return slog.LevelError
	case syscall.ETIMEDOUT:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// reqCtx bounds a control-file request: the service's lifetime, and a
// minute for requests that do not call a summarizer.
func (s *Service) reqCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, time.Minute)
}

// request runs one store or compressor call under a request context
// (reqCtx) and maps its error to the errno the caller sees (ctlErrnos).
func request[T any](s *Service, do func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := s.reqCtx()
	defer cancel()
	v, err := do(ctx)
	return v, ctlErrnos.Map(err)
}

// jsonLinesOf renders recs as JSON lines (ctltree.JSONLines), or returns
// err when the records could not be read.
func jsonLinesOf[T any](recs []T, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return ctltree.JSONLines(recs)
}

// indentedJSON renders v as indented JSON ending in a newline, or returns
// err when v could not be read.
func indentedJSON[T any](v T, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

// Service is a control-tree feature (plugged with fusefs's FS.Plug).
var _ ctltree.Feature = (*Service)(nil)

// CtlEntries returns the compaction part of the control tree: the
// directory "compact" (Node). It makes *Service a ctltree.Feature.
func (s *Service) CtlEntries() []ctltree.Entry {
	return []ctltree.Entry{{Name: "compact", Node: s.Node()}}
}

// Node returns the .rubino/compact directory.
func (s *Service) Node() *ctltree.Dir {
	return ctltree.NewDir(
		ctltree.Entry{Name: "README", Node: ctltree.Static(ctlReadme)},
		ctltree.Entry{Name: "new", Node: &ctltree.File{Kind: ctltree.Clone, Clone: s.cloneNew}},
		ctltree.Entry{Name: "resolve", Node: &ctltree.File{Kind: ctltree.Clone, Clone: s.cloneResolve}},
		ctltree.Entry{Name: "list", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: s.readList}},
		ctltree.Entry{Name: "config", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: s.readConfig}},
		ctltree.Entry{Name: "sessions", Node: &ctltree.Dir{List: s.listSessions, Lookup: s.lookupSession}},
	)
}

// Admin reports whether c administers every transcript: the mount owner
// or root (Privileged) outside every agent session, that is in its own
// uid's default session ("default", or "default-UID" for a uid that is not
// the mount owner). Anyone else uses only the transcripts its uid owns
// (docs/DESIGN.md#compact-bounds).
func Admin(c ctltree.Caller) bool {
	// DefaultUID with c's own uid as the owner: "default" answers c.Uid,
	// "default-U" answers U.
	uid, outside := sessions.DefaultUID(c.Session, c.Uid)
	return c.Privileged && outside && uid == c.Uid
}

// ScopeOf is the Scope of caller c: AllScope for an Admin, else c's uid.
func ScopeOf(c ctltree.Caller) Scope {
	if Admin(c) {
		return AllScope
	}
	return UIDScope(c.Uid)
}

// mayUse returns nil when c may use transcript id (exact id), else EACCES
// with the reason (ENOENT when it is gone). Every per-session file checks
// it: a dentry the kernel cached for another caller's lookup reaches the
// handler without a lookup by c.
func (s *Service) mayUse(c ctltree.Caller, id string) error {
	sc := ScopeOf(c)
	if sc.All {
		return nil
	}
	sess, err := request(s, func(ctx context.Context) (Session, error) { return s.store.Session(ctx, id) })
	if err != nil {
		return err
	}
	if !sc.Sees(sess) {
		// The reason names no id: a refused caller learns nothing of
		// another uid's transcript, not even the id a prefix resolved to.
		return ctlErrnos.Map(fmt.Errorf("%w: the transcript is not uid %d's: only its owner, and the mount owner or root outside every agent session, may use it",
			ErrNotYours, c.Uid))
	}
	return nil
}

// maxOptionsSpec bounds one write to new, in bytes: the options are four
// short fields.
const maxOptionsSpec = 4 << 10

// cloneNew creates a transcript owned by the caller's uid, refused with
// EAGAIN when that uid owns compact.max_transcripts_per_uid already.
func (s *Service) cloneNew(c ctltree.Caller, spec []byte) (string, error) {
	if len(spec) > maxOptionsSpec {
		return "", ctltree.Errorf(syscall.EFBIG, "options of %d bytes exceed the limit of %d bytes", len(spec), maxOptionsSpec)
	}
	opts, err := ParseSessionOptions(spec)
	if err != nil {
		return "", ctltree.Errorf(syscall.EINVAL, "%v", err)
	}
	opts.Owner = c.Uid
	sess, err := request(s, func(ctx context.Context) (Session, error) {
		return s.store.CreateSessionCapped(ctx, opts, s.comp.cfg.MaxTranscriptsPerUID)
	})
	return sess.ID, err
}

func (s *Service) cloneResolve(c ctltree.Caller, spec []byte) (string, error) {
	return request(s, func(ctx context.Context) (string, error) { return s.store.ResolveIn(ctx, ScopeOf(c), string(spec)) })
}

func (s *Service) readList(_ context.Context, c ctltree.Caller) ([]byte, error) {
	return jsonLinesOf(request(s, func(ctx context.Context) ([]SessionInfo, error) { return s.store.SessionsIn(ctx, ScopeOf(c)) }))
}

func (s *Service) readConfig(context.Context, ctltree.Caller) ([]byte, error) {
	return indentedJSON(s.comp.cfg, nil)
}

func (s *Service) listSessions(c ctltree.Caller) []string {
	ctx, cancel := s.reqCtx()
	defer cancel()
	ids, err := s.store.SessionIDsIn(ctx, ScopeOf(c))
	if err != nil {
		s.log.Error("compaction store: listing sessions failed", "err", err)
	}
	return ids
}

// lookupSession resolves a directory name (full id or unique prefix).
// The answer is the same for every caller: the kernel caches a lookup's
// answer (a negative one too) for whoever asks next, so a per-caller
// answer would hide a session from its owner after another uid looked it
// up. The files inside refuse a caller that may not use the session
// (mayUse), and listings show only what the caller may see.
func (s *Service) lookupSession(_ ctltree.Caller, name string) ctltree.Node {
	ctx, cancel := s.reqCtx()
	defer cancel()
	id, err := s.store.Resolve(ctx, name)
	if err != nil {
		return nil
	}
	return s.sessionDir(id)
}

// guarded wraps a per-session read so that it runs only for a caller that
// may use session id (mayUse).
func (s *Service) guarded(id string, read func(id string) ([]byte, error)) func(context.Context, ctltree.Caller) ([]byte, error) {
	return func(_ context.Context, c ctltree.Caller) ([]byte, error) {
		if err := s.mayUse(c, id); err != nil {
			return nil, err
		}
		return read(id)
	}
}

func (s *Service) sessionDir(id string) *ctltree.Dir {
	return ctltree.NewDir(
		ctltree.Entry{Name: "messages", Node: &ctltree.File{Kind: ctltree.Append,
			Append: func(c ctltree.Caller, lines []byte) error {
				if err := s.mayUse(c, id); err != nil {
					return err
				}
				return s.appendLines(id, lines)
			},
			Read: s.guarded(id, s.readMessages)}},
		ctltree.Entry{Name: "status", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: s.guarded(id, s.readStatus)}},
		ctltree.Entry{Name: "ctl", Node: &ctltree.File{Kind: ctltree.Ctl,
			Write: func(c ctltree.Caller, cmd []byte) error {
				if err := s.mayUse(c, id); err != nil {
					return err
				}
				return s.writeCtl(id, cmd)
			},
			Read: func(_ context.Context, c ctltree.Caller) ([]byte, error) {
				if err := s.mayUse(c, id); err != nil {
					return nil, err
				}
				return []byte("compact\nforce\ndelete\n"), nil
			}}},
		ctltree.Entry{Name: "result", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: s.guarded(id, s.readResult)}},
		ctltree.Entry{Name: "summary", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: s.guarded(id, s.readSummary)}},
		ctltree.Entry{Name: "lineage", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: s.guarded(id, s.readLineage)}},
	)
}

func (s *Service) appendLines(id string, lines []byte) error {
	_, err := request(s, func(ctx context.Context) (int, error) { return s.comp.AppendLines(ctx, id, lines) })
	return err
}

func (s *Service) readMessages(id string) ([]byte, error) {
	return jsonLinesOf(request(s, func(ctx context.Context) ([]Message, error) { return s.store.Messages(ctx, id, 0) }))
}

func (s *Service) readStatus(id string) ([]byte, error) {
	return indentedJSON(request(s, func(ctx context.Context) (Status, error) { return s.comp.Status(ctx, id) }))
}

// maxCtlCommand bounds one write to sessions/ID/ctl, in bytes.
const maxCtlCommand = 64

// ParseCtlCommand parses a write to sessions/ID/ctl: "compact" (force
// false) or "force" (force true), surrounding white space ignored. Errors
// are *ctltree.Error: EFBIG over maxCtlCommand bytes, EINVAL naming the
// unknown command (clipped to 40 bytes) otherwise.
func ParseCtlCommand(cmd []byte) (force bool, err error) {
	if len(cmd) > maxCtlCommand {
		return false, ctltree.Errorf(syscall.EFBIG, "ctl command of %d bytes exceeds the limit of %d bytes: want compact or force", len(cmd), maxCtlCommand)
	}
	switch c := strings.TrimSpace(string(cmd)); c {
	case "compact":
		return false, nil
	case "force":
		return true, nil
	default:
		return false, ctltree.Errorf(syscall.EINVAL, "unknown command %q: want compact, force or delete", clip(c, 40))
	}
}

// writeCtl runs "compact" (automatic: skipped when thrashing), "force", or
// "delete" (the session and the sessions compacted from it; their results
// are forgotten).
// A no-op succeeds (the result's reason and detail say why: a request that
// was not refused is not an error, as a no-op "make" is not); a failure
// returns its errno and is recorded in the result too.
func (s *Service) writeCtl(id string, cmd []byte) error {
	if strings.TrimSpace(string(cmd)) == "delete" {
		return s.deleteTree(id)
	}
	force, err := ParseCtlCommand(cmd)
	if err != nil {
		return err
	}
	res, err := s.comp.Compact(s.ctx, id, force)
	if err != nil {
		res.Error = err.Error()
		s.log.Log(s.ctx, compactErrLevel(err), "compaction failed", "session", id, "force", force, "err", err)
	}
	s.setResult(id, res)
	return ctlErrnos.Map(err)
}

// deleteTree deletes session id and those compacted from it, serialised
// with a compaction of id.
func (s *Service) deleteTree(id string) error {
	mu := s.comp.lock(id)
	mu.Lock()
	defer mu.Unlock()
	ids, err := request(s, func(ctx context.Context) ([]string, error) { return s.store.DeleteTree(ctx, id) })
	if err != nil {
		return err
	}
	s.resMu.Lock()
	defer s.resMu.Unlock()
	for _, d := range ids {
		delete(s.results, d)
	}
	return nil
}

func (s *Service) setResult(id string, r Result) {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	if _, ok := s.results[id]; !ok {
		if len(s.order) >= maxResults {
			delete(s.results, s.order[0])
			s.order = s.order[1:]
		}
		s.order = append(s.order, id)
	}
	s.results[id] = r
}

// LastResult returns the last compaction result of session id (exact id).
func (s *Service) LastResult(id string) (Result, bool) {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	r, ok := s.results[id]
	return r, ok
}

func (s *Service) readResult(id string) ([]byte, error) {
	r, ok := s.LastResult(id)
	if !ok {
		return nil, nil
	}
	return indentedJSON(r, nil)
}

func (s *Service) readSummary(id string) ([]byte, error) {
	sm, err := request(s, func(ctx context.Context) (*Summary, error) { return s.store.LatestSummary(ctx, id) })
	if err != nil || sm == nil {
		return nil, err
	}
	return []byte(strings.TrimRight(sm.Content, "\n") + "\n"), nil
}

func (s *Service) readLineage(id string) ([]byte, error) {
	return jsonLinesOf(request(s, func(ctx context.Context) ([]LineageEntry, error) { return s.comp.Lineage(ctx, id) }))
}
