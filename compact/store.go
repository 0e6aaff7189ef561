package compact

// The SQLite store: opening it (WAL, pragmas), the versioned schema
// migrations, and the query helpers the other store files share. Sessions
// and messages are in sessions.go, id prefixes in ids.go, summaries in
// summaries.go, the one-transaction compaction commit in commit.go and the
// compaction_runs log in runs.go.

import (
	"context"
	"database/sql"
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
	// ErrTooLarge: the transcript would exceed its size limit
	// (Config.MaxTranscriptBytes, compact.max_transcript_bytes); EFBIG
	// (docs/DESIGN.md#compact-bounds).
	ErrTooLarge = errors.New("transcript size limit reached")
	// ErrTooMany: the uid already owns Config.MaxTranscriptsPerUID
	// transcripts (compact.max_transcripts_per_uid); EAGAIN
	// (docs/DESIGN.md#compact-bounds).
	ErrTooMany = errors.New("transcript count limit reached")
	// ErrNotYours: the caller's uid may not use that transcript; EACCES
	// (docs/DESIGN.md#compact-bounds).
	ErrNotYours = errors.New("transcript belongs to another uid")
)

// MaxMessages bounds the messages of one session.
const MaxMessages = 1 << 20

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
	{"ownership and size: sessions.owner, sessions.bytes", []string{
		// owner is the uid that created the transcript (a compaction's
		// child inherits its source's); NULL for a transcript stored
		// before ownership, which only an administrator may use.
		`ALTER TABLE sessions ADD COLUMN owner INTEGER`,
		`CREATE INDEX sessions_owner ON sessions(owner)`,
		// bytes is the running total of the transcript's stored bytes
		// (messageBytes), kept in the small sessions row so the size check
		// of an append never reads the messages' overflow pages.
		`ALTER TABLE sessions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0`,
		`UPDATE sessions SET bytes = (SELECT COALESCE(SUM(length(CAST(role AS BLOB)) + length(CAST(content AS BLOB)) +
			length(CAST(name AS BLOB)) + length(CAST(tool_call_id AS BLOB)) + COALESCE(length(CAST(tool_calls AS BLOB)), 0) +
			COALESCE(length(CAST(content_json AS BLOB)), 0)), 0) FROM messages WHERE session_id = sessions.id)`,
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

func nowText() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
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

// querier is a *sql.DB or a *sql.Tx, for reads that run in or out of a
// transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// execer is a *sql.DB or a *sql.Tx, for writes that run in or out of a
// transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(...any) error }

// queryRows runs query on q and returns its rows, in order, each read by
// scan. The error is the query's, the first scan's, or the iteration's.
func queryRows[T any](ctx context.Context, q querier, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// firstOf returns the first of items, nil when there is none or err is set.
func firstOf[T any](items []T, err error) (*T, error) {
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return &items[0], nil
}

// scanString reads a one-column text row.
func scanString(r rowScanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}
