package main

// The text the journal commands print: the change list as git status
// --short does, and a rewind's plan, conflicts and counts.

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rubinofs/rubinofs/journal"
)

// formatChanges renders a change list one path a line, as git status
// --short would show the tree against the checkpoint: the status
// (changeStatus), the path (OLD -> NEW for a rename), the short states
// before..after (shortState) and, when the mode changed, the modes
// before..after in octal. A path absent at the checkpoint and absent now
// (a temporary file: an editor's, sed -i's, an atomic save's) is left out,
// and a name renamed from one shows as changed, not renamed: the
// temporary name is how the tool wrote it, not a change of the tree.
// (--json lists every path as the journal has it.)
func formatChanges(changes []journal.PathChange) string {
	transient := map[string]bool{}
	for _, pc := range changes {
		if pc.Before.Kind == journal.KindAbsent && pc.After.Kind == journal.KindAbsent {
			transient[pc.Path] = true
		}
	}
	var b strings.Builder
	for _, pc := range changes {
		if transient[pc.Path] {
			continue
		}
		if transient[pc.RenamedFrom] {
			pc.RenamedFrom = ""
		}
		name := quoteToken(pc.Path)
		if pc.RenamedFrom != "" {
			name = quoteToken(pc.RenamedFrom) + " -> " + name
		}
		fmt.Fprintf(&b, "%-2s %s  %s..%s", changeStatus(pc), name, shortState(pc.Before), shortState(pc.After))
		if pc.Before.Kind == pc.After.Kind && pc.Before.Kind != journal.KindAbsent && pc.Before.Mode != pc.After.Mode {
			fmt.Fprintf(&b, "  %06o..%06o", pc.Before.Mode, pc.After.Mode)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// changeStatus is a change's status letter: R renamed, A added, D
// deleted, T type changed, M modified (bytes or mode), = changed and back
// to its state at the checkpoint (same kind, mode and hash, or absent
// then and now).
func changeStatus(pc journal.PathChange) string {
	before, after := pc.Before, pc.After
	switch {
	case pc.RenamedFrom != "":
		return "R"
	case before.Kind == journal.KindAbsent && after.Kind == journal.KindAbsent:
		return "="
	case before.Kind == journal.KindAbsent:
		return "A"
	case after.Kind == journal.KindAbsent:
		return "D"
	case before.Kind != after.Kind:
		return "T"
	case before.Mode != after.Mode:
		return "M"
	case before.Kind == journal.KindFile && (before.Hash == "" || before.Hash != after.Hash):
		return "M"
	case before.Kind == journal.KindSymlink:
		return "M" // the target is not in the state: say changed
	}
	return "="
}

// shortState is one side of before..after: the first 8 hex digits of a
// file's hash ("?" when unknown: not hashed, or not kept), "-" for
// absent, "dir/" for a directory, "link" for a symlink.
func shortState(a journal.After) string {
	switch a.Kind {
	case journal.KindAbsent, "":
		return "-"
	case journal.KindDir:
		return "dir/"
	case journal.KindSymlink:
		return "link"
	}
	if len(a.Hash) >= 8 {
		return a.Hash[:8]
	}
	return "?"
}

// rewindCounts are the four figures of a rewind's last line.
type rewindCounts struct{ restored, removed, conflicts, unrecoverable int }

// formatRewind renders a rewind's reply: a header, the steps in order
// (a step on a conflicting path marked skipped unless force), the
// conflicts with who made them, the unrecoverable paths, the step errors,
// the counts line "restored N, removed N, conflicts N, unrecoverable N"
// and, after an applied rewind, how to undo it (undo followed by the
// automatic checkpoint's id). failed is true when a conflict was skipped,
// a path was unrecoverable or a step failed: the tree is not all at the
// checkpoint.
func formatRewind(rep rewindReply, force bool, undo string) (text string, failed bool) {
	var b strings.Builder
	p := rep.Plan
	fmt.Fprintf(&b, "rewind of session %s to %s", p.Session, p.To)
	if rep.DryRun {
		b.WriteString(" (dry run: nothing was changed)")
	}
	b.WriteString(":\n")
	conflicted := map[string]bool{}
	for _, c := range p.Conflicts {
		conflicted[c.Path] = true
	}
	var plan journal.Tally // what the steps not skipped would leave, as an applied rewind counts
	for _, s := range p.Steps {
		skipped := !force && (conflicted[s.Path] || (s.From != "" && conflicted[s.From]))
		line := "  " + stepText(s)
		if skipped {
			line += "  (conflict: skipped)"
		} else {
			plan.Add(s)
		}
		b.WriteString(line + "\n")
	}
	if len(p.Steps) == 0 {
		b.WriteString("  nothing to do\n")
	}
	if len(p.Conflicts) > 0 {
		if force {
			b.WriteString("conflicts, applied anyway (--force):\n")
		} else {
			b.WriteString("conflicts, skipped (--force applies them):\n")
		}
		for _, c := range p.Conflicts {
			who := "changed outside the mount"
			if c.By != "" {
				who = "changed by session " + c.By
			}
			fmt.Fprintf(&b, "  %s: %s", quoteToken(c.Path), who)
			if c.Reason != "" {
				fmt.Fprintf(&b, " (%s)", c.Reason)
			}
			b.WriteByte('\n')
		}
	}
	if len(p.Unrecoverable) > 0 {
		fmt.Fprintf(&b, "unrecoverable (the state at %s was not kept):\n", p.To)
		for _, u := range p.Unrecoverable {
			why := u.Unrecoverable
			if why == "" {
				why = "not kept"
			}
			fmt.Fprintf(&b, "  %s: %s %d bytes, %s\n", quoteToken(u.Path), u.Kind, u.Size, why)
		}
	}
	restored, removed := plan.Counts()
	n := rewindCounts{restored, removed, len(p.Conflicts), len(p.Unrecoverable)}
	if r := rep.Result; r != nil {
		n = rewindCounts{r.Restored, r.Removed, r.Conflicts, r.Unrecoverable}
		if len(r.Errors) > 0 {
			b.WriteString("errors:\n")
			for _, e := range r.Errors {
				fmt.Fprintf(&b, "  %s\n", e)
			}
		}
		failed = len(r.Errors) > 0
	}
	fmt.Fprintf(&b, "restored %d, removed %d, conflicts %d, unrecoverable %d\n", n.restored, n.removed, n.conflicts, n.unrecoverable)
	if r := rep.Result; r != nil && r.Checkpoint != "" {
		fmt.Fprintf(&b, "undo with: %s%s\n", undo, r.Checkpoint)
	}
	failed = failed || (n.conflicts > 0 && !force) || n.unrecoverable > 0
	return b.String(), failed
}

// stepText is one step of a plan: "restore PATH (KIND)", "remove PATH",
// "rename FROM -> PATH", "exchange A <-> B".
func stepText(s journal.Step) string {
	switch s.Kind {
	case journal.StepRename:
		return fmt.Sprintf("rename    %s -> %s", quoteToken(s.From), quoteToken(s.Path))
	case journal.StepExchange:
		return fmt.Sprintf("exchange  %s <-> %s", quoteToken(s.Path), quoteToken(s.From))
	case journal.StepRemove:
		return "remove    " + quoteToken(s.Path)
	case journal.StepRestore:
		what := s.Pre.Kind
		switch s.Pre.Kind {
		case journal.KindFile:
			what = fmt.Sprintf("file %06o, %d bytes", s.Pre.Mode, s.Pre.Size)
		case journal.KindDir:
			what = fmt.Sprintf("dir %06o", s.Pre.Mode)
		case journal.KindSymlink:
			what = "symlink to " + quoteToken(s.Pre.Target)
		}
		return fmt.Sprintf("restore   %s (%s)", quoteToken(s.Path), what)
	}
	return fmt.Sprintf("%-9s %s", s.Kind, quoteToken(s.Path))
}

// formatCheckpoints renders the checkpoints file's JSON lines as a table:
// id, local time (to the second), the changes and paths recorded since,
// and the label.
func formatCheckpoints(b []byte) (string, error) {
	var out strings.Builder
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tCHANGES\tPATHS\tLABEL")
	stopped := "" // why the journal is stopped in the last interval
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var cp struct {
			ID      string    `json:"id"`
			Label   string    `json:"label"`
			Time    time.Time `json:"time"`
			Changes int       `json:"changes"`
			Paths   int       `json:"paths"`
			Stopped string    `json:"stopped"`
		}
		if err := json.Unmarshal([]byte(line), &cp); err != nil {
			return "", fmt.Errorf("line %d of the checkpoints is not JSON: %v: %q", i+1, err, clip(line, 200))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", cp.ID, cp.Time.Local().Format("2006-01-02 15:04:05"), cp.Changes, cp.Paths, oneLineClip(cp.Label, 60))
		stopped = cp.Stopped // the last interval's: a later checkpoint may have restarted it
	}
	tw.Flush()
	if stopped != "" {
		// docs/DESIGN.md#journal-budget
		fmt.Fprintf(&out, "journal stopped: %s\n", stopped)
	}
	return out.String(), nil
}
