package ctltree

// DirName is the name of the control tree's directory at the mount root,
// reachable by name but not listed (docs/DESIGN.md#control-tree-visibility).
const DirName = ".rubino"

// TaskSessionPrefix starts the guard-session names of background tasks
// ("task-ID"). Only the task registry registers such sessions: a caller whose
// session is task-ID may act as task ID, and the session control files refuse
// to create one (EPERM).
const TaskSessionPrefix = "task-"

// Feature is one part of the control tree: the way every feature (sessions,
// agents, compaction) plugs into /.rubino. fusefs calls CtlEntries once, when
// the feature is plugged in before mounting, and adds the entries under the
// control tree's root in that order.
type Feature interface {
	CtlEntries() []Entry
}

// StatusSource is optionally implemented by a Feature that contributes a key
// to .rubino/status. Status is called on every read of the status file, from
// any goroutine, and must not block: it returns the key and a JSON-encodable
// value.
type StatusSource interface {
	Status() (key string, value any)
}
