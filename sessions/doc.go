// Package sessions is rubinofs' process and session identity: which guard
// session a calling thread belongs to (by process tree, cgroup, or the
// POSIX session of a reparented process), the registry of sessions and
// their roots, the facts of a reading process, and the special session
// values (type Session). It decides no policy: package guard asks it whose
// reads count and keeps the records (docs/DESIGN.md#session-room). Every
// /proc read on a request path is bounded through internal/procfs
// (docs/DESIGN.md#no-wait-on-caller).
package sessions
