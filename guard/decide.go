package guard

import (
	"fmt"
	"syscall"

	"github.com/rubinofs/rubinofs/sessions"
)

// Decide decides op by session on the existing regular file t, for a caller
// whose program is not known: DecideCaller without the git-safe policy.
func (g *Guard) Decide(session string, op Op, t Target) Decision {
	return g.DecideCaller(session, nil, op, t)
}

// DecideCaller decides op by session on the existing regular file t. comm
// returns the calling program's name (its comm); it is called only when the
// read-before-write policy refuses and Config.Git is set, and may be nil.
// When comm names git (IsGit) and t's bytes are a blob git holds for it,
// the git-safe policy registers them as read by the session and decides
// again (docs/DESIGN.md#git-safe), so a git operation is never half-applied.
//
// It never blocks on locks of its own; the caller holds Lock(t.Stat.ID)
// across the decision and the mutation. On a refusal it flags edit-failure
// recovery for the file (Tracker.NoteEditFailure), so the session's
// recovery read is fresh. A file that cannot be hashed (I/O error, removed
// meanwhile) counts as stale: the guard fails closed. A refusal carries
// Config.Errno in Decision.Errno. With UnlinkAllow, OpUnlink is allowed
// without a check.
func (g *Guard) DecideCaller(session string, comm func() string, op Op, t Target) Decision {
	return g.DecideBy(Caller{Session: session, Comm: comm}, op, t)
}

// DecideBy is DecideCaller for a caller whose process facts may be known:
// when the session's records refuse and the calling process is a scanner
// with records of its own (NoteReadBy), those decide instead
// (docs/DESIGN.md#scanner-reads), so a scanner that read a file may
// replace it (sed -i, git checkout) although its read made nothing
// writable for its session. c.Facts is called only then, c.Comm only as
// DecideCaller says.
func (g *Guard) DecideBy(c Caller, op Op, t Target) Decision {
	session, comm := c.Session, c.Comm
	if g.mode == ModeOff {
		return Decision{Allow: true}
	}
	g.decisions.Add(1)
	if op == OpUnlink && g.unlink == UnlinkAllow {
		g.allowed.Add(1)
		return Decision{Allow: true}
	}
	if session == sessions.Unknown {
		// EAGAIN, not the configured errno: nothing was decided about this
		// caller and this file, the refusal is transient (the caller's exec
		// ends within moments), and "try again" is what it should do.
		// Guessing a session instead (default) could let a blind overwrite
		// through, or credit the wrong session.
		d := Decision{Code: CodeUnknownSession, Errno: syscall.EAGAIN,
			Message: fmt.Sprintf("refusing to %s %s for now: the caller's session could not be determined (its process is changing, e.g. in execve); try again", op.verb(), t.Path)}
		if g.mode == ModeWarn {
			d.Allow, d.WouldDeny = true, true
			d.Message = WarnPrefix + d.Message
		}
		return d
	}
	tr := g.ForSession(session)
	d := judge(tr, op, t, c.MayName)
	if d.Code != "" && c.Facts != nil && g.hasProcTrackers() {
		if f := c.Facts(); f.Known {
			if pt := g.procTrackerOf(f.Proc); pt != nil {
				if pd := judge(pt, op, t, c.MayName); pd.Code == "" {
					d = pd
				}
			}
		}
	}
	if d.Code != "" && g.git != nil && comm != nil && IsGit(comm()) && g.vouchGit(tr, t) {
		d = judge(tr, op, t, c.MayName)
	}
	if d.Code == "" {
		g.allowed.Add(1)
		return Decision{Allow: true}
	}
	if d.Code == CodeUnread {
		g.unread.Add(1)
	} else {
		g.stale.Add(1)
	}
	tr.NoteEditFailure(t.Stat.ID)
	d.Errno = g.errno
	if g.mode == ModeWarn {
		// The message must not say "refusing" for a mutation that goes
		// through: .rubino/guard/why and the log show it as it is.
		d.Allow, d.WouldDeny = true, true
		if d.Code == CodeUnread {
			d.Message = fmt.Sprintf("%s %s before reading it: read it first", op.verb(), t.Path)
		}
		d.Message = WarnPrefix + d.Message
	}
	return d
}

// judge applies read-before-write to op on t for tr's session: a Decision
// with a Code when refused, the zero Decision when allowed. A file the
// session has no record of is unread, or stale when the session read
// another file at its name since replaced (judgeReplaced; may as
// Caller.MayName).
func judge(tr *Tracker, op Op, t Target, may func(string) bool) Decision {
	switch seen, fresh, err := tr.check(t); {
	case !seen:
		return judgeReplaced(tr, op, t, may)
	case err != nil:
		return Decision{Code: CodeStale, Message: fmt.Sprintf("cannot verify %s against this session's read (%v): read it again before you %s it", t.Path, err, op.verb())}
	case !fresh:
		return Decision{Code: CodeStale, Message: fmt.Sprintf("%s changed on disk since this session read it: read it again before you %s it", t.Path, op.verb())}
	}
	return Decision{}
}
