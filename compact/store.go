package compact

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// Errors of the store. They are wrapped with details (fmt.Errorf("%w: ..."));
// test with errors.Is. The control files map them to errnos: ErrNotFound ->
// ENOENT, ErrAmbiguous and ErrBadID -> EINVAL, ErrLimit -> EFBIG.
var (
	// ErrNotFound: no session has that id or id prefix.
	ErrNotFound = errors.New("no such session")
	// ErrAmbiguous: an id prefix matches more than one session.
	ErrAmbiguous = errors.New("ambiguous session id prefix")
	// ErrBadID: the id is not 4 to 32 lowercase hexadecimal digits.
	ErrBadID = errors.New("malformed session id")
	// ErrLimit: the session would exceed MaxMessages.
	ErrLimit = errors.New("session message limit reached")
)

// Store limits.
const (
	// IDLen is the length of a full session or summary id: 32 lowercase
	// hex digits (128 random bits).
	IDLen = 32
	// MinPrefix is the shortest id prefix Resolve accepts.
	MinPrefix = 4
	// ShortIDLen is the length of the short ids the CLI shows.
	ShortIDLen = 8
	// MaxMessages bounds the messages of one session.
	MaxMessages = 1 << 20
)

// migrations are the schema versions, applied in order, each in its own
// transaction, and recorded in schema_migrations. Never edit a released
// migration: append a new one.
var migrations = []struct {
	name  string
	stmts []string
}{
	{"initial: sessions, messages, summaries", []string{
		`CREATE TABLE sessions (
			id                TEXT PRIMARY KEY,
			parent_session_id TEXT REFERENCES sessions(id),
			model             TEXT NOT NULL DEFAULT '',
			context_window    INTEGER NOT NULL DEFAULT 0,
			tokenizer         TEXT NOT NULL DEFAULT '',
			title             TEXT NOT NULL DEFAULT '',
			created_at        TEXT NOT NULL
		)`,
		`CREATE INDEX sessions_parent ON sessions(parent_session_id)`,
		// Small columns first: SUM(token_count) then never reads overflow
		// pages of large contents.
		`CREATE TABLE messages (
			session_id   TEXT NOT NULL REFERENCES sessions(id),
			seq          INTEGER NOT NULL,
			role         TEXT NOT NULL,
			token_count  INTEGER NOT NULL,
			kind         TEXT NOT NULL DEFAULT '',
			name         TEXT NOT NULL DEFAULT '',
			tool_call_id TEXT NOT NULL DEFAULT '',
			tool_calls   TEXT,
			content      TEXT NOT NULL DEFAULT '',
			content_json TEXT,
			UNIQUE (session_id, seq)
		)`,
		// session_id is the compacted (source) session, target_session_id the
		// child it produced; previous_summary_id the summary this one was
		// built on; source_last_seq the last source message it covered.
		`CREATE TABLE summaries (
			id                  TEXT PRIMARY KEY,
			session_id          TEXT NOT NULL REFERENCES sessions(id),
			target_session_id   TEXT NOT NULL UNIQUE REFERENCES sessions(id),
			content             TEXT NOT NULL,
			previous_summary_id TEXT REFERENCES summaries(id),
			original_tokens     INTEGER NOT NULL,
			saved_tokens        INTEGER NOT NULL,
			original_messages   INTEGER NOT NULL,
			compacted_messages  INTEGER NOT NULL,
			source_last_seq     INTEGER NOT NULL,
			summarizer          TEXT NOT NULL DEFAULT '',
			forced              INTEGER NOT NULL DEFAULT 0,
			created_at          TEXT NOT NULL
		)`,
		`CREATE INDEX summaries_session ON summaries(session_id)`,
	}},
	{"net savings: removed_tokens, saved_tokens net of the summary, the compaction_runs log", []string{
		// removed_tokens is the middle that left the transcript (gross);
		// saved_tokens becomes net of the summary added back. Rows written
		// before this migration held the gross figure in saved_tokens: it
		// moves to removed_tokens, and the net one is recomputed from the
		// child's stored messages (messages that arrived while that
		// summary was built count against it: a conservative figure).
		`ALTER TABLE summaries ADD COLUMN removed_tokens INTEGER NOT NULL DEFAULT 0`,
		`UPDATE summaries SET removed_tokens = saved_tokens,
			saved_tokens = original_tokens - (SELECT COALESCE(SUM(m.token_count), 0) FROM messages m
				WHERE m.session_id = summaries.target_session_id AND m.seq <= summaries.compacted_messages)`,
		runsTable,
		`CREATE INDEX compaction_runs_session ON compaction_runs(session_id)`,
		`INSERT INTO compaction_runs(session_id, summary_id, original_tokens, compacted_tokens, removed_tokens, saved_tokens, source_last_seq, forced, created_at)
			SELECT session_id, id, original_tokens, original_tokens - saved_tokens, removed_tokens, saved_tokens, source_last_seq, forced, created_at
			FROM summaries ORDER BY rowid`,
	}},
}

