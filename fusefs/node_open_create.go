package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
)

// tracks reports whether the guard keeps state for rel at all: the guard is
// not off and rel is not exempt.
func (f *FS) tracks(rel string) bool {
	return f.cfg.Guard.Mode() != guard.ModeOff && !f.exempt(rel, false)
}

// Open opens an existing file.
//
//   - Exempt files (and every file with the guard off) get the loopback's
//     handle as is, with kernel passthrough when enabled. Passthrough is
//     chosen per path, so all handles of one inode agree on it and the
//     kernel never refuses a mixed open with EIO (fs/fuse/iomode.c).
//   - O_TRUNC on a guarded file is a mutation: the guard decides before the
//     backing open, under the identity lock, and a refusal leaves the file
//     untouched (EACCES).
//   - A read-only handle registers its read here; a read-write one at its
//     first READ.
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	if !n.fs.tracks(rel) {
		if flags&syscall.O_TRUNC != 0 {
			defer n.fs.ownChange(rel)()
		}
		fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
		if errno != 0 {
			return nil, 0, errno
		}
		lf := fh.(*fs.LoopbackFile)
		if !n.fs.cfg.Passthrough {
			return &plainFile{loopbackOps: lf, node: n}, fl | n.cacheFlags(rel), 0
		}
		if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
			return n.fs.passthroughWriter(lf, rel), fl, 0
		}
		return lf, fl, 0
	}
	c := n.fs.callerOf(ctx)
	acc := flags & syscall.O_ACCMODE
	writable := acc != syscall.O_RDONLY
	h := &File{node: n, fs: n.fs, who: c, track: true, check: n.fs.guarded(c)}

	var st syscall.Stat_t
	if err := syscall.Lstat(n.fs.backing(rel), &st); err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	h.id = guard.StatOf(&st).ID

	open := func() (fs.FileHandle, uint32, syscall.Errno) {
		return n.LoopbackNode.Open(ctx, flags)
	}
	var (
		fh    fs.FileHandle
		fl    uint32
		errno syscall.Errno
	)
	if writable && flags&syscall.O_TRUNC != 0 && regular(&st) {
		// Decide on a stat taken under the identity lock (lockFresh).
		gs, unlock := n.fs.lockFresh(rel)
		if gs[0].ok {
			st, h.id = gs[0].st, gs[0].id
		}
		if h.check {
			if errno = n.fs.decide(c, guard.OpOpenTrunc, n.fs.target(rel, &st)); errno != 0 {
				unlock()
				return nil, 0, errno
			}
		}
		end := n.fs.ownChange(rel)
		fh, fl, errno = open()
		end()
		if errno == 0 {
			h.granted, h.dirty = true, true
			h.beginFlux()
			h.seq = n.fs.cfg.Guard.NoteMutation(h.id, c.session)
		}
		unlock()
	} else {
		if flags&syscall.O_TRUNC != 0 {
			defer n.fs.ownChange(rel)()
		}
		fh, fl, errno = open()
	}
	if errno != 0 {
		return nil, 0, errno
	}
	h.lf = fh.(*fs.LoopbackFile)
	h.loopbackOps = h.lf
	if !writable && (h.check || !n.fs.cfg.AllowUnregistered) {
		h.registerRead()
	}
	return h, fl | n.cacheFlags(rel), 0
}

// Create creates a new file (always allowed). It first tries O_EXCL: when the
// name exists after all (another process created it, or the kernel acted on
// a cached negative entry), the call becomes an open of that existing file
// and goes through the guard like any open.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	end := n.fs.ownChange(n.childRel(name))
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags|syscall.O_EXCL, mode, out)
	end()
	if errno == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		ch, errno = n.Lookup(ctx, name, out)
		if errno != 0 {
			return nil, nil, 0, errno
		}
		child, ok := ch.Operations().(*Node)
		if !ok {
			return nil, nil, 0, syscall.EISDIR
		}
		fh, fl, errno = child.Open(ctx, flags&^(syscall.O_CREAT|syscall.O_EXCL))
		if errno != 0 {
			return nil, nil, 0, errno
		}
		return ch, fh, fl, 0
	}
	if errno != 0 {
		return nil, nil, 0, errno
	}
	rel := n.childRel(name)
	lf := fh.(*fs.LoopbackFile)
	if !n.fs.tracks(rel) {
		if !n.fs.cfg.Passthrough {
			return ch, &plainFile{loopbackOps: lf, node: ch.Operations().(*Node)}, fl, 0
		}
		return ch, n.fs.passthroughWriter(lf, rel), fl, 0
	}
	c := n.fs.callerOf(ctx)
	h := &File{loopbackOps: lf, lf: lf, node: ch.Operations().(*Node), fs: n.fs, who: c,
		track: true, check: n.fs.guarded(c), created: true, granted: true}
	var st syscall.Stat_t
	if err := syscall.Fstat(mustFd(lf), &st); err == nil {
		h.id = guard.StatOf(&st).ID
	}
	h.dirty = true
	h.seq = n.fs.cfg.Guard.NoteMutation(h.id, c.session)
	return ch, h, fl, 0
}

// plainFile is an unguarded handle kept out of passthrough. Its writes are
// still the daemon's own changes, for the watcher.
type plainFile struct {
	loopbackOps
	node *Node
}

// ptWriter is a writable handle of an exempt file left to kernel
// passthrough: its writes never reach the daemon, so the whole life of the
// handle is one own change for the watcher, ended at release.
type ptWriter struct {
	*fs.LoopbackFile
	end func()
}

// passthroughWriter wraps a writable passthrough handle on rel.
func (f *FS) passthroughWriter(lf *fs.LoopbackFile, rel string) *ptWriter {
	return &ptWriter{LoopbackFile: lf, end: f.ownChange(rel)}
}

// Release closes the handle and ends its own change.
func (p *ptWriter) Release(ctx context.Context) syscall.Errno {
	errno := p.LoopbackFile.Release(ctx)
	p.end()
	return errno
}

// Write writes through the loopback handle as an own change.
func (p *plainFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	defer p.node.fs.ownChange(p.node.rel())()
	return p.loopbackOps.Write(ctx, data, off)
}

// mustFd returns the descriptor of a live loopback handle.
func mustFd(lf *fs.LoopbackFile) int {
	fd, _ := lf.PassthroughFd()
	return fd
}
