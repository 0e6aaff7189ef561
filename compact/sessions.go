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

// Session returns the session with exactly id (no prefix matching: call
// Resolve first). ErrNotFound when absent.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	return scanSession(s.db.QueryRowContext(ctx, `SELECT id, COALESCE(parent_session_id, ''), model, context_window, tokenizer, title, created_at FROM sessions WHERE id = ?`, id))
}

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
	out, err := queryRows(ctx, s.db, scanSessionInfo, `SELECT s.id, COALESCE(s.parent_session_id, ''), s.model, s.context_window, s.tokenizer, s.title, s.created_at,
		(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),
		(SELECT COALESCE(SUM(token_count), 0) FROM messages m WHERE m.session_id = s.id)
		FROM sessions s ORDER BY s.rowid`)
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
	if err := r.Scan(&si.ID, &si.ParentID, &si.Model, &si.ContextWindow, &si.Tokenizer, &si.Title, &created, &si.Messages, &si.Tokens); err != nil {
		return SessionInfo{}, err
	}
	si.CreatedAt = parseTime(created)
	return si, nil
}

// SessionIDs lists every session id, oldest first.
func (s *Store) SessionIDs(ctx context.Context) ([]string, error) {
	return queryRows(ctx, s.db, scanString, `SELECT id FROM sessions ORDER BY rowid`)
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

func queryMessages(ctx context.Context, q querier, id string, after int64) ([]Message, error) {
	return queryRows(ctx, q, func(r rowScanner) (Message, error) {
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
	}, `SELECT seq, role, token_count, kind, name, tool_call_id, tool_calls, content, content_json
		FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq`, id, after)
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
	out, err := queryRows(ctx, s.db, scanSession, ancestorsCTE+`SELECT s.id, COALESCE(s.parent_session_id, ''), s.model, s.context_window, s.tokenizer, s.title, s.created_at
		FROM anc JOIN sessions s ON s.id = anc.id ORDER BY anc.depth`, id)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return out, nil
}
