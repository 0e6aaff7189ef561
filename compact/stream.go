package compact

// Bounded-memory reads for a compaction (docs/DESIGN.md#compact-bounds): the
// whole transcript is read once without its contents (what the gates and
// the split need), the head and the tail are read in full, and the middle
// reaches the summarizer as a bounded window of its newest messages, each
// cut to a bounded size, read newest first and never held whole.

import (
	"context"
	"database/sql"
	"strings"
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

// meta is what the gates and the split read of one message, in 32 bytes:
// a transcript's metadata costs O(messages), never its contents.
// Tool-call ids are kept as 64-bit hashes (idHash).
type meta struct {
	seq      int64
	result   uint64 // idHash of ToolCallID, for a tool result
	tokens   int32
	calls    int32 // the message's calls: metas.callIDs[calls : calls+ncalls]
	ncalls   uint16
	role     uint8
	realUser bool
}

// Role codes of meta.role.
const (
	metaOther uint8 = iota
	metaAssistant
	metaTool
)

// metas is a transcript's metadata, in order.
type metas struct {
	m       []meta
	callIDs []uint64 // idHash of every tool call id, in message order
}

// idHash hashes a tool-call id (FNV-1a, 64 bits). Two different ids of one
// transcript colliding would only move a cut, never lose a message.
func idHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func (ms *metas) add(m *Message) {
	x := meta{seq: m.Seq, tokens: int32(m.Tokens), realUser: m.realUser(), calls: int32(len(ms.callIDs)), ncalls: uint16(len(m.ToolCalls))}
	switch m.Role {
	case RoleAssistant:
		x.role = metaAssistant
	case RoleTool:
		x.role, x.result = metaTool, idHash(m.ToolCallID)
	}
	for _, tc := range m.ToolCalls {
		ms.callIDs = append(ms.callIDs, idHash(tc.ID))
	}
	ms.m = append(ms.m, x)
}

// tokens sums the tokens of ms.m[from:to].
func (ms *metas) tokens(from, to int) int {
	n := 0
	for _, x := range ms.m[from:to] {
		n += int(x.tokens)
	}
	return n
}

// blockedCuts is the function of the same name in boundary.go over
// metadata: whether cutting before message c separates a call from one of
// its results (a result answers the most recent earlier call with its id).
func (ms *metas) blockedCuts() []bool {
	n := len(ms.m)
	calls := map[uint64]int{}
	diff := make([]int32, n+2)
	for j := range ms.m {
		x := &ms.m[j]
		switch x.role {
		case metaAssistant:
			for _, h := range ms.callIDs[x.calls : x.calls+int32(x.ncalls)] {
				calls[h] = j
			}
		case metaTool:
			if i, ok := calls[x.result]; ok {
				diff[i+1]++
				diff[j+1]--
			}
		}
	}
	blocked := make([]bool, n+1)
	var acc int32
	for c := 0; c <= n; c++ {
		acc += diff[c]
		blocked[c] = acc > 0
	}
	return blocked
}

// split is SplitMessages over metadata: it returns HeadEnd and TailStart,
// the same cuts SplitMessages makes of the full messages.
func (ms *metas) split(headN, tailBudget int) (h, t int) {
	n := len(ms.m)
	blocked := ms.blockedCuts()
	h = min(max(headN, 0), n)
	for h < n && blocked[h] {
		h++
	}
	t = n
	acc := 0
	for i := n - 1; i >= h; i-- {
		if t < n && acc+int(ms.m[i].tokens) > tailBudget {
			break
		}
		acc += int(ms.m[i].tokens)
		t = i
	}
	for i := n - 1; i >= h; i-- {
		if ms.m[i].realUser {
			if i < t {
				t = i
			}
			break
		}
	}
	for t > h && blocked[t] {
		t--
	}
	if t < h {
		t = h
	}
	return h, t
}

// messageMetas reads session id's metadata in order (seq, role, token
// count, kind, tool-call id and call ids; no content), one row at a time.
func (s *Store) messageMetas(ctx context.Context, id string) (*metas, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, role, token_count, kind, tool_call_id,
		CASE WHEN tool_calls IS NULL OR tool_calls = '' THEN NULL ELSE
			(SELECT group_concat(json_extract(value, '$.id'), char(31)) FROM json_each(messages.tool_calls))
		END
		FROM messages WHERE session_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ms := &metas{}
	for rows.Next() {
		var m Message
		var ids sql.NullString
		if err := rows.Scan(&m.Seq, &m.Role, &m.Tokens, &m.Kind, &m.ToolCallID, &ids); err != nil {
			return nil, err
		}
		if ids.Valid {
			for _, cid := range strings.Split(ids.String, "\x1f") {
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: cid})
			}
		}
		ms.add(&m)
	}
	return ms, rows.Err()
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
