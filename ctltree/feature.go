package ctltree

// DirName is the name of the control tree's directory at the mount root,
// reachable by name but not listed (docs/DESIGN.md#control-tree-visibility).
const DirName = ".rubino"

// Feature is one part of the control tree: the way every feature (sessions,
// agents, compaction) plugs into /.rubino. internal/ctlfs (Tree.Plug) calls
// CtlEntries once, when the feature is plugged in before mounting, and adds
// the entries under the control tree's root in that order.
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

// SessionFeature is optionally implemented by a Feature whose files live in
// every session's directory, .rubino/sessions/NAME/ (the journal's). The
// sessions feature asks every plugged SessionFeature, in the order they
// were plugged, and never knows them by name (docs/DESIGN.md#ctl-room).
// All three methods are called from any goroutine and must do their own
// locking.
type SessionFeature interface {
	Feature
	// SessionEntries are the feature's files in session's directory,
	// added after the session's own files in this order.
	SessionEntries(session string) []Entry
	// KeepsSession reports whether session, unknown to the session
	// registry (ended and forgotten, or from before a restart), still has
	// files of this feature: its directory then holds those alone and is
	// not listed.
	KeepsSession(session string) bool
	// SessionCtl offers one command written to sessions/NAME/ctl before
	// the session's own verbs: handled false passes it on untouched;
	// handled true ends it with err (a *Error chooses the errno).
	SessionCtl(c Caller, session string, cmd []byte) (handled bool, err error)
}
