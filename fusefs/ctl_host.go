package fusefs

// The mount as the control tree's features see it (docs/DESIGN.md#ctl-room):
// CtlHost implements ctlhost.Host, so features reach the mount through an
// interface and never import this package (the journal's files also take
// the workspace side of internal/rewind, over FS.RewindMount).

import (
	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/ctlhost"
)

// CtlHost is the host a control-tree feature is given (FS.CtlHost). Its
// methods are safe for concurrent use.
type CtlHost struct{ f *FS }

var _ ctlhost.Host = CtlHost{}

// CtlHost returns the host of the control tree's features, to pass to a
// feature before it is plugged (docs/DESIGN.md#ctl-room).
func (f *FS) CtlHost() CtlHost { return CtlHost{f} }

// MayActOn is FS.mayActOn (session_owner.go): whether c may see or act on
// session (docs/DESIGN.md#sessions).
func (h CtlHost) MayActOn(c ctltree.Caller, session string) bool { return h.f.mayActOn(c, session) }

// CallerRel resolves p as c names it to a workspace-relative path
// (FS.callerRel, ctl_self.go). Errors are *ctltree.Error: EPERM outside
// the mount or inside .rubino, EAGAIN for a slow cwd, ESRCH for a gone
// caller.
func (h CtlHost) CallerRel(c ctltree.Caller, p string) (string, error) { return h.f.callerRel(c, p) }
