package compact

// The head / middle / tail split and the tool-pair sanitiser
// (docs/DESIGN.md#compact-split).

// Split is a transcript cut in three: Head and Tail are kept verbatim, the
// Middle is summarised. Head = msgs[:HeadEnd], Middle = msgs[HeadEnd:TailStart],
// Tail = msgs[TailStart:]. The slices share msgs' backing array.
type Split struct {
	Head, Middle, Tail []Message
	HeadEnd, TailStart int
}

// toolPairs returns, for every tool result in msgs whose call was issued by
// an earlier assistant message, the pair (index of the call, index of the
// result). A result answers the most recent earlier call with its id.
func toolPairs(msgs []Message) [][2]int {
	calls := map[string]int{}
	var pairs [][2]int
	for j := range msgs {
		m := &msgs[j]
		switch m.Role {
		case RoleAssistant:
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = j
			}
		case RoleTool:
			if i, ok := calls[m.ToolCallID]; ok {
				pairs = append(pairs, [2]int{i, j})
			}
		}
	}
	return pairs
}

// blockedCuts returns, for c in 0..len(msgs), whether cutting before msgs[c]
// (msgs[:c] | msgs[c:]) would separate an assistant tool call from one of its
// results: some pair (i, j) has i < c <= j.
func blockedCuts(msgs []Message) []bool {
	n := len(msgs)
	diff := make([]int, n+2)
	for _, p := range toolPairs(msgs) {
		diff[p[0]+1]++
		diff[p[1]+1]--
	}
	blocked := make([]bool, n+1)
	acc := 0
	for c := 0; c <= n; c++ {
		acc += diff[c]
		blocked[c] = acc > 0
	}
	return blocked
}

// SplitMessages cuts msgs into head, middle and tail:
//   - head: the first headN messages, extended forward until the cut no
//     longer separates a tool call from its results;
//   - tail: the newest messages within tailBudget tokens (at least one
//     message), extended backward to include the newest real user message
//     (a compaction summary is not one), then further backward until the
//     cut no longer separates a tool call from its results;
//   - middle: what lies between; empty when head and tail meet.
//
// Neither cut ever falls between an assistant message that issued a tool
// call and a later message holding that call's result, whatever the
// transcript's order. Token counts come from Message.Tokens. Pure function.
func SplitMessages(msgs []Message, headN, tailBudget int) Split {
	n := len(msgs)
	blocked := blockedCuts(msgs)
	h := min(max(headN, 0), n)
	for h < n && blocked[h] {
		h++
	}
	t := n
	acc := 0
	for i := n - 1; i >= h; i-- {
		if t < n && acc+msgs[i].Tokens > tailBudget {
			break
		}
		acc += msgs[i].Tokens
		t = i
	}
	for i := n - 1; i >= h; i-- {
		if msgs[i].realUser() {
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
	return Split{Head: msgs[:h], Middle: msgs[h:t], Tail: msgs[t:], HeadEnd: h, TailStart: t}
}

// StubToolResult is the content the sanitiser gives a tool call whose
// result was lost.
const StubToolResult = "[tool result unavailable: it was lost before compaction]"

// SanitizeToolPairs returns a copy of msgs in which every tool result
// answers a call issued earlier in msgs and every call has a result:
// orphan results (no earlier call with that id, or a second result for the
// same call) are dropped, and a call with no result anywhere after it gets
// a stub result (StubToolResult, Tokens counted by tk) inserted after the
// tool results that directly follow its assistant message. Results that
// arrive later, out of order, are kept where they are
// (docs/DESIGN.md#compact-split). Pure function.
func SanitizeToolPairs(msgs []Message, tk Tokenizer) []Message {
	type callKey struct {
		i  int
		id string
	}
	calls := map[string]int{}
	answered := map[callKey]bool{}
	keep := make([]bool, len(msgs))
	for j := range msgs {
		m := &msgs[j]
		if m.Role != RoleTool {
			keep[j] = true
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = j
			}
			continue
		}
		if i, ok := calls[m.ToolCallID]; ok && !answered[callKey{i, m.ToolCallID}] {
			answered[callKey{i, m.ToolCallID}] = true
			keep[j] = true
		}
	}
	out := make([]Message, 0, len(msgs))
	var pending []Message // stubs for the last assistant message's unanswered calls
	for j := range msgs {
		m := &msgs[j]
		if m.Role != RoleTool {
			out = append(out, pending...)
			pending = nil
		}
		if keep[j] {
			out = append(out, *m)
		}
		for _, tc := range m.ToolCalls {
			if !answered[callKey{j, tc.ID}] {
				stub := Message{Role: RoleTool, ToolCallID: tc.ID, Name: tc.Function.Name, Content: StubToolResult}
				stub.Tokens = MessageTokens(tk, &stub)
				pending = append(pending, stub)
			}
		}
	}
	return append(out, pending...)
}
