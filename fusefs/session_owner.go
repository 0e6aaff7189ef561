package fusefs

// Who may see or act on a session through the control tree
// (docs/DESIGN.md#sessions): a session belongs to a uid, a caller outside
// every session is its own uid's default session, and one function,
// mayActOn, answers for every per-session control file and every listing.

import (
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/sessions"
)

// MaxDefaultSessions bounds the default sessions of uids other than the
// mount's owner, in sessions (each has its own tracker): a caller of one
// more uid, outside every session, resolves to sessions.Unknown (its
// guarded mutations are refused with EAGAIN, its reads credit nothing)
// rather than share another uid's default session.
const MaxDefaultSessions = 256

// defaultSession returns the session of a caller with uid uid that is
// under no registered session root: sessions.DefaultFor (sessions.Default
// for the mount's owner, "default-U" for uid U), or sessions.Unknown
// for a new uid past MaxDefaultSessions. On the FUSE hot path: one map
// load for a uid seen before, nothing for the mount's owner. Safe for
// concurrent use.
func (f *FS) defaultSession(uid uint32) string {
	if uid == f.cfg.Owner {
		return sessions.Default
	}
	if v, ok := f.defaults.Load(uid); ok {
		return v.(string)
	}
	if f.ndefaults.Add(1) > MaxDefaultSessions {
		f.ndefaults.Add(-1)
		return sessions.Unknown
	}
	name := sessions.DefaultFor(uid, f.cfg.Owner)
	if v, loaded := f.defaults.LoadOrStore(uid, name); loaded {
		f.ndefaults.Add(-1)
		return v.(string)
	}
	return name
}

// defaultSessions lists the default sessions of other uids made so far
// (defaultSession), unsorted.
func (f *FS) defaultSessions() []string {
	var out []string
	f.defaults.Range(func(_, v any) bool {
		out = append(out, v.(string))
		return true
	})
	return out
}

// isDefaultSession reports whether session is a default session: the one
// of some uid's callers outside every session.
func (f *FS) isDefaultSession(session string) bool {
	_, ok := sessions.DefaultUID(session, f.cfg.Owner)
	return ok
}

// outside reports whether c is outside every session: its session is its
// own uid's default session.
func (f *FS) outside(c ctltree.Caller) bool {
	return c.Session == sessions.DefaultFor(c.Uid, f.cfg.Owner)
}

// admin reports whether c may administer every session: the mount's
// owner or root, from outside every session.
func (f *FS) admin(c ctltree.Caller) bool {
	return c.Privileged && f.outside(c)
}

// ownerRegistry is the part of the session registry that knows owners
// (sessions.Registry implements it).
type ownerRegistry interface {
	OwnerOf(name string) (uint32, bool)
}

// sessionOwner returns the uid session name belongs to: the uid of a
// default session (sessions.DefaultUID), else the owner the registry
// recorded for a live or listed ended session; false when nobody knows.
func (f *FS) sessionOwner(name string) (uint32, bool) {
	if uid, ok := sessions.DefaultUID(name, f.cfg.Owner); ok {
		return uid, true
	}
	if reg, ok := f.cfg.Sessions.(ownerRegistry); ok {
		return reg.OwnerOf(name)
	}
	return 0, false
}

// mayActOn reports whether caller c may see or act on session through the
// control tree (docs/DESIGN.md#sessions): c is in that session; or c is
// outside every session and is the mount's owner or root; or c is outside
// every session and the session belongs to c's uid. A session inside
// another never sees it. Every per-session control file and every listing
// of sessions asks this, and only this.
func (f *FS) mayActOn(c ctltree.Caller, session string) bool {
	if c.Session == session {
		return true
	}
	if !f.outside(c) {
		return false
	}
	if c.Privileged {
		return true
	}
	uid, ok := f.sessionOwner(session)
	return ok && uid == c.Uid
}

// mayActOnErr is mayActOn as the control files' refusal: nil, or EPERM
// with the reason.
func (f *FS) mayActOnErr(c ctltree.Caller, session string) error {
	if f.mayActOn(c, session) {
		return nil
	}
	if f.outside(c) {
		return ctltree.Errorf(syscall.EPERM, "session %s is not uid %d's: only its owner, the mount's owner and root, from outside every session, may act on it", session, c.Uid)
	}
	return ctltree.Errorf(syscall.EPERM, "session %s may not act on session %s", c.Session, session)
}
