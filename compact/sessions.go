package compact

// Sessions and their messages: creating a session, reading sessions, their
// counts and ancestry, appending and reading messages.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

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
	// Owner is the uid that created the transcript (a compaction's child
	// inherits its source's); nil for one stored before transcripts had
	// owners, which only an administrator may use
	// (docs/DESIGN.md#compact-bounds).
	Owner *uint32 `json:"owner,omitempty"`
	// Bytes is the transcript's stored size (the sum of messageBytes over
	// its messages), which Config.MaxTranscriptBytes bounds.
	Bytes int64 `json:"bytes"`
}

// sessionCols are the columns scanSession reads, from table alias s.
const sessionCols = `s.id, COALESCE(s.parent_session_id, ''), s.model, s.context_window, s.tokenizer, s.title, s.created_at, s.owner, s.bytes`

// SessionOptions are what a new session may set (the JSON spec written to
// .rubino/compact/new). Zero values mean the configured defaults.
type SessionOptions struct {
	Model         string `json:"model,omitempty"`
	ContextWindow int    `json:"context_window,omitempty"`
	Tokenizer     string `json:"tokenizer,omitempty"`
	Title         string `json:"title,omitempty"`
	// Owner is the uid the new transcript belongs to (the caller's uid
	// through the control files; never read from the JSON spec).
	Owner uint32 `json:"-"`
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

// ParseSessionOptions parses the spec written to "new": empty or
// whitespace for the defaults, else one JSON object with the fields of
// SessionOptions (unknown fields are errors), validated.
func ParseSessionOptions(spec []byte) (SessionOptions, error) {
	var o SessionOptions
	spec = bytes.TrimSpace(spec)
	if len(spec) == 0 {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("options: want a JSON object like {\"model\":\"gpt-4o\",\"context_window\":128000}: %v", err)
	}
	if dec.More() {
		return o, errors.New("options: trailing data after the JSON object")
	}
	return o, o.Validate()
}

// CreateSession creates a root session with opts (validated), owned by
// opts.Owner, and returns it. It enforces no count limit (CreateSessionCapped).
func (s *Store) CreateSession(ctx context.Context, opts SessionOptions) (Session, error) {
	return s.CreateSessionCapped(ctx, opts, 0)
}

// CreateSessionCapped is CreateSession refusing with ErrTooMany when
// opts.Owner already owns maxPerOwner transcripts or more (0: no limit).
// The count and the insert are one transaction, so concurrent creations
// cannot both pass the cap (docs/DESIGN.md#compact-bounds).
func (s *Store) CreateSessionCapped(ctx context.Context, opts SessionOptions, maxPerOwner int) (Session, error) {
	if err := opts.Validate(); err != nil {
		return Session{}, err
	}
	owner := opts.Owner
	sess := Session{ID: newID(), Model: opts.Model, ContextWindow: opts.ContextWindow, Tokenizer: opts.Tokenizer,
		Title: opts.Title, CreatedAt: time.Now().UTC(), Owner: &owner}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Session{}, err
	}
	defer tx.Rollback()
	if err := checkOwnerCap(ctx, tx, owner, maxPerOwner); err != nil {
		return Session{}, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO sessions(id, model, context_window, tokenizer, title, created_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		sess.ID, sess.Model, sess.ContextWindow, sess.Tokenizer, sess.Title, sess.CreatedAt.Format(time.RFC3339Nano), owner)
	if err != nil {
		return Session{}, err
	}
	return sess, tx.Commit()
}

// Session returns the session with exactly id (no prefix matching: call
// Resolve first). ErrNotFound when absent.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	return scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions s WHERE s.id = ?`, id))
}

func scanSession(r rowScanner) (Session, error) {
	var sess Session
	var created string
	var owner sql.NullInt64
	if err := r.Scan(&sess.ID, &sess.ParentID, &sess.Model, &sess.ContextWindow, &sess.Tokenizer, &sess.Title, &created, &owner, &sess.Bytes); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Session{}, ErrNotFound
		}
		return Session{}, err
	}
	sess.CreatedAt = parseTime(created)
	sess.Owner = ownerOf(owner)
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
	return s.SessionsIn(ctx, AllScope)
}

// SessionsIn lists the sessions sc may see, oldest first, with counts;
// Children name only sessions sc may see too.
func (s *Store) SessionsIn(ctx context.Context, sc Scope) ([]SessionInfo, error) {
	out, err := queryRows(ctx, s.db, scanSessionInfo, `SELECT `+sessionCols+`,
		(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),
		(SELECT COALESCE(SUM(token_count), 0) FROM messages m WHERE m.session_id = s.id)
		FROM sessions s WHERE `+sc.cond()+` ORDER BY s.rowid`, sc.args()...)
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, len(out))
	for i := range out {
		index[out[i].ID] = i
	}
	for i := range out {
		if p, ok := index[out[i].ParentID]; ok {
			out[p].Children = append(out[p].Children, out[i].ID)
		}
	}
	return out, nil
}

func scanSessionInfo(r rowScanner) (SessionInfo, error) {
	var si SessionInfo
	var created string
	var owner sql.NullInt64
	if err := r.Scan(&si.ID, &si.ParentID, &si.Model, &si.ContextWindow, &si.Tokenizer, &si.Title, &created, &owner, &si.Bytes, &si.Messages, &si.Tokens); err != nil {
		return SessionInfo{}, err
	}
	si.CreatedAt = parseTime(created)
	si.Owner = ownerOf(owner)
	return si, nil
}

