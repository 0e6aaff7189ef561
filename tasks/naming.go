package tasks

import (
	"regexp"

	"github.com/rubinofs/rubinofs/sessions"
)

// Task ids and the session names derived from them.

// idRE is the shape of a task id: a decimal number without leading zeros.
// Ids are never paths.
var idRE = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

// ValidID reports whether s has the shape of a task id (decimal, no
// leading zero, at most 19 digits). Anything else, "..", "a/b" included,
// is never looked up.
func ValidID(s string) bool { return idRE.MatchString(s) }

// SessionName returns the guard-session name of task id,
// sessions.TaskPrefix + id ("task-7"): the runner registers the
// task's process as the root of that session, and a control-file caller in
// it is that task (docs/DESIGN.md#task-authority).
func SessionName(id string) string { return sessions.TaskPrefix + id }
