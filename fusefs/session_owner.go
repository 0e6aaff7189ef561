package fusefs

import (
	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// sessionOwner is the uid that owns session name: the uid a default
// session name stands for (guard.DefaultSessionUID), else the registry's
// guard.SessionInfo.Owner; ok is false for a session the registry does
// not know (docs/DESIGN.md#sessions).
func (f *FS) sessionOwner(name string) (uint32, bool) {
	if uid, ok := guard.DefaultSessionUID(name, f.cfg.Owner); ok {
		return uid, true
	}
	reg, ok := f.cfg.Sessions.(interface{ List() []guard.SessionInfo })
	if !ok {
		return 0, false
	}
	for _, si := range reg.List() {
		if si.Name == name {
			return si.Owner, true
		}
	}
	return 0, false
}

// mayActOn reports whether caller c may see and act on session: its own
// session; any session for the mount owner or root from outside every
// session (c.Session is its own default session); a session its uid owns
// for a caller outside every session (docs/DESIGN.md#sessions).
func (f *FS) mayActOn(c ctltree.Caller, session string) bool {
	if c.Session == session {
		return true
	}
	if c.Session != guard.DefaultSessionFor(c.Uid, f.cfg.Owner) {
		return false // inside a session
	}
	if c.Privileged {
		return true
	}
	uid, ok := f.sessionOwner(session)
	return ok && uid == c.Uid
}