// SessionIDs lists every session id, oldest first.
func (s *Store) SessionIDs(ctx context.Context) ([]string, error) {
	return s.SessionIDsIn(ctx, AllScope)
}

// SessionIDsIn lists the ids of the sessions sc may see, oldest first.
func (s *Store) SessionIDsIn(ctx context.Context, sc Scope) ([]string, error) {
	return queryRows(ctx, s.db, scanString, `SELECT s.id FROM sessions s WHERE `+sc.cond()+` ORDER BY s.rowid`, sc.args()...)
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
// ErrLimit when the session would exceed MaxMessages. No size limit
// (AppendMessagesCapped).
func (s *Store) AppendMessages(ctx context.Context, id string, msgs []Message) (int64, error) {
	return s.AppendMessagesCapped(ctx, id, msgs, 0, 0)
}

// AppendMessagesCapped is AppendMessages refusing with ErrTooLarge, and
// storing nothing, when the transcript would hold more than maxBytes
// (messageBytes summed), or the transcripts its owner owns more than
// maxOwnerBytes together (0: no limit). The error names
// compact.max_transcript_bytes or compact.max_bytes_per_uid and the
// figures (docs/DESIGN.md#compact-bounds).
func (s *Store) AppendMessagesCapped(ctx context.Context, id string, msgs []Message, maxBytes, maxOwnerBytes int64) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var size int64
	if err := tx.QueryRowContext(ctx, `SELECT bytes FROM sessions WHERE id = ?`, id).Scan(&size); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return 0, err
	}
	if maxBytes > 0 || maxOwnerBytes > 0 {
		add, err := messagesBytes(msgs)
		if err != nil {
			return 0, err
		}
		if err := checkOwnerBytes(ctx, tx, id, add, maxOwnerBytes); err != nil {
			return 0, err
		}
		if maxBytes > 0 && size+add > maxBytes {
			return 0, fmt.Errorf("%w: transcript %s holds %d bytes and this write adds %d, past compact.max_transcript_bytes (%d bytes): nothing of it was stored; compact it (rubinofs compact run --force %s) and continue in the child, or ask the mount owner to raise the limit",
				ErrTooLarge, clip(id, ShortIDLen), size, add, maxBytes, clip(id, ShortIDLen))
		}
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

// messageBytes is a message's stored size in bytes: its role, content, raw
// content, name, tool-call id and tool calls as JSON. The transcript size
// limit sums it (migration 3 computes the same figure in SQL).
func messageBytes(m *Message) (int64, error) {
	tcs, err := toolCallsJSON(m.ToolCalls)
	if err != nil {
		return 0, err
	}
	return bytesWith(m, tcs), nil
}

// messagesBytes is messageBytes summed over msgs.
func messagesBytes(msgs []Message) (int64, error) {
	var sum int64
	for i := range msgs {
		n, err := messageBytes(&msgs[i])
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// bytesWith is messageBytes given the tool calls' JSON tcs.
func bytesWith(m *Message, tcs string) int64 {
	return int64(len(m.Role) + len(m.Content) + len(m.RawContent) + len(m.Name) + len(m.ToolCallID) + len(tcs))
}

// insertMessages inserts msgs into session id with seqs from first on, and
// adds their messageBytes to the session's bytes.
func insertMessages(ctx context.Context, tx *sql.Tx, id string, first int64, msgs []Message) error {
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO messages(session_id, seq, role, token_count, kind, name, tool_call_id, tool_calls, content, content_json)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	var size int64
	for i := range msgs {
		m := &msgs[i]
		tcs, err := toolCallsJSON(m.ToolCalls)
		if err != nil {
			return err
		}
		size += bytesWith(m, tcs)
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
	_, err = tx.ExecContext(ctx, `UPDATE sessions SET bytes = bytes + ? WHERE id = ?`, size, id)
	return err
}

// Messages returns session id's messages (exact id) in order, from seq
// after on (0 for all).
func (s *Store) Messages(ctx context.Context, id string, after int64) ([]Message, error) {
	return queryMessages(ctx, s.db, id, after)
}

func queryMessages(ctx context.Context, q querier, id string, after int64) ([]Message, error) {
	return queryRows(ctx, q, scanFullMessage(id), `SELECT seq, role, token_count, kind, name, tool_call_id, tool_calls, content, content_json
		FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq`, id, after)
}

// scanFullMessage reads a row of seq, role, token_count, kind, name,
// tool_call_id, tool_calls, content, content_json of session id.
func scanFullMessage(id string) func(r rowScanner) (Message, error) {
	return func(r rowScanner) (Message, error) {
		var m Message
		var tcs, raw sql.NullString
		if err := r.Scan(&m.Seq, &m.Role, &m.Tokens, &m.Kind, &m.Name, &m.ToolCallID, &tcs, &m.Content, &raw); err != nil {
			return Message{}, err
		}
		if tcs.Valid && tcs.String != "" {
			if err := json.Unmarshal([]byte(tcs.String), &m.ToolCalls); err != nil {
				return Message{}, fmt.Errorf("session %s seq %d: tool_calls: %w", id, m.Seq, err)
			}
		}
		if raw.Valid {
			m.RawContent = json.RawMessage(raw.String)
		}
		return m, nil
	}
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
	out, err := queryRows(ctx, s.db, scanSession, ancestorsCTE+`SELECT `+sessionCols+`
		FROM anc JOIN sessions s ON s.id = anc.id ORDER BY anc.depth`, id)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return out, nil
}
