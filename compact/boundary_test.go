package compact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// genTranscript returns a random transcript that may be malformed the ways
// real ones are: results out of order or after other messages, results
// that never come, orphan results, reused call ids, compaction summaries.
// Token counts are random.
func genTranscript(rng *rand.Rand, n int) []Message {
	var msgs []Message
	var open []string // issued, unanswered call ids
	next := 0
	for len(msgs) < n {
		var m Message
		switch r := rng.IntN(10); {
		case r < 2:
			m = user("u")
			if rng.IntN(8) == 0 {
				m.Kind = KindSummary
			}
		case r < 4:
			m = assistant("a")
			for k := rng.IntN(4); k > 0; k-- {
				id := fmt.Sprintf("c%d", next)
				if rng.IntN(10) == 0 && next > 0 {
					id = fmt.Sprintf("c%d", rng.IntN(next)) // a reused id
				}
				dup := false
				for _, tc := range m.ToolCalls {
					dup = dup || tc.ID == id
				}
				if dup {
					continue
				}
				next++
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: "f"}})
				open = append(open, id)
			}
		case r < 9 && len(open) > 0:
			i := rng.IntN(len(open))
			if rng.IntN(3) > 0 {
				i = 0 // mostly in order
			}
			m = toolResult(open[i], "r")
			if rng.IntN(6) > 0 { // sometimes a second result for the same call
				open = append(open[:i], open[i+1:]...)
			}
		case r == 9:
			m = toolResult(fmt.Sprintf("orphan%d", rng.IntN(5)), "r")
		default:
			m = system("s")
		}
		m.Tokens = 1 + rng.IntN(300)
		msgs = append(msgs, m)
	}
	return msgs
}

// refPairs is an independent, quadratic statement of "which call does each
// tool result answer": the latest earlier assistant message that issued
// its id.
func refPairs(msgs []Message) [][2]int {
	var out [][2]int
	for j := range msgs {
		if msgs[j].Role != RoleTool {
			continue
		}
	search:
		for i := j - 1; i >= 0; i-- {
			if msgs[i].Role != RoleAssistant {
				continue
			}
			for _, tc := range msgs[i].ToolCalls {
				if tc.ID == msgs[j].ToolCallID {
					out = append(out, [2]int{i, j})
					break search
				}
			}
		}
	}
	return out
}

// TestSplitNeverSeparatesToolPairs is the property test of the boundary:
// over random transcripts, head sizes and tail budgets, no cut falls
// between a tool call and any of its results, the parts tile the
// transcript, the head is at least headN, the tail is never empty when
// anything follows the head, and the tail holds the newest real user
// message when one follows the head.
func TestSplitNeverSeparatesToolPairs(t *testing.T) {
	seed := uint64(20240611)
	rng := rand.New(rand.NewPCG(seed, seed))
	cuts := 0
	for iter := 0; iter < 20000; iter++ {
		n := rng.IntN(60)
		msgs := genTranscript(rng, n)
		headN := rng.IntN(8)
		budget := rng.IntN(4000)
		sp := SplitMessages(msgs, headN, budget)
		fail := func(format string, args ...any) {
			t.Helper()
			var b strings.Builder
			for i, m := range msgs {
				fmt.Fprintf(&b, "  %d %s kind=%s tokens=%d calls=%v result=%s\n", i, m.Role, m.Kind, m.Tokens, m.ToolCalls, m.ToolCallID)
			}
			t.Fatalf("iteration %d (seed %d), headN=%d budget=%d, cuts %d|%d: %s\n%s", iter, seed, headN, budget, sp.HeadEnd, sp.TailStart, fmt.Sprintf(format, args...), b.String())
		}
		if !(0 <= sp.HeadEnd && sp.HeadEnd <= sp.TailStart && sp.TailStart <= n) {
			fail("cuts out of order")
		}
		if len(sp.Head) != sp.HeadEnd || len(sp.Middle) != sp.TailStart-sp.HeadEnd || len(sp.Tail) != n-sp.TailStart {
			fail("parts do not tile the transcript")
		}
		if sp.HeadEnd < min(headN, n) {
			fail("head shorter than headN")
		}
		for _, p := range refPairs(msgs) {
			for _, c := range []int{sp.HeadEnd, sp.TailStart} {
				if p[0] < c && c <= p[1] {
					fail("cut %d separates call %d from its result %d", c, p[0], p[1])
				}
			}
		}
		if sp.HeadEnd < n && len(sp.Tail) == 0 {
			fail("empty tail")
		}
		for i := n - 1; i >= sp.HeadEnd; i-- {
			if msgs[i].realUser() {
				if i < sp.TailStart {
					fail("the newest real user message %d is not in the tail", i)
				}
				break
			}
		}
		if len(sp.Middle) > 0 {
			cuts++
		}
	}
	if cuts < 5000 {
		t.Fatalf("only %d of 20000 transcripts had a middle: the generator does not exercise the split", cuts)
	}
}

