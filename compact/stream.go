package compact

// Bounded-memory reads for a compaction (docs/DESIGN.md#compact-bounds): the
// whole transcript is read once without its contents (what the gates and
// the split need), the head and the tail are read in full, and the middle
// reaches the summarizer as a bounded window of its newest messages, each
// cut to a bounded size, read newest first and never held whole.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

const (
	// SummaryInputBytes bounds the middle a summarizer gets, in bytes of
	// content and tool-call arguments after the cuts below: the newest
	// messages of the middle that fit (at least one). Older ones are
	// covered by the previous summary, as a model backend's prompt drops
	// them too (BuildPrompt).
	SummaryInputBytes = 8 << 20
	// SummaryMessageBytes bounds one middle message's content as the
	// summarizer gets it: its first and last halves are kept (cutMiddle).
	SummaryMessageBytes = 64 << 10
	// SummaryArgumentBytes bounds one tool call's arguments likewise.
	SummaryArgumentBytes = 8 << 10
)

// window is the summarizer's view of the middle: SummaryInputBytes,
// SummaryMessageBytes and SummaryArgumentBytes (tests make it smaller).
type window struct{ input, message, argument int }

var defaultWindow = window{SummaryInputBytes, SummaryMessageBytes, SummaryArgumentBytes}

// messageMetas returns session id's messages in order with what the gates
// and SplitMessages read: Seq, Role, Tokens, Kind, ToolCallID, and the
// ids and function names of ToolCalls. Content, RawContent, Name and the
// arguments are left empty, so the result costs O(messages), not the
// transcript's bytes.
func (s *Store) messageMetas(ctx context.Context, id string) ([]Message, error) {
	return queryRows(ctx, s.db, func(r rowScanner) (Message, error) {
		var m Message
		var tcs sql.NullString
		if err := r.Scan(&m.Seq, &m.Role, &m.Tokens, &m.Kind, &m.ToolCallID, &tcs); err != nil {
			return Message{}, err
		}
		if tcs.Valid && tcs.String != "" {
			var calls []struct{ ID, Name string }
			if err := json.Unmarshal([]byte(tcs.String), &calls); err != nil {
				return Message{}, fmt.Errorf("session %s seq %d: tool_calls: %w", id, m.Seq, err)
			}
			m.ToolCalls = make([]ToolCall, len(calls))
			for i, c := range calls {
				m.ToolCalls[i] = ToolCall{ID: c.ID, Type: "function", Function: FunctionCall{Name: c.Name}}
			}
		}
		return m, nil
	}, `SELECT seq, role, token_count, kind, tool_call_id,
		CASE WHEN tool_calls IS NULL OR tool_calls = '' THEN NULL ELSE
			(SELECT json_group_array(json_object('ID', json_extract(value, '$.id'), 'Name', json_extract(value, '$.function.name'))) FROM json_each(messages.tool_calls))
		END
		FROM messages WHERE session_id = ? ORDER BY seq`, id)
}

// messagesBetween returns session id's messages with first <= seq <= last,
// in full, in order.
func (s *Store) messagesBetween(ctx context.Context, id string, first, last int64) ([]Message, error) {
	if last < first {
		return nil, nil
	}
	return queryRows(ctx, s.db, scanFullMessage(id), `SELECT seq, role, token_count, kind, name, tool_call_id, tool_calls, content, content_json
		FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq`, id, first, last)
}

// middleWindow returns the summarizer's view of session id's messages with
// first <= seq <= last: the newest that fit in w.input bytes (at least
// one), each cut (w.message, w.argument bytes) and without RawContent,
// in order, and how many older ones were left out. Rows are
// read newest first and each is cut before the next is read, so the
// transcript is never held whole.
func (s *Store) middleWindow(ctx context.Context, id string, first, last int64, w window) ([]Message, int, error) {
	if last < first {
		return nil, 0, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, role, token_count, kind, name, tool_call_id, tool_calls, content, content_json
		FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq DESC`, id, first, last)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	scan := scanFullMessage(id)
	var out []Message
	size := 0
	for rows.Next() {
		m, err := scan(rows)
		if err != nil {
			return nil, 0, err
		}
		m.RawContent = nil
		m.Content = cutMiddle(m.Content, w.message)
		n := len(m.Content)
		for i := range m.ToolCalls {
			a := &m.ToolCalls[i].Function.Arguments
			*a = cutMiddle(*a, w.argument)
			n += len(*a)
		}
		if len(out) > 0 && size+n > w.input {
			break
		}
		size += n
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	dropped := 0
	if len(out) > 0 {
		dropped = int(out[0].Seq - first)
	}
	return out, dropped, nil
}
