package fusefs

// The mount as the control tree's features see it (docs/DESIGN.md#ctl-room):
// CtlHost implements ctlhost.Host and the journal feature's
// journalctl.Host, so features reach the mount through an interface and
// never import this package.

import (
	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/ctlhost"
	"github.com/rubinofs/rubinofs/internal/journalctl"
	"github.com/rubinofs/rubinofs/journal"
)

// CtlHost is the host a control-tree feature is given (FS.CtlHost). Its
// methods are safe for concurrent use.
type CtlHost struct{ f *FS }

var (
	_ ctlhost.Host    = CtlHost{}
	_ journalctl.Host = CtlHost{}
)

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

// Inspector is the journal.Inspector of the backing workspace
// (journal_rewind.go).
func (h CtlHost) Inspector() journal.Inspector { return fsInspector{h.f} }

// ReaderGate is the workspace's Inspector gated for c: a diff shows the
// bytes c could read itself (docs/DESIGN.md#as-caller); done ends the
// credential-switched thread the checks started.
func (h CtlHost) ReaderGate(c ctltree.Caller) (journal.Inspector, func()) {
	gate := gateInspector{fsInspector{h.f}, &asChecks{f: h.f, cr: credsOf(c)}}
	return gate, gate.close
}

// Redactor returns redactChanges for c (journal_authz.go), c's groups read
// once from /proc within procfs.Bound.
func (h CtlHost) Redactor(c ctltree.Caller) func([]journal.PathChange) {
	cr := credsOf(c)
	return func(batch []journal.PathChange) { redactChanges(h.f, cr, batch) }
}

// CurrentBytes reads a workspace path's current bytes for a diff
// (journal_rewind.go).
func (h CtlHost) CurrentBytes(p string) ([]byte, error) { return currentBytes(h.f, p) }

// Checkpointed starts a new generation of the open handles' journal
// records (journal_hook.go): call it after every checkpoint.
func (h CtlHost) Checkpointed() { h.f.journalCheckpointed() }