func TestSplitTailBudget(t *testing.T) {
	var msgs []Message
	for i := 0; i < 20; i++ {
		m := user(fmt.Sprint(i))
		if i%2 == 1 {
			m = assistant(fmt.Sprint(i))
		}
		m.Tokens = 100
		msgs = append(msgs, m)
	}
	sp := SplitMessages(msgs, 3, 450)
	if sp.HeadEnd != 3 || sp.TailStart != 16 {
		t.Fatalf("cuts %d|%d, want 3|16 (four 100-token messages fit 450)", sp.HeadEnd, sp.TailStart)
	}
	// A tail without a user message reaches back to the newest one.
	for i := 10; i < 20; i++ {
		msgs[i].Role = RoleAssistant
	}
	sp = SplitMessages(msgs, 3, 450)
	if sp.TailStart != 8 {
		t.Fatalf("tail starts at %d, want 8 (the newest user message)", sp.TailStart)
	}
	// A call and its results stay together: the tail grows backward over
	// them.
	msgs = []Message{system("s"), user("u"), assistant("a"), user("u2"), call("c", "x1", "x2"), toolResult("x1", "r"), toolResult("x2", "r"), user("u3")}
	for i := range msgs {
		msgs[i].Tokens = 100
	}
	sp = SplitMessages(msgs, 3, 250)
	if sp.TailStart != 4 {
		t.Fatalf("tail starts at %d, want 4 (the call of the results it holds)", sp.TailStart)
	}
}

func TestSanitizeToolPairs(t *testing.T) {
	tk, _ := NewTokenizer(TokenizerCL100K, "")
	in := []Message{
		toolResult("gone", "orphan from a call in the head"),
		call("a", "c1", "c2"),
		toolResult("c1", "r1"),
		user("interrupt"),
		toolResult("c1", "second result for c1"),
		call("b", "c3"),
		toolResult("c3", "r3"),
		toolResult("c2", "late result for c2"),
		call("c", "c4"),
	}
	out := SanitizeToolPairs(in, tk)
	var got []string
	for _, m := range out {
		switch {
		case m.Role == RoleTool && m.Content == StubToolResult:
			got = append(got, "stub:"+m.ToolCallID)
		case m.Role == RoleTool:
			got = append(got, "result:"+m.ToolCallID)
		default:
			got = append(got, m.Role+":"+m.Content)
		}
		if m.Tokens == 0 && m.Content == StubToolResult {
			t.Error("stub without a token count")
		}
	}
	want := "assistant:a result:c1 user:interrupt assistant:b result:c3 result:c2 assistant:c stub:c4"
	if strings.Join(got, " ") != want {
		t.Fatalf("sanitised:\n %s\nwant\n %s", strings.Join(got, " "), want)
	}
	// Property: over random transcripts every result answers an earlier
	// call, and every call gets exactly one result.
	rng := rand.New(rand.NewPCG(7, 7))
	for iter := 0; iter < 3000; iter++ {
		out := SanitizeToolPairs(genTranscript(rng, rng.IntN(40)), tk)
		results := map[int]bool{}
		for _, p := range refPairs(out) {
			results[p[1]] = true
		}
		perCall := map[string]int{}
		for j, m := range out {
			if m.Role == RoleTool && !results[j] {
				t.Fatalf("iteration %d: result %d (%s) answers no earlier call", iter, j, m.ToolCallID)
			}
		}
		for i, m := range out {
			for _, tc := range m.ToolCalls {
				perCall[fmt.Sprint(i, tc.ID)] = 0
			}
		}
		for _, p := range refPairs(out) {
			perCall[fmt.Sprint(p[0], out[p[1]].ToolCallID)]++
		}
		for k, v := range perCall {
			if v != 1 {
				t.Fatalf("iteration %d: call %s has %d results", iter, k, v)
			}
		}
	}
}

