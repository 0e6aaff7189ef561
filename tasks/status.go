package tasks

// Status is a task's state (docs/DESIGN.md#task-lifecycle). Live statuses
// hold a concurrency slot; terminal ones never change again.
type Status string

// The statuses: five live, three terminal.
const (
	StatusRunning         Status = "running"           // live: working
	StatusNeedsApproval   Status = "needs_approval"    // live: parked on a human approval
	StatusBlockedOnHuman  Status = "blocked_on_human"  // live: asked, and the human answers (no owner task)
	StatusBlockedOnParent Status = "blocked_on_parent" // live: asked, and its owner task answers
	StatusStopping        Status = "stopping"          // live: a stop was requested, unwinding
	StatusStopped         Status = "stopped"           // terminal: stopped (a failure while stopping)
	StatusDone            Status = "done"              // terminal: exited 0
	StatusFailed          Status = "failed"            // terminal: anything else
)

// Live reports whether s holds a slot under the caps: every non-terminal
// status, including needs_approval, the blocked states and stopping, since
// a task parked on a question or unwinding still has its process.
func (s Status) Live() bool {
	switch s {
	case StatusRunning, StatusNeedsApproval, StatusBlockedOnHuman, StatusBlockedOnParent, StatusStopping:
		return true
	}
	return false
}

// Terminal reports whether s is done, failed or stopped.
func (s Status) Terminal() bool {
	return s == StatusDone || s == StatusFailed || s == StatusStopped
}

// Glyph is the one-character mark the tree and the CLI show for s:
// ● running, ? needs_approval, ⛔ blocked_on_human (waiting on you),
// ↑ blocked_on_parent, ◌ stopping, ■ stopped, ✓ done, ✗ failed; " " for
// anything else.
func (s Status) Glyph() string {
	switch s {
	case StatusRunning:
		return "●"
	case StatusNeedsApproval:
		return "?"
	case StatusBlockedOnHuman:
		return "⛔"
	case StatusBlockedOnParent:
		return "↑"
	case StatusStopping:
		return "◌"
	case StatusStopped:
		return "■"
	case StatusDone:
		return "✓"
	case StatusFailed:
		return "✗"
	}
	return " "
}