// Store is the compaction store: one SQLite database in WAL mode holding
// sessions, their messages and the summaries that link a compacted session
// to its child. All methods are safe for concurrent use (database/sql pools
// connections; SQLite serialises writers, and write transactions start
// IMMEDIATE with a 10 s busy timeout).
type Store struct {
	db      *sql.DB
	path    string
	tempDir string // removed on Close when the store is temporary
}

// OpenStore opens (creating it if needed) the store at path, switches it to
// WAL mode and applies pending migrations. It fails when the file is not a
// SQLite database, WAL cannot be enabled, or the schema is newer than this
// code knows.
func OpenStore(path string) (*Store, error) {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "foreign_keys(1)", "journal_mode(WAL)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	s := &Store{db: db, path: path}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("opening %s: journal mode is %q, want wal", path, mode)
	}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating %s: %w", path, err)
	}
	return s, nil
}

// OpenTempStore opens a store in a new temporary directory, removed by
// Close. The daemon uses it when it has no state directory.
func OpenTempStore() (*Store, error) {
	dir, err := os.MkdirTemp("", "rubinofs-compact-")
	if err != nil {
		return nil, err
	}
	s, err := OpenStore(dir + "/compact.db")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.tempDir = dir
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database (and removes a temporary store).
func (s *Store) Close() error {
	err := s.db.Close()
	if s.tempDir != "" {
		os.RemoveAll(s.tempDir)
	}
	return err
}

// SchemaVersion returns the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func (s *Store) migrate() error {
	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	for {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
			tx.Rollback()
			return err
		}
		if v > len(migrations) {
			tx.Rollback()
			return fmt.Errorf("schema version %d is newer than this rubinofs knows (%d)", v, len(migrations))
		}
		if v == len(migrations) {
			return tx.Rollback()
		}
		m := migrations[v]
		for _, stmt := range m.stmts {
			if _, err := tx.Exec(stmt); err != nil {
				tx.Rollback()
				return fmt.Errorf("migration %d (%s): %w", v+1, m.name, err)
			}
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`,
			v+1, m.name, nowText()); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
}

// Session is one row of the sessions table.
type Session struct {
	ID string `json:"id"`
	// ParentID is the session this one was compacted from ("" for a root).
	ParentID string `json:"parent_session_id,omitempty"`
	Model    string `json:"model,omitempty"`
	// ContextWindow in tokens; 0 means the configured default.
	ContextWindow int `json:"context_window,omitempty"`
	// Tokenizer is the explicit tokenizer ("" = by model).
	Tokenizer string    `json:"tokenizer,omitempty"`
	Title     string    `json:"title,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// SessionOptions are what a new session may set (the JSON spec written to
// .rubino/compact/new). Zero values mean the configured defaults.
type SessionOptions struct {
	Model         string `json:"model,omitempty"`
	ContextWindow int    `json:"context_window,omitempty"`
	Tokenizer     string `json:"tokenizer,omitempty"`
	Title         string `json:"title,omitempty"`
}

// Validate checks the options' ranges: model and title at most 256 bytes of
// UTF-8 without control characters, context_window 0 or 1,000 to
// 100,000,000 tokens, tokenizer one ValidTokenizer accepts.
func (o SessionOptions) Validate() error {
	for k, v := range map[string]string{"model": o.Model, "title": o.Title} {
		if len(v) > maxNameBytes || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }) {
			return fmt.Errorf("%s: at most %d bytes of printable UTF-8", k, maxNameBytes)
		}
	}
	if o.ContextWindow != 0 && (o.ContextWindow < 1000 || o.ContextWindow > 100_000_000) {
		return fmt.Errorf("context_window %d out of range (1000 to 100000000 tokens)", o.ContextWindow)
	}
	if !ValidTokenizer(o.Tokenizer) {
		return fmt.Errorf("unknown tokenizer %q (want %q, %q or %q)", o.Tokenizer, TokenizerCL100K, TokenizerO200K, TokenizerChars4)
	}
	return nil
}

