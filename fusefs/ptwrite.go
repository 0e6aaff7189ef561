package fusefs

// Stores through a shared mapping of a read-write passthrough handle
// (docs/DESIGN.md#passthrough-mmap-credit).

import (
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// ptWriters are the open read-write passthrough handles of one inode
// (File.pt): a shared writable mapping of any of them stores into the
// backing file without a WRITE reaching the daemon. Concurrency: mu
// guards open.
type ptWriters struct {
	mu   sync.Mutex
	open map[*File]struct{}
}

// ptState is a read-write passthrough handle's view of its unseen
// stores. Concurrency: base and seq under the handle's mu; mixed is set
// by another handle's open.
type ptState struct {
	on bool // the handle is a read-write passthrough one
	// base is the content stat (size, mtime) the backing file had at
	// open, or after the handle's last own change or credit; seq is the
	// file's mutation sequence then.
	base guard.Stat
	seq  uint64
	// mixed: a read-write passthrough handle of another session was open
	// at the same time, so an unseen store may be either's.
	mixed atomic.Bool
	// released: the handle's Release has credited it for the last time
	// and will close its descriptor (set under the handle's mu).
	released bool
}

// decidePtOpen decides h, a guarded read-write handle of n that the kernel
// can only open in passthrough mode because another passthrough handle
// holds the inode (Node.ioOpen), before its open is answered: a shared
// writable mapping of it would store into the backing file with no
// request to the daemon, so no page-in could be refused
// (docs/DESIGN.md#mmap-page-in). The open is allowed only while the
// session may write the file now, as the guard decides for guard.OpOpenRW
// on the file at rel; otherwise it gets the guard's errno (EACCES by
// default), logged in the denial log. The unseen stores of the session's
// own open read-write passthrough handles of n are credited first
// (creditPtWriters), so two processes of one session never make each
// other stale. Called with no handle's mu held.
func (n *Node) decidePtOpen(h *File, rel string) syscall.Errno {
	n.creditPtWriters(h.who.session)
	unlock := h.fs.cfg.Guard.Lock(h.id)
	defer unlock()
	var errno syscall.Errno
	h.fd(func(fd int) syscall.Errno {
		t, err := fdTarget(rel, fd)
		if err != nil {
			errno = fs.ToErrno(err)
			return 0
		}
		errno = h.fs.decide(h.who, guard.OpOpenRW, t)
		return 0
	})
	return errno
}

// creditPtWriters credits (File.credit) every open read-write passthrough
// handle of n whose session is session, with the stores made through its
// shared mappings so far (notePtStores). A handle whose Release has run
// its last credit is skipped: its descriptor may be closing.
func (n *Node) creditPtWriters(session string) {
	w := &n.ptw
	w.mu.Lock()
	var mine []*File
	for o := range w.open {
		if o.who.session == session {
			mine = append(mine, o)
		}
	}
	w.mu.Unlock()
	for _, o := range mine {
		o.mu.Lock()
		if !o.pt.released {
			o.credit()
		}
		o.mu.Unlock()
	}
}

// notePtWriter registers h, a guarded handle just opened read-write with
// kernel passthrough, whose file st describes (its stat after the open,
// or what its own truncation left). Called before the handle is returned.
func (n *Node) notePtWriter(h *File, st guard.Stat) {
	h.pt.on = true
	h.pt.base = st
	h.pt.seq = h.seq
	if h.seq == 0 {
		h.pt.seq = n.fs.cfg.Guard.LastMutation(h.id).Seq
	}
	w := &n.ptw
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open == nil {
		w.open = make(map[*File]struct{})
	}
	for o := range w.open {
		if o.who.session != h.who.session {
			o.pt.mixed.Store(true)
			h.pt.mixed.Store(true)
		}
	}
	w.open[h] = struct{}{}
}

// dropPtWriter forgets h at its release.
func (n *Node) dropPtWriter(h *File) {
	if !h.pt.on {
		return
	}
	n.ptw.mu.Lock()
	delete(n.ptw.open, h)
	n.ptw.mu.Unlock()
}

// ptOwnChange moves the baseline to the change the handle just made
// through the daemon (File.mutate), at sequence seq: only what comes
// after it is unseen. Called under h.mu and the identity lock.
func (h *File) ptOwnChange(seq uint64) {
	if h.pt.on && h.own.ok {
		h.pt.base, h.pt.seq = h.own.st, seq
	}
}

// notePtStores finds the stores a read-write passthrough handle made
// through a shared mapping since its baseline: the backing file's size or
// mtime changed with no mutation through the mount since but the
// session's own. They are noted as the session's change (NoteMutation:
// other sessions' records go stale) and the handle is dirty, so the
// credit that follows (File.credit) records the content as the session's
// own write. When a read-write passthrough handle of another session was
// open meanwhile, the change is noted as an outside one instead (the hash
// decides for everyone). An outside change the watcher reported since the
// baseline does not stop the credit unless another session changed the
// file through the mount too: the stores raise no event of their own and
// move the stat under the event of the session's earlier write, which is
// then reported as outside (docs/DESIGN.md#passthrough-mmap-credit).
// Called under h.mu, before credit.
func (h *File) notePtStores() {
	if !h.pt.on || !h.track {
		return
	}
	unlock := h.fs.cfg.Guard.Lock(h.id)
	defer unlock()
	var st syscall.Stat_t
	if h.fd(func(fd int) syscall.Errno { return fs.ToErrno(syscall.Fstat(fd, &st)) }) != 0 {
		return
	}
	cur := guard.StatOf(&st)
	if cur.ID != h.pt.base.ID || cur.Size == h.pt.base.Size && cur.MtimeNs == h.pt.base.MtimeNs {
		return // no content change since the baseline
	}
	h.pt.base = cur
	last := h.fs.cfg.Guard.LastMutation(h.id)
	if h.pt.mixed.Load() {
		h.pt.seq = h.fs.cfg.Guard.NoteMutation(h.id, sessions.External)
		return
	}
	if last.Seq != h.pt.seq && last.Session != h.who.session &&
		(last.Session != sessions.External || h.fs.cfg.Guard.ForSession(h.who.session).Foreign(h.id)) {
		return // another session changed it through the mount: the hash decides
	}
	h.seq = h.fs.cfg.Guard.NoteMutation(h.id, h.who.session) // the session's rewrite
	h.pt.seq = h.seq
	h.dirty = true
	h.wh.Break() // the stores were not hashed as they passed
	h.noteOwnStat()
}
