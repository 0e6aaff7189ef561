// Package ctlhost is what the control tree's features may ask of the
// mount that renders them (docs/DESIGN.md#ctl-room). Features never
// import the FUSE adapter: they take a Host (or a feature's own interface
// that embeds it), which package fusefs implements, and they reach the
// control tree only by being plugged in as a ctltree.Feature.
package ctlhost

import "github.com/rubinofs/rubinofs/ctltree"

// Host is the mount as a control-tree feature sees it. Both methods are
// safe for concurrent use and never wait on the calling process (a /proc
// read of the caller is bounded: docs/DESIGN.md#no-wait-on-caller).
type Host interface {
	// MayActOn reports whether c may see or act on session's files: the
	// session's own processes; from outside every session, the session's
	// owner uid, the mount's owner and root (docs/DESIGN.md#sessions).
	// A feature answers false with EPERM, or ENOENT for a lookup.
	MayActOn(c ctltree.Caller, session string) bool
	// CallerRel resolves p as c names it (absolute inside the mount, or
	// relative to c's cwd) to a workspace-relative path ("." for the
	// root). Errors are *ctltree.Error: EPERM for a path outside the
	// mount or inside the control tree, EAGAIN when c's cwd did not
	// answer in time, ESRCH when c is gone.
	CallerRel(c ctltree.Caller, p string) (string, error)
}

// Room is the control tree's room (internal/ctlfs) as the sessions
// feature sees it: what it shows in every session's directory besides its
// own files. *ctlfs.Tree implements it, and so does the mount's host
// (fusefs.CtlHost). Both methods are safe for concurrent use once the
// features are plugged.
type Room interface {
	// SessionFeatures are the plugged ctltree.SessionFeatures in
	// plugging order: their files follow the session's own in
	// sessions/NAME/, and each command written to sessions/NAME/ctl is
	// offered to them before the session's own verbs
	// (docs/DESIGN.md#ctl-room). The slice is shared: do not modify it.
	SessionFeatures() []ctltree.SessionFeature
	// GuardFiles are the guard files of sessions/NAME/, in this
	// order: tracked, denials, denials.summary, why (the caller's own
	// session's are .rubino/guard/). Access to the directory is the
	// sessions feature's to check (MayActOn).
	GuardFiles(session string) []ctltree.Entry
}