func TestPruneToolResults(t *testing.T) {
	tk, _ := NewTokenizer(TokenizerCL100K, "")
	big := strings.Repeat("some output line\n", 100) + "main.go:3: error: undefined: foo\n"
	mk := func(m Message) Message { m.Tokens = MessageTokens(tk, &m); return m }
	in := []Message{
		mk(call("a", "c1")), mk(toolResult("c1", "same output")),
		mk(call("b", "c2")), mk(toolResult("c2", big)),
		mk(call("c", "c3")), mk(toolResult("c3", "same output")),
		mk(call("d", "c4")), mk(toolResult("c4", big+"x")),
	}
	out := PruneToolResults(in, tk, 200, 1)
	if !strings.HasPrefix(out[1].Content, "[duplicate tool output: same as the later result of read_file (call c3)") {
		t.Errorf("older duplicate: %q", out[1].Content)
	}
	if out[5].Content != "same output" {
		t.Errorf("the newest copy changed: %q", out[5].Content)
	}
	if !strings.HasPrefix(out[3].Content, "[old tool output pruned: read_file returned") || strings.Contains(out[3].Content, "\n") ||
		!strings.Contains(out[3].Content, "undefined: foo") {
		t.Errorf("old large output: %q", out[3].Content)
	}
	if out[3].Tokens >= in[3].Tokens || out[3].ToolCallID != "c2" {
		t.Errorf("stub tokens %d (was %d), call %s", out[3].Tokens, in[3].Tokens, out[3].ToolCallID)
	}
	if out[7].Content != in[7].Content {
		t.Error("the newest large output was pruned (keepRecent 1)")
	}
	if in[3].Content != big {
		t.Error("PruneToolResults modified its input")
	}
}

// TestCompactedTranscriptsKeepToolPairs runs whole compactions over random
// well-formed conversations and checks that every child transcript is
// well-formed too: each result follows its call, each call has its result.
func TestCompactedTranscriptsKeepToolPairs(t *testing.T) {
	sum := &fixedSummarizer{text: "## Goal\n- g"}
	c := newTestCompressor(t, Config{ContextWindow: 4000, MinimumMessages: 6, HeadMessages: 3}, WithSummarizer(sum))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 11))
	compacted := 0
	for iter := 0; iter < 30; iter++ {
		id := newSessionWith(t, c, SessionOptions{}, genConversation(rng, 20+rng.IntN(100)))
		res, err := c.Compact(ctx, id, true)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Compacted {
			continue
		}
		compacted++
		child, err := c.store.Messages(ctx, res.TargetSessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		results := map[int]bool{}
		calls := map[string]int{}
		for _, p := range refPairs(child) {
			results[p[1]] = true
			calls[fmt.Sprint(p[0], child[p[1]].ToolCallID)]++
		}
		for j, m := range child {
			if m.Role == RoleTool && !results[j] {
				t.Fatalf("iteration %d: child message %d answers no call", iter, j)
			}
			for _, tc := range m.ToolCalls {
				if calls[fmt.Sprint(j, tc.ID)] != 1 {
					t.Fatalf("iteration %d: call %s in child message %d has %d results", iter, tc.ID, j, calls[fmt.Sprint(j, tc.ID)])
				}
			}
		}
	}
	if compacted < 15 {
		t.Fatalf("only %d of 30 conversations compacted", compacted)
	}
}
