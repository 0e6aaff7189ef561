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
	return m.f.mutate(context.Background(), mu)
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