// newID returns 32 random lowercase hex digits.
func newID() string {
	var b [IDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

func nowText() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// CreateSession creates a root session with opts (validated) and returns it.
func (s *Store) CreateSession(ctx context.Context, opts SessionOptions) (Session, error) {
	if err := opts.Validate(); err != nil {
		return Session{}, err
	}
	sess := Session{ID: newID(), Model: opts.Model, ContextWindow: opts.ContextWindow, Tokenizer: opts.Tokenizer,
		Title: opts.Title, CreatedAt: time.Now().UTC()}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions(id, model, context_window, tokenizer, title, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		sess.ID, sess.Model, sess.ContextWindow, sess.Tokenizer, sess.Title, sess.CreatedAt.Format(time.RFC3339Nano))
	if err != nil {
		return Session{}, err
	}
	return sess, nil
}

// validPrefix reports whether p is 1 to 32 lowercase hex digits.
func validPrefix(p string) bool {
	if p == "" || len(p) > IDLen {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Resolve turns a full session id or a unique prefix of at least MinPrefix
// hex digits into the full id. Upper-case input is accepted. It is the
// first step of every operation on a session, before any message lookup
// (a short id matched no messages and compaction reported
// a fake "saved 0 tok" success). Errors: ErrBadID for anything that is not
// 4-32 hex digits, ErrNotFound, ErrAmbiguous (with the match count).
func (s *Store) Resolve(ctx context.Context, idOrPrefix string) (string, error) {
	p := strings.ToLower(strings.TrimSpace(idOrPrefix))
	if !validPrefix(p) {
		return "", fmt.Errorf("%w: %q (want %d to %d hex digits)", ErrBadID, clip(idOrPrefix, 40), MinPrefix, IDLen)
	}
	if len(p) < MinPrefix {
		return "", fmt.Errorf("%w: prefix %q is shorter than %d digits", ErrBadID, p, MinPrefix)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM sessions WHERE id GLOB ? ORDER BY id LIMIT 3`, p+"*")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return "", err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	switch {
	case len(ids) == 0:
		return "", fmt.Errorf("%w: %s", ErrNotFound, p)
	case len(ids) == 1:
		return ids[0], nil
	default:
		more := ""
		if len(ids) > 2 {
			more = ", ..."
		}
		return "", fmt.Errorf("%w: %s matches %s, %s%s", ErrAmbiguous, p, ids[0], ids[1], more)
	}
}

// Session returns the session with exactly id (no prefix matching: call
// Resolve first). ErrNotFound when absent.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	return scanSession(s.db.QueryRowContext(ctx, `SELECT id, COALESCE(parent_session_id, ''), model, context_window, tokenizer, title, created_at FROM sessions WHERE id = ?`, id))
}

type rowScanner interface{ Scan(...any) error }

func scanSession(r rowScanner) (Session, error) {
	var sess Session
	var created string
	if err := r.Scan(&sess.ID, &sess.ParentID, &sess.Model, &sess.ContextWindow, &sess.Tokenizer, &sess.Title, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Session{}, ErrNotFound
		}
		return Session{}, err
	}
	sess.CreatedAt = parseTime(created)
	return sess, nil
}

// SessionInfo is a session with its message count and token total, as
// .rubino/compact/list shows it.
type SessionInfo struct {
	Session
	Messages int `json:"messages"`
	Tokens   int `json:"tokens"`
	// Children are the ids of sessions compacted from this one, oldest
	// first.
	Children []string `json:"children,omitempty"`
}

// Sessions lists every session, oldest first, with counts.
func (s *Store) Sessions(ctx context.Context) ([]SessionInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT s.id, COALESCE(s.parent_session_id, ''), s.model, s.context_window, s.tokenizer, s.title, s.created_at,
		(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),
		(SELECT COALESCE(SUM(token_count), 0) FROM messages m WHERE m.session_id = s.id)
		FROM sessions s ORDER BY s.rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SessionInfo
	index := map[string]int{}
	for rows.Next() {
		var si SessionInfo
		var created string
		if err := rows.Scan(&si.ID, &si.ParentID, &si.Model, &si.ContextWindow, &si.Tokenizer, &si.Title, &created, &si.Messages, &si.Tokens); err != nil {
			return nil, err
		}
		si.CreatedAt = parseTime(created)
		index[si.ID] = len(out)
		out = append(out, si)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if p, ok := index[out[i].ParentID]; ok {
			out[p].Children = append(out[p].Children, out[i].ID)
		}
	}
	return out, nil
}

// SessionIDs lists every session id, oldest first.
func (s *Store) SessionIDs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM sessions ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Stats are a session's message count, token total and last seq.
type Stats struct {
	Messages int
	Tokens   int
	LastSeq  int64
}

// Stats returns the counts of session id (exact id; zero counts for an
// empty or unknown session).
func (s *Store) Stats(ctx context.Context, id string) (Stats, error) {
	var st Stats
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(token_count), 0), COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?`, id).
		Scan(&st.Messages, &st.Tokens, &st.LastSeq)
	return st, err
}

// AppendMessages appends msgs to session id (exact id) in one transaction:
// either all are stored, with consecutive seqs after the last one, or none.
// Each message's Tokens must already be set (the compressor counts them).
// Returns the seq of the first stored message. Errors: ErrNotFound,
// ErrLimit when the session would exceed MaxMessages.
func (s *Store) AppendMessages(ctx context.Context, id string, msgs []Message) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions WHERE id = ?`, id).Scan(&exists); err != nil {
		return 0, err
	}
	if exists == 0 {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	var count int
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?`, id).Scan(&count, &last); err != nil {
		return 0, err
	}
	if count+len(msgs) > MaxMessages {
		return 0, fmt.Errorf("%w: %d + %d messages exceed %d", ErrLimit, count, len(msgs), MaxMessages)
	}
	if err := insertMessages(ctx, tx, id, last+1, msgs); err != nil {
		return 0, err
	}
	return last + 1, tx.Commit()
}

// insertMessages inserts msgs into session id with seqs from first on.
func insertMessages(ctx context.Context, tx *sql.Tx, id string, first int64, msgs []Message) error {
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO messages(session_id, seq, role, token_count, kind, name, tool_call_id, tool_calls, content, content_json)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i := range msgs {
		m := &msgs[i]
		tcs, err := toolCallsJSON(m.ToolCalls)
		if err != nil {
			return err
		}
		var tcArg, rawArg any
		if tcs != "" {
			tcArg = tcs
		}
		if m.RawContent != nil {
			rawArg = string(m.RawContent)
		}
		if _, err := stmt.ExecContext(ctx, id, first+int64(i), m.Role, m.Tokens, m.Kind, m.Name, m.ToolCallID, tcArg, m.Content, rawArg); err != nil {
			return err
		}
	}
	return nil
}

// Messages returns session id's messages (exact id) in order, from seq
// after on (0 for all).
func (s *Store) Messages(ctx context.Context, id string, after int64) ([]Message, error) {
	return queryMessages(ctx, s.db, id, after)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryMessages(ctx context.Context, q querier, id string, after int64) ([]Message, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, role, token_count, kind, name, tool_call_id, tool_calls, content, content_json
		FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq`, id, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		var tcs, raw sql.NullString
		if err := rows.Scan(&m.Seq, &m.Role, &m.Tokens, &m.Kind, &m.Name, &m.ToolCallID, &tcs, &m.Content, &raw); err != nil {
			return nil, err
		}
		if tcs.Valid && tcs.String != "" {
			if err := json.Unmarshal([]byte(tcs.String), &m.ToolCalls); err != nil {
				return nil, fmt.Errorf("session %s seq %d: tool_calls: %w", id, m.Seq, err)
			}
		}
		if raw.Valid {
			m.RawContent = json.RawMessage(raw.String)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Summary is one row of the summaries table: a compaction of SessionID
// into TargetID.
type Summary struct {
	ID             string `json:"summary_id"`
	SessionID      string `json:"source_session_id"`
	TargetID       string `json:"target_session_id"`
	Content        string `json:"content,omitempty"`
	PreviousID     string `json:"previous_summary_id,omitempty"`
	OriginalTokens int    `json:"original_tokens"`
	// SavedTokens is net: OriginalTokens minus the tokens of the child as
	// committed (head + summary + tail), counted like the threshold.
	SavedTokens int `json:"saved_tokens"`
	// RemovedTokens is gross: the middle that left the transcript, before
	// the summary was added back (SavedTokens = RemovedTokens - the
	// summary message's tokens).
	RemovedTokens     int       `json:"removed_tokens"`
	OriginalMessages  int       `json:"original_messages"`
	CompactedMessages int       `json:"compacted_messages"`
	SourceLastSeq     int64     `json:"source_last_seq"`
	Summarizer        string    `json:"summarizer"`
	Forced            bool      `json:"forced"`
	CreatedAt         time.Time `json:"created_at"`
}

// Ineffective reports whether the compaction saved, net of its summary,
// less than IneffectiveSavingsPct of its original tokens (the
// anti-thrashing test).
func (s Summary) Ineffective() bool {
	return ineffective(s.SavedTokens, s.OriginalTokens)
}

const summaryCols = `id, session_id, target_session_id, content, COALESCE(previous_summary_id, ''), original_tokens, saved_tokens,
	removed_tokens, original_messages, compacted_messages, source_last_seq, summarizer, forced, created_at`

func scanSummaries(rows *sql.Rows) ([]Summary, error) {
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		var sm Summary
		var created string
		if err := rows.Scan(&sm.ID, &sm.SessionID, &sm.TargetID, &sm.Content, &sm.PreviousID, &sm.OriginalTokens, &sm.SavedTokens,
			&sm.RemovedTokens, &sm.OriginalMessages, &sm.CompactedMessages, &sm.SourceLastSeq, &sm.Summarizer, &sm.Forced, &created); err != nil {
			return nil, err
		}
		sm.CreatedAt = parseTime(created)
		out = append(out, sm)
	}
	return out, rows.Err()
}

// maxDepthText bounds lineage walks (a corrupt parent cycle cannot loop
// forever): at most 100,000 levels.
const maxDepthText = "100000"

// ancestorsCTE is a WITH clause naming anc(id, depth): session ? at depth
// 0, its parent at 1, ... up to the root.
const ancestorsCTE = `WITH RECURSIVE anc(id, parent, depth) AS (
	SELECT id, parent_session_id, 0 FROM sessions WHERE id = ?
	UNION ALL
	SELECT s.id, s.parent_session_id, anc.depth + 1 FROM sessions s JOIN anc ON s.id = anc.parent WHERE anc.depth < ` + maxDepthText + `
) `

// Ancestors returns id followed by its parent, grandparent, ... up to the
// root (exact id), in one query. ErrNotFound when id does not exist.
func (s *Store) Ancestors(ctx context.Context, id string) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, ancestorsCTE+`SELECT s.id, COALESCE(s.parent_session_id, ''), s.model, s.context_window, s.tokenizer, s.title, s.created_at
		FROM anc JOIN sessions s ON s.id = anc.id ORDER BY anc.depth`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return out, nil
}

// PreviousSummary returns the summary already folded into session id's
// transcript: the newest summary whose target is id or one of its
// ancestors; nil when there is none. A new summary is built on it and
// links to it (previous_summary_id).
func (s *Store) PreviousSummary(ctx context.Context, id string) (*Summary, error) {
	rows, err := s.db.QueryContext(ctx, ancestorsCTE+`SELECT `+summaryCols+` FROM summaries WHERE target_session_id IN (SELECT id FROM anc) ORDER BY rowid DESC LIMIT 1`, id)
	if err != nil {
		return nil, err
	}
	sms, err := scanSummaries(rows)
	if err != nil || len(sms) == 0 {
		return nil, err
	}
	return &sms[0], nil
}

// LatestSummary returns the newest summary that session id produced or was
// produced by (what .rubino/compact/sessions/ID/summary shows); nil when
// there is none.
func (s *Store) LatestSummary(ctx context.Context, id string) (*Summary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+summaryCols+` FROM summaries WHERE session_id = ? OR target_session_id = ? ORDER BY rowid DESC LIMIT 1`, id, id)
	if err != nil {
		return nil, err
	}
	sms, err := scanSummaries(rows)
	if err != nil || len(sms) == 0 {
		return nil, err
	}
	return &sms[0], nil
}

// SummariesFrom returns the compactions whose source is id, oldest first.
func (s *Store) SummariesFrom(ctx context.Context, id string) ([]Summary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+summaryCols+` FROM summaries WHERE session_id = ? ORDER BY rowid`, id)
	if err != nil {
		return nil, err
	}
	return scanSummaries(rows)
}

// SummaryInto returns the compaction that created session id, or nil.
func (s *Store) SummaryInto(ctx context.Context, id string) (*Summary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+summaryCols+` FROM summaries WHERE target_session_id = ?`, id)
	if err != nil {
		return nil, err
	}
	sms, err := scanSummaries(rows)
	if err != nil || len(sms) == 0 {
		return nil, err
	}
	return &sms[0], nil
}

// commitSpec is everything one compaction writes.
type commitSpec struct {
	Source  Session
	Head    []Message
	Summary Message // the summary message placed between head and tail
	Tail    []Message
	// SourceLastSeq is the last source seq the compaction read; source
	// messages appended after it (while the summarizer ran) are copied into
	// the child after the tail, so none is lost.
	SourceLastSeq int64
	Row           Summary // content, previous id, token and message counts, summarizer, forced
}

// commitHook is called between the steps of a commit, inside the
// transaction (tests make it fail or panic, or kill the process, to prove
// the commit is atomic). A non-nil error aborts the commit.
type commitHook func(stage string) error

// commit writes one compaction in a single transaction: the child session
// (parent_session_id = source), the summary row linked to the previous
// summary, its compaction_runs entry, and the child's messages (head, summary, tail, then any source
// messages that arrived after SourceLastSeq). Either all of it is committed
// or nothing (a failure, a panic in the hook or a killed process rolls
// back). Returns the summary row as stored and the child session.
func (s *Store) commit(ctx context.Context, spec commitSpec, hook commitHook) (Summary, Session, error) {
	if hook == nil {
		hook = func(string) error { return nil }
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Summary{}, Session{}, err
	}
	defer tx.Rollback() // a no-op after Commit; runs on panic too
	src := spec.Source
	child := Session{ID: newID(), ParentID: src.ID, Model: src.Model, ContextWindow: src.ContextWindow, Tokenizer: src.Tokenizer,
		Title: src.Title, CreatedAt: time.Now().UTC()}
	created := child.CreatedAt.Format(time.RFC3339Nano)
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions(id, parent_session_id, model, context_window, tokenizer, title, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		child.ID, child.ParentID, child.Model, child.ContextWindow, child.Tokenizer, child.Title, created); err != nil {
		return Summary{}, Session{}, err
	}
	if err := hook("session"); err != nil {
		return Summary{}, Session{}, err
	}
	late, err := queryMessages(ctx, tx, src.ID, spec.SourceLastSeq)
	if err != nil {
		return Summary{}, Session{}, err
	}
	row := spec.Row
	row.ID, row.SessionID, row.TargetID, row.SourceLastSeq, row.CreatedAt = newID(), src.ID, child.ID, spec.SourceLastSeq, child.CreatedAt
	row.CompactedMessages = len(spec.Head) + 1 + len(spec.Tail) + len(late)
	var prev any
	if row.PreviousID != "" {
		prev = row.PreviousID
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO summaries(id, session_id, target_session_id, content, previous_summary_id, original_tokens, saved_tokens,
		removed_tokens, original_messages, compacted_messages, source_last_seq, summarizer, forced, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		row.ID, row.SessionID, row.TargetID, row.Content, prev, row.OriginalTokens, row.SavedTokens,
		row.RemovedTokens, row.OriginalMessages, row.CompactedMessages, row.SourceLastSeq, row.Summarizer, row.Forced, created); err != nil {
		return Summary{}, Session{}, err
	}
	if err := insertRun(ctx, tx, Run{SessionID: src.ID, SummaryID: row.ID, OriginalTokens: row.OriginalTokens,
		CompactedTokens: row.OriginalTokens - row.SavedTokens, RemovedTokens: row.RemovedTokens, SavedTokens: row.SavedTokens,
		SourceLastSeq: row.SourceLastSeq, Forced: row.Forced, CreatedAt: child.CreatedAt}); err != nil {
		return Summary{}, Session{}, err
	}
	if err := hook("summary"); err != nil {
		return Summary{}, Session{}, err
	}
	msgs := make([]Message, 0, row.CompactedMessages)
	msgs = append(msgs, spec.Head...)
	msgs = append(msgs, spec.Summary)
	msgs = append(msgs, spec.Tail...)
	msgs = append(msgs, late...)
	if err := insertMessages(ctx, tx, child.ID, 1, msgs); err != nil {
		return Summary{}, Session{}, err
	}
	if err := hook("messages"); err != nil {
		return Summary{}, Session{}, err
	}
	if err := tx.Commit(); err != nil {
		return Summary{}, Session{}, err
	}
	return row, child, nil
}

// Counts returns the number of sessions, messages and summaries in the
// store (for tests and the benchmark).
func (s *Store) Counts(ctx context.Context) (sessions, messages, summaries int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM summaries)`).
		Scan(&sessions, &messages, &summaries)
	return
}

// IntegrityCheck runs SQLite's integrity_check and returns its verdict
// ("ok" when the file is sound).
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&v)
	return v, err
}
