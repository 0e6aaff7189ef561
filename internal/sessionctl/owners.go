package sessionctl

// Who may see or act on a session through the control tree
// (docs/DESIGN.md#sessions): a session belongs to a uid, a caller outside
// every session is its own uid's default session, and one method,
// Owners.MayActOn, answers for every per-session control file and every
// listing.

import (
	"sync"
	"sync/atomic"
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

// OwnerRegistry is the part of the session registry that knows owners
// (sessions.Registry implements it).
type OwnerRegistry interface {
	// OwnerOf returns the owner uid of a live or listed session
	// (sessions.Registry.OwnerOf).
	OwnerOf(name string) (uint32, bool)
}

// Owners is the session ownership of one mount: the default session of
// each uid seen outside every session, and the rule of who may see or act
// on a session (MayActOn). The FUSE adapter resolves callers with Default
// and gives the control tree's features MayActOn through its host. Safe
// for concurrent use.
type Owners struct {
	owner uint32        // the mount's owner uid
	reg   OwnerRegistry // nil: only default sessions have owners
	// defaults maps the uids other than the owner's that called from
	// outside every session to their default session; ndefaults counts
	// them, at most MaxDefaultSessions.
	defaults  sync.Map // uint32 -> string
	ndefaults atomic.Int32
}

// NewOwners returns the ownership of a mount owned by uid owner over the
// session registry reg (nil: no registry, so only default sessions have
// owners).
func NewOwners(owner uint32, reg OwnerRegistry) *Owners {
	return &Owners{owner: owner, reg: reg}
}

// MountOwner is the uid that owns the mount.
func (o *Owners) MountOwner() uint32 { return o.owner }

// Default returns the session of a caller with uid uid that is under no
// registered session root: sessions.DefaultFor (sessions.Default
// for the mount's owner, "default-U" for uid U), or sessions.Unknown
// for a new uid past MaxDefaultSessions. On the FUSE hot path: one map
// load for a uid seen before, nothing for the mount's owner.
func (o *Owners) Default(uid uint32) string {
	if uid == o.owner {
		return sessions.Default
	}
	if v, ok := o.defaults.Load(uid); ok {
		return v.(string)
	}
	if o.ndefaults.Add(1) > MaxDefaultSessions {
		o.ndefaults.Add(-1)
		return sessions.Unknown
	}
	name := sessions.DefaultFor(uid, o.owner)
	if v, loaded := o.defaults.LoadOrStore(uid, name); loaded {
		o.ndefaults.Add(-1)
		return v.(string)
	}
	return name
}

// Defaults lists the default sessions of other uids made so far
// (Default), unsorted.
func (o *Owners) Defaults() []string {
	var out []string
	o.defaults.Range(func(_, v any) bool {
		out = append(out, v.(string))
		return true
	})
	return out
}

// IsDefault reports whether session is a default session: the one of
// some uid's callers outside every session.
func (o *Owners) IsDefault(session string) bool {
	_, ok := sessions.DefaultUID(session, o.owner)
	return ok
}

// Outside reports whether c is outside every session: its session is its
// own uid's default session.
func (o *Owners) Outside(c ctltree.Caller) bool {
	return c.Session == sessions.DefaultFor(c.Uid, o.owner)
}

// Admin reports whether c may administer every session: the mount's
// owner or root, from outside every session.
func (o *Owners) Admin(c ctltree.Caller) bool {
	return c.Privileged && o.Outside(c)
}

// Owner returns the uid session name belongs to: the uid of a default
// session (sessions.DefaultUID), else the owner the registry recorded
// for a live or listed ended session; false when nobody knows.
func (o *Owners) Owner(name string) (uint32, bool) {
	if uid, ok := sessions.DefaultUID(name, o.owner); ok {
		return uid, true
	}
	if o.reg != nil {
		return o.reg.OwnerOf(name)
	}
	return 0, false
}

// MayActOn reports whether caller c may see or act on session through the
// control tree (docs/DESIGN.md#sessions): c is in that session; or c is
// outside every session and is the mount's owner or root; or c is outside
// every session and the session belongs to c's uid. A session inside
// another never sees it. Every per-session control file and every listing
// of sessions asks this, and only this.
func (o *Owners) MayActOn(c ctltree.Caller, session string) bool {
	if c.Session == session {
		return true
	}
	if !o.Outside(c) {
		return false
	}
	if c.Privileged {
		return true
	}
	uid, ok := o.Owner(session)
	return ok && uid == c.Uid
}

// MayActOnErr is MayActOn as the control files' refusal: nil, or EPERM
// with the reason.
func (o *Owners) MayActOnErr(c ctltree.Caller, session string) error {
	if o.MayActOn(c, session) {
		return nil
	}
	if o.Outside(c) {
		return ctltree.Errorf(syscall.EPERM, "session %s is not uid %d's: only its owner, the mount's owner and root, from outside every session, may act on it", session, c.Uid)
	}
	return ctltree.Errorf(syscall.EPERM, "session %s may not act on session %s", c.Session, session)
}
