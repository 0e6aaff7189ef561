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
