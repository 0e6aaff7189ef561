package tasks

import (
	"fmt"
	"strings"

	"github.com/rubinofs/rubinofs/ctltree"
)

// renderTree renders the tasks c may see (Runner.visible,
// docs/DESIGN.md#task-authority) under their owners, oldest first,
// cycle-safe; tasks whose owner is gone or hidden are roots.
func (rn *Runner) renderTree(c ctltree.Caller) string {
	all := rn.visible(c, rn.reg.List())
	byID := map[string]bool{}
	kids := map[string][]Task{}
	for i := len(all) - 1; i >= 0; i-- { // oldest first
		byID[all[i].ID] = true
	}
	var roots []Task
	for i := len(all) - 1; i >= 0; i-- {
		t := all[i]
		if t.OwnerTask != "" && byID[t.OwnerTask] {
			kids[t.OwnerTask] = append(kids[t.OwnerTask], t)
		} else {
			roots = append(roots, t)
		}
	}
	var b strings.Builder
	seen := map[string]bool{}
	var walk func(t Task, indent string)
	walk = func(t Task, indent string) {
		if seen[t.ID] {
			return
		}
		seen[t.ID] = true
		fmt.Fprintf(&b, "%s%s %s %s %s", indent, t.Status.Glyph(), t.ID, t.Status, t.Subagent)
		if t.OwnerTask == "" {
			fmt.Fprintf(&b, " (%s)", t.OwnerSession)
		}
		fmt.Fprintf(&b, ": %s", oneLine(clip(t.Prompt, 60)))
		switch {
		case t.Asking:
			fmt.Fprintf(&b, " — asks: %s", oneLine(clip(t.Question, 80)))
		case t.Approving:
			fmt.Fprintf(&b, " — approve? %s", oneLine(clip(t.ApprovalCommand+" "+t.ApprovalQuestion, 80)))
		}
		b.WriteString("\n")
		for _, k := range kids[t.ID] {
			walk(k, indent+"  ")
		}
	}
	for _, t := range roots {
		walk(t, "")
	}
	return b.String()
}

// renderWaiting lists the tasks c may see (Runner.visible) waiting on a
// human, oldest first: "ID blocked_on_human: QUESTION" or "ID
// needs_approval: COMMAND — QUESTION".
func (rn *Runner) renderWaiting(c ctltree.Caller) string {
	var b strings.Builder
	for _, t := range rn.visible(c, rn.reg.Running()) {
		switch t.Status {
		case StatusBlockedOnHuman:
			fmt.Fprintf(&b, "%s %s: %s\n", t.ID, t.Status, oneLine(t.Question))
		case StatusNeedsApproval:
			what := t.ApprovalCommand
			if t.ApprovalQuestion != "" {
				if what != "" {
					what += " — "
				}
				what += t.ApprovalQuestion
			}
			fmt.Fprintf(&b, "%s %s: %s\n", t.ID, t.Status, oneLine(what))
		}
	}
	return b.String()
}
