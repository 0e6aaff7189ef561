package fusefs

// The mount as internal/rewind sees it (rewindroom.Mount, on journalMount):
// the backing workspace, the kernel's caches, and Apply, the one entry of
// a rewind's step into the mutation path (docs/DESIGN.md#journal-hook).

import (
	"context"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	rewindroom "github.com/rubinofs/rubinofs/internal/rewind"
)

// RewindMount is the mount as the journal's rewind and diff see it, to
// pass to rewind.New in daemon assembly (docs/DESIGN.md#ctl-room).
func (f *FS) RewindMount() rewindroom.Mount { return journalMount{f} }

// Lstat is lstatRel: rel's stat without following a symlink.
func (m journalMount) Lstat(rel string, st *syscall.Stat_t) syscall.Errno {
	return m.f.bk.lstatRel(rel, st)
}

// LookupTarget is FS.LookupTarget.
func (m journalMount) LookupTarget(rel string) (guard.Target, error) { return m.f.LookupTarget(rel) }

// OpenForHash is openForHashAt.
func (m journalMount) OpenForHash(rel string) (*os.File, error) { return m.f.bk.openForHashAt(rel) }

// Checkpointed starts a new generation of the open handles' journal
// records (journalhook.Hook.Checkpointed).
func (m journalMount) Checkpointed() { m.f.jh.Checkpointed() }

// Apply runs ch as one mutation of the rewind kind: by's session's own
// change, without the guard's decision (the conflict rule replaced it), journaled, bracketed for the watcher, noted to the guard and
// credited (docs/DESIGN.md#journal-hook). A write rewrites ch.Rel in place
// (in flux, credited, as a truncate by path); an unlink removes a name
// whose file may lose its last link (pinned); a rename or exchange moves
// ch.Rel and ch.To; every other op (chmod, mkdir, symlink, create, rmdir)
// is a fresh mutation of ch.Rel.
func (m journalMount) Apply(by rewindroom.By, ch rewindroom.Change) syscall.Errno {
	c := caller{session: by.Session, uid: by.Uid, gid: by.Gid}
	mu := mutation{kind: rewind, by: &c, jop: ch.Op, run: func(at []dirFd) syscall.Errno {
		fds := make([]int, len(at))
		for i, d := range at {
			fds[i] = d.FD
		}
		return ch.Run(fds)
	}}
	switch ch.Op {
	case jWrite:
		mu.names = []mutName{{rel: ch.Rel, change: truncated}}
	case jUnlink:
		mu.names = []mutName{{rel: ch.Rel, change: unlinked, pin: true}}
	case jRename:
		mu.names = []mutName{{rel: ch.Rel, change: unchanged, to: ch.To}, {rel: ch.To, change: replaced, pin: true}}
	case jExchange:
		mu.names = []mutName{{rel: ch.Rel, change: rewritten, to: ch.To}, {rel: ch.To, change: rewritten, pin: true, to: ch.Rel}}
	default:
		mu.names = []mutName{{rel: ch.Rel}}
		mu.kind = fresh
	}
	if ch.Op != jRename && ch.Op != jExchange {
		return m.f.mutate(context.Background(), mu)
	}
	// Checked and renamed with no other rename between (moveSerial).
	f := m.f
	var st syscall.Stat_t
	ks, kd := uint32(0), uint32(0)
	if f.bk.lstatRel(ch.Rel, &st) == 0 {
		ks = st.Mode & syscall.S_IFMT
	}
	if ch.Op == jExchange && f.bk.lstatRel(ch.To, &st) == 0 {
		kd = st.Mode & syscall.S_IFMT
	}
	defer f.moveSerial(ch.Rel, ch.To, ks == syscall.S_IFDIR || kd == syscall.S_IFDIR)()
	if ch.Forced {
		if errno := f.forcedMove(c, ch.Rel, ks, ch.To); errno != 0 {
			return errno
		}
		if ch.Op == jExchange {
			if errno := f.forcedMove(c, ch.To, kd, ch.Rel); errno != 0 {
				return errno
			}
		}
	}
	return f.mutate(context.Background(), mu)
}

// forcedMove refuses a forced rewind's move of what of type kind is at
// from to the name to (rewindroom.Change.Forced) when it would give
// content the guard covers an exempt name (givesExempt) or a tool tree's
// exemption (ignore.Tools.Moved): EXDEV, recorded as the session's denial
// with its reason (guard.Guard.RefuseExemptName, RefuseToolTree). Another
// session's change is at or below one of the names, so the conflict rule
// cannot vouch for what moves, and `mv src/old.c t/nm/` by one session
// would otherwise be freed by the forced rewind of another's `mv
// t/node_modules t/nm`. The caller holds moveSerial's lock.
func (f *FS) forcedMove(c caller, from string, kind uint32, to string) syscall.Errno {
	if f.cfg.Exempt == nil && !f.cfg.Tools.Enabled() || !f.guarded(c) {
		return 0
	}
	if f.givesExempt(from, kind, to) {
		return f.cfg.Guard.RefuseExemptName(c.asker(f), guard.OpMoveExempt, from, to)
	}
	if f.mayFreeTool(from, kind, to) && f.toolFrees(c, from, kind, to) != ignore.FreesNothing {
		return f.cfg.Guard.RefuseToolTree(c.asker(f), guard.OpMoveExempt, from, to)
	}
	return 0
}

// Invalidate drops the kernel's caches of rels (each name's dentry, its
// inode's data and attributes, its parent's attributes and listing) from
// a goroutine, never from the calling request handler, and returns a
// channel closed once the notifications were sent.
func (m journalMount) Invalidate(rels []string) <-chan struct{} {
	f := m.f
	done := make(chan struct{})
	if f.server.Load() == nil || len(rels) == 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		for _, rel := range rels {
			dir, name := path.Split(rel)
			parent, ok := lookupInode(f.root.EmbeddedInode(), strings.TrimSuffix(dir, "/"))
			if !ok {
				continue // the kernel knows nothing below it
			}
			if child := parent.GetChild(name); child != nil {
				child.NotifyContent(0, 0)
				var st syscall.Stat_t
				if f.bk.lstatRel(rel, &st) != 0 {
					parent.RmChild(name)
				}
			}
			parent.NotifyEntry(name)
			parent.NotifyContent(0, 0)
		}
	}()
	return done
}
