package compact

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestStoreWALAndMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "compact.db")
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var mode string
	if err := s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(migrations))
	}
	sess, err := s.CreateSession(ctx, SessionOptions{Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopening applies nothing twice and keeps the data.
	s, err = OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n)
	if n != len(migrations) {
		t.Fatalf("%d migration rows after reopening, want %d", n, len(migrations))
	}
	if got, err := s.Session(ctx, sess.ID); err != nil || got.Model != "gpt-4o" {
		t.Fatalf("session after reopening: %+v, %v", got, err)
	}
	// A schema from a newer rubinofs is refused, not half-understood.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_at) VALUES (99, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenStore(path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("opening a newer schema: %v, want a refusal", err)
	}
}

func TestResolvePrefix(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	ids := []string{
		"abcd0000000000000000000000000001",
		"abcd0000000000000000000000000002",
		"abce0000000000000000000000000003",
	}
	for _, id := range ids {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO sessions(id, created_at) VALUES (?, ?)`, id, nowText()); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		in   string
		want string
		err  error
	}{
		{ids[0], ids[0], nil},
		{"abcd00000000000000000000000000", "", ErrAmbiguous},
		{"abcd", "", ErrAmbiguous},
		{"abce", ids[2], nil},
		{"ABCE", ids[2], nil},
		{" abce\n", ids[2], nil},
		{"abcd0000000000000000000000000002", ids[1], nil},
		{"ffff", "", ErrNotFound},
		{"abc", "", ErrBadID},
		{"", "", ErrBadID},
		{"zzzz", "", ErrBadID},
		{"abcd*", "", ErrBadID},
		{"abcd' OR 1=1 --", "", ErrBadID},
		{ids[0] + "0", "", ErrBadID},
	} {
		got, err := s.Resolve(ctx, tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("Resolve(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	// The short-id trap (docs/DESIGN.md#compact-short-ids): exact-id
	// message lookups with a prefix find nothing.
	// Every compressor path resolves first (see TestCompactResolvesPrefix).
	if msgs, _ := s.Messages(ctx, "abce", 0); len(msgs) != 0 {
		t.Fatal("a prefix matched messages by exact id")
	}
}

func TestAppendAllOrNothing(t *testing.T) {
	c := newTestCompressor(t, smallConfig())
	ctx := context.Background()
	id := newSessionWith(t, c, SessionOptions{}, []Message{user("hello")})
	before := counts(t, c.store)
	batch := []byte(`{"role":"user","content":"one"}` + "\n\n" + `{"role":"assistant","content":"two"}` + "\n" + `{"role":"robot","content":"x"}` + "\n")
	_, err := c.AppendLines(ctx, id, batch)
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "unknown role") {
		t.Fatalf("bad batch: %v, want line 4: unknown role", err)
	}
	if after := counts(t, c.store); after != before {
		t.Fatalf("a refused batch changed the store: %v -> %v", before, after)
	}
	if _, err := c.AppendLines(ctx, strings.Repeat("0", 32), []byte(`{"role":"user","content":"x"}`+"\n")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("append to an unknown session: %v", err)
	}
	n, err := c.AppendLines(ctx, id, []byte(`{"role":"user","content":"one"}`+"\n"+`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`+"\n"))
	if err != nil || n != 2 {
		t.Fatalf("good batch: %d, %v", n, err)
	}
	msgs, err := c.store.Messages(ctx, id, 0)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("messages: %d, %v", len(msgs), err)
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) || m.Tokens <= 0 {
			t.Errorf("message %d: seq %d tokens %d", i, m.Seq, m.Tokens)
		}
	}
}

func TestMessageRoundTrip(t *testing.T) {
	c := newTestCompressor(t, smallConfig())
	ctx := context.Background()
	lines := []string{
		`{"role":"system","content":"be brief <ok> & done"}`,
		`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:x"}}]}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]}`,
		`{"role":"tool","content":"a.go\nb.go","tool_call_id":"c1"}`,
		`{"role":"user","content":"thanks","name":"alice"}`,
	}
	id := newSessionWith(t, c, SessionOptions{}, nil)
	if _, err := c.AppendLines(ctx, id, []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.store.Messages(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[1].Content != "look" {
		t.Errorf("text of parts = %q", msgs[1].Content)
	}
	for i, m := range msgs {
		got, _ := json.Marshal(m)
		var a, b any
		json.Unmarshal(got, &a)
		json.Unmarshal([]byte(lines[i]), &b)
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		if string(ga) != string(gb) {
			t.Errorf("message %d reads back as\n%s\nwant\n%s", i, ga, gb)
		}
	}
}

func TestParseMessageRejects(t *testing.T) {
	big := `{"role":"user","content":"` + strings.Repeat("x", MaxContentBytes) + `"}`
	for _, tc := range []struct{ in, want string }{
		{`not json`, "not a JSON object"},
		{`["role"]`, "not a JSON object"},
		{`{"role":"user","content":"x"} {}`, "trailing data"},
		{`{"role":"user","content":"x"`, "invalid JSON"},
		{`{"content":"x"}`, `missing "role"`},
		{`{"role":"robot"}`, "unknown role"},
		{`{"role":"user","content":42}`, "content"},
		{`{"role":"user","content":[{"text":"x"}]}`, `has no "type"`},
		{`{"role":"tool","content":"x"}`, "tool_call_id"},
		{`{"role":"user","content":"x","tool_call_id":"c1"}`, "tool_call_id"},
		{`{"role":"user","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]}`, "only assistant"},
		{`{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}`, "no id"},
		{`{"role":"assistant","tool_calls":[{"id":"c1","function":{"arguments":"{}"}}]}`, "no function name"},
		{`{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f"}},{"id":"c1","function":{"name":"g"}}]}`, "duplicate id"},
		{`{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":{"a":1}}}]}`, "invalid JSON"},
		{big, "exceeds the limit"},
	} {
		_, err := ParseMessage([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMessage(%.60q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	m, err := ParseMessage([]byte(`{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}],"extra":1}`))
	if err != nil || m.ToolCalls[0].Type != "function" {
		t.Fatalf("a valid message with an extra field: %+v, %v", m, err)
	}
}

func TestSessionOptions(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"", true},
		{"\n", true},
		{`{"model":"gpt-4o","context_window":200000}`, true},
		{`{"tokenizer":"chars/4"}`, true},
		{`{"context_window":10}`, false},
		{`{"model":"x","color":"red"}`, false},
		{`{"tokenizer":"bpe-9000"}`, false},
		{`{"model":"a\u0000b"}`, false},
		{`{} {}`, false},
		{`[1]`, false},
	} {
		_, err := ParseSessionOptions([]byte(tc.spec))
		if (err == nil) != tc.ok {
			t.Errorf("ParseSessionOptions(%q) = %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}
