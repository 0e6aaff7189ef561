package tasks

// SessionPrefix starts the session name of every task: a task's process is
// registered as session root "task-<id>", and a caller whose session is
// "task-<id>" is that task.
const SessionPrefix = "task-"

// SessionName returns the session name of task id.
func SessionName(id string) string { return SessionPrefix + id }
