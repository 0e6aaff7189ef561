package tasks

// Status is a task's state. Live statuses hold a concurrency slot; terminal
// ones never change again.
type Status string

// The statuses of the seed registry.
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

// Live reports whether s holds a slot: every non-terminal status, including
// needs_approval, the blocked states and stopping (the seed's live_status?).
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

// Glyph is the one-character mark the tree and the CLI show for s (the
// seed's card glyphs: ● running, ◌ stopping, ✗ failed, ⛔ waiting on you).
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
