package sessions

// Session names a guard session: the unit whose reads count for its writes
// (docs/DESIGN.md#sessions). A registered session's name is ValidName's
// (1 to MaxName of [A-Za-z0-9._-], starting alphanumeric); the special
// values below are the only others, and each lives here alone
// (docs/DESIGN.md#session-room). Registry.Resolve answers one; the
// registry's other methods still take and give names as string.
type Session string

// The special session values. They are untyped constants, so they compare
// with a Session and with a plain string alike.
const (
	// Default is the session of callers under no registered session root
	// that are the mount's owner; another uid's is "default-UID"
	// (DefaultFor, DefaultUID).
	Default = "default"

	// Unknown is the session name of a caller whose session could not be
	// resolved within procfs.Bound (and was not cached). It is never a
	// valid session name (those start alphanumeric), so no tracker,
	// record or registered session can carry it. Callers of that session
	// may look up, stat and read, but the guard's callers refuse their
	// guarded mutations with EAGAIN (see fusefs decide), and their reads
	// are not registered.
	Unknown = "-"

	// External attributes a change made outside the mount (reported by the
	// watcher) in (*guard.Guard).NoteMutation.
	External = "(external)"

	// TaskPrefix starts the session names of background tasks ("task-ID").
	// Only the task registry registers such sessions: a caller whose
	// session is task-ID may act as task ID, and the session control files
	// refuse to create one (EPERM).
	TaskPrefix = "task-"

	// LeftPrefix starts the names of the sessions the registry makes for
	// processes that left a session (docs/DESIGN.md#sessions): the control
	// files refuse it in names they are given (EPERM).
	LeftPrefix = "left-"
)
