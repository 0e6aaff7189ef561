package fusefs

// The mount as the control tree sees it (docs/DESIGN.md#ctl-room):
// CtlHost implements ctlhost.Host, the renderer's ctlfs.Host and the
// sessions feature's sessionctl.Host, so the control tree's room and its
// features reach the mount through an interface and never import this
// package (the journal's files also take the workspace side of
// internal/rewind, over FS.RewindMount).

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/ascaller"
	"github.com/rubinofs/rubinofs/internal/ctlfs"
	"github.com/rubinofs/rubinofs/internal/ctlhost"
	"github.com/rubinofs/rubinofs/internal/sessionctl"
)

// CtlHost is the host a control-tree feature is given (FS.CtlHost). Its
// methods are safe for concurrent use.
type CtlHost struct{ f *FS }

var (
	_ ctlhost.Host    = CtlHost{}
	_ ctlhost.Room    = CtlHost{}
	_ ctlfs.Host      = CtlHost{}
	_ sessionctl.Host = CtlHost{}
)

// CtlHost returns the host of the control tree's features, to pass to a
// feature before it is plugged (docs/DESIGN.md#ctl-room).
func (f *FS) CtlHost() CtlHost { return CtlHost{f} }

// MayActOn is sessionctl.Owners.MayActOn over the mount's owners:
// whether c may see or act on session (docs/DESIGN.md#sessions).
func (h CtlHost) MayActOn(c ctltree.Caller, session string) bool {
	return h.f.owners.MayActOn(c, session)
}

// CallerRel resolves p as c names it to a workspace-relative path
// (ctlhost.Mountpoint.CallerRel). Errors are *ctltree.Error: EPERM outside
// the mount or inside .rubino, EAGAIN for a slow cwd, ESRCH for a gone
// caller.
func (h CtlHost) CallerRel(c ctltree.Caller, p string) (string, error) {
	return h.f.mountpoint.CallerRel(c, p)
}

// Owners is the mount's session ownership, the one callerOf resolves
// callers with (docs/DESIGN.md#sessions).
func (h CtlHost) Owners() *sessionctl.Owners { return h.f.owners }

// LookupTarget is FS.LookupTarget: rel's guard target, following no
// symlink. Errors: a syscall.Errno.
func (h CtlHost) LookupTarget(rel string) (guard.Target, error) { return h.f.LookupTarget(rel) }

// Readable reports whether c could open rel for reading itself
// (accessAs, docs/DESIGN.md#as-caller): nil, or denyReason's refusal.
func (h CtlHost) Readable(c ctltree.Caller, rel string) *ctltree.Error {
	cr := ascaller.Of(c)
	if err := ascaller.Access(journalMount{h.f}, cr, rel, unix.R_OK); err != nil {
		return ascaller.DenyReason(cr, "read", rel, err)
	}
	return nil
}

// ForgetErrors drops session's records from before from .rubino/errors:
// a session of that name registered at before starts with none
// (docs/DESIGN.md#session-names).
func (f *FS) ForgetErrors(session string, before time.Time) { f.errs.Drop(session, before) }

// newCtlTree builds the mount's control tree (internal/ctlfs) over its
// host, with the observability room's files (metrics, accesslog).
// Errors recorded by the mount (a journal failure) share the tree's
// ring, f.errs.
func newCtlTree(f *FS) *ctlfs.Tree {
	return ctlfs.New(ctlfs.Config{
		Guard:             f.cfg.Guard,
		Policy:            f.cfg.Policy,
		Owner:             f.cfg.Owner,
		Version:           f.cfg.Version,
		Workspace:         f.cfg.Workspace,
		AllowUnregistered: f.cfg.AllowUnregistered,
		Shadowed:          f.shadowed,
		Started:           f.started,
		Logger:            f.log,
		Errors:            &f.errs,
		Observed:          f.cfg.Observe.CtlEntries(),
	}, f.CtlHost())
}

// Plug adds a feature to the control tree: ctlfs.Tree.Plug, the one way
// features come in (docs/DESIGN.md#ctl-room). Call it before mounting.
func (f *FS) Plug(feat ctltree.Feature) { f.ctl.Plug(feat) }

// AddStatus registers a contributor to .rubino/status (the watcher, the task
// registry, ...): ctlfs.Tree.AddStatus. Safe for concurrent use.
func (f *FS) AddStatus(fn StatusFunc) { f.ctl.AddStatus(fn) }

// SessionFeatures are the plugged ctltree.SessionFeatures in plugging
// order (ctlfs.Tree.SessionFeatures), for the sessions feature.
func (h CtlHost) SessionFeatures() []ctltree.SessionFeature { return h.f.ctl.SessionFeatures() }

// GuardFiles are the guard files of session's directory
// (ctlfs.Tree.GuardFiles): tracked, denials, denials.summary,
// why.
func (h CtlHost) GuardFiles(session string) []ctltree.Entry {
	return h.f.ctl.GuardFiles(session)
}

// ctlCaller converts a FUSE caller for ctltree handlers: Privileged is
// root or the mount's owner (uid owner, Config.Owner).
func ctlCaller(owner uint32, c caller) ctltree.Caller {
	return ctltree.Caller{Pid: c.pid, Uid: c.uid, Gid: c.gid, Session: c.session,
		Privileged: c.uid == 0 || c.uid == owner}
}

// Caller is the caller of the FUSE request ctx carries (FS.callerOf), its
// session resolved.
func (h CtlHost) Caller(ctx context.Context) ctltree.Caller {
	return ctlCaller(h.f.cfg.Owner, h.f.callerOf(ctx))
}

// Admin is sessionctl.Owners.Admin: the mount's owner or root, from
// outside every session.
func (h CtlHost) Admin(c ctltree.Caller) bool { return h.f.owners.Admin(c) }

// Tracked returns session's read records for reader c, sorted by path: a
// record's hash is "-" where c could not read the file itself (accessAs;
// a gone one too), docs/DESIGN.md#as-caller.
func (h CtlHost) Tracked(c ctltree.Caller, session string) []guard.TrackedRecord {
	f := h.f
	recs := f.cfg.Guard.Tracked(session, f.LookupTarget)
	if cr := ascaller.Of(c); cr.Uid != 0 && len(recs) > 0 {
		rels := make([]string, len(recs))
		for i, r := range recs {
			rels[i] = r.Path
		}
		ascaller.AccessAll(journalMount{f}, cr, rels, unix.R_OK, func(i int, err error) {
			if err != nil {
				recs[i].Hash = "-"
			}
		})
	}
	return recs
}

// Quiet marks the request ctx carries quiet: the observability room
// neither times nor logs it (Observer.MarkQuiet).
func (h CtlHost) Quiet(ctx context.Context) { h.f.cfg.Observe.MarkQuiet(ctx.Done()) }
