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
//     handle as is, with kernel passthrough when enabled.
//   - A guarded read-only handle whose read is registered at open is a
//     passthrough handle (ptFile): its reads never reach the daemon.
//   - Every open's io mode is decided from the inode's open handles
//     (Node.ioOpen), so the kernel never refuses a mixed open with EIO
//     (fs/fuse/iomode.c; docs/DESIGN.md#passthrough-io-modes).
//   - O_TRUNC on a guarded file is a mutation: the guard decides before the
//     backing open, under the identity lock, and a refusal leaves the file
//     untouched (EACCES).
//   - A read-only handle registers its read here; a read-write one at its
//     first READ.
//   - An ENOENT while another name of the file is being unlinked or
//     renamed is retried by the node's next name (byNode, names.go).
//   - A file whose every name is gone while it is open is opened through
//     an open handle, as open(/proc/PID/fd/N) does natively (reopen.go).
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	var fh fs.FileHandle
	var fl uint32
	errno := n.byNode(func(rel string) (errno syscall.Errno) {
		fh, fl, errno = n.openRel(ctx, rel, flags, true)
		return errno
	})
	if errno == syscall.ENOENT {
		if rfh, rfl, rerrno, ok := n.reopenGone(ctx, flags); ok { // reopen.go
			return rfh, rfl, rerrno
		}
	}
	return fh, fl, errno
}

// openRel is Open of n found at the workspace-relative path rel. Create's
// EEXIST fallback passes the path it looked up and inTree false: the node
// it has just made is in no directory of go-fuse's tree until Create
// returns, so n.rel() would be an orphan's placeholder
// (".go-fuse.N/deleted/...") and every backing access would fail with
// ENOENT. Such a read-only handle registers its read at its first READ
// (File.Read), once the node has its name, instead of under a placeholder.
func (n *Node) openRel(ctx context.Context, rel string, flags uint32, inTree bool) (fs.FileHandle, uint32, syscall.Errno) {
	if !n.fs.tracks(rel) {
		if flags&syscall.O_TRUNC != 0 {
			defer n.fs.ownChange(rel)()
		}
		lf, errno := n.openAt(rel, flags)
		if errno != 0 {
			return nil, 0, errno
		}
		killPrivOnTrunc(ctx, flags, mustFd(lf))
		pt, drop := n.openHandle(lf, flags, n.fs.cfg.Passthrough)
		if !pt {
			return &plainFile{loopbackOps: lf, node: n, drop: drop}, n.cacheFlags(rel), 0
		}
		if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
			return n.fs.passthroughWriter(lf, rel, drop), 0, 0
		}
		return &keptFile{LoopbackFile: lf, node: n, drop: drop}, 0, 0
	}
	c := n.fs.callerOf(ctx)
	acc := flags & syscall.O_ACCMODE
	writable := acc != syscall.O_RDONLY
	h := &File{node: n, fs: n.fs, who: c, track: true, check: n.fs.guarded(c)}

	// One walk to the parent directory serves the stat and the open. Only
	// a truncating open needs the stat before the open (the guard decides
	// on it); every other open takes the identity from its descriptor
	// (fstat), one path lookup fewer.
	d, leaf, errno := n.fs.prepareAt(rel)
	if errno != 0 {
		return nil, 0, errno
	}
	defer d.close()
	trunc := flags&syscall.O_TRUNC != 0
	var st syscall.Stat_t
	if trunc {
		if _, errno := statAt(d, leaf, &st); errno != 0 {
			return nil, 0, errno
		}
		h.id = guard.StatOf(&st).ID
	}

	var lf *fs.LoopbackFile
	open := func() (errno syscall.Errno) {
		if lf, errno = openFileAt(d, leaf, flags); errno == 0 {
			killPrivOnTrunc(ctx, flags, mustFd(lf))
		}
		return errno
	}
	if writable && trunc && regular(&st) {
		// A guarded mutation (docs/DESIGN.md#mutation-path), decided on
		// the file as stat'ed again under its identity lock.
		errno = n.fs.mutate(ctx, mutation{
			names: []mutName{{rel: rel, change: rewritten}},
			asks:  []ask{{0, guard.OpOpenTrunc}},
			was:   &guardedChild{ok: true, rel: rel, st: st, id: h.id},
			by:    &c,
			run:   open,
			done: func(g guardedChild, seq uint64) {
				h.id = g.id
				h.granted, h.dirty = true, true
				h.beginFlux()
				h.seq = seq
			},
		})
	} else {
		if trunc {
			defer n.fs.ownChange(rel)()
		}
		errno = open()
		if errno == 0 && !trunc {
			if err := syscall.Fstat(mustFd(lf), &st); err != nil {
				lf.Release(ctx)
				return nil, 0, fs.ToErrno(err)
			}
			h.id = guard.StatOf(&st).ID
		}
	}
	if errno != 0 {
		return nil, 0, errno
	}
	h.lf = lf
	h.loopbackOps = h.lf
	dio := n.fs.refusableIO(writable, h.check)
	h.direct = dio != 0
	// A read-only handle whose read is registered here needs the daemon
	// for nothing else, and a write-only direct-I/O one loses nothing as a
	// passthrough handle: both prefer passthrough (iomode.go).
	read := !writable && inTree && (h.check || !n.fs.cfg.AllowUnregistered)
	prefer := n.fs.guardedPassthrough() && (read || writeOnlyDirect(flags, dio))
	pt, drop := n.openHandle(lf, flags, prefer)
	h.drop = drop
	n.fs.cfg.Guard.NoteHandleOpen(h.id)
	if read {
		h.registerRead()
	}
	fh, fl := guardedHandle(h, pt, writable, read, n.cacheFlags(rel)|dio)
	return fh, fl, 0
}

// refusableIO returns FOPEN_DIRECT_IO for a handle whose writes the guard
// may refuse: a writable handle of a guarded file, opened by a caller the
// guard decides for, with the guard enforcing. Every other handle gets 0
// and keeps the page cache. docs/DESIGN.md#refused-writes
//
// Without a writeback cache the kernel copies the bytes of a cached
// write(2) into the shared, up-to-date pages of the file before it sends
// WRITE; a refusal (EACCES) comes too late to keep them from concurrent
// readers, and a reader racing with the kernel's rollback of the page can
// get EIO. A direct-I/O handle's write goes to the daemon straight from the
// caller's buffer, so a refused write touches no page at all, and after an
// allowed one the kernel drops the cached pages of the written range itself
// (fs/fuse/file.c, fuse_direct_io), so readers holding the page cache see
// the new bytes without a notification from the daemon (the watcher
// ignores the daemon's own changes).
//
// The decision is made at open for every such handle, not only for those
// whose session may not write yet: a handle that may write now loses its
// right when another session changes the file, and its next write must
// not reach the page cache either.
func (f *FS) refusableIO(writable, check bool) uint32 {
	if writable && check && f.cfg.Guard.Mode() == guard.ModeEnforce {
		return fuse.FOPEN_DIRECT_IO
	}
	return 0
}

// Create creates a new file (always allowed). It first tries O_EXCL: when the
// name exists after all (another process created it, or the kernel acted on
// a cached negative entry), the call becomes an open of that existing file
// and goes through the guard like any open.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	dirRel := n.rel()
	rel := childPath(dirRel, name)
	end := n.fs.ownChange(rel)
	var st syscall.Stat_t
	ch, lf, errno := n.createAt(ctx, dirRel, name, flags|syscall.O_EXCL, mode, out, &st)
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
		// child is not in go-fuse's tree yet (the bridge adds it when
		// Create returns): open it by the path looked up, not child.rel().
		fh, fl, errno := child.openRel(ctx, rel, flags&^(syscall.O_CREAT|syscall.O_EXCL), false)
		if errno != 0 {
			return nil, nil, 0, errno
		}
		return ch, fh, fl, 0
	}
	if errno != 0 {
		return nil, nil, 0, errno
	}
	child := ch.Operations().(*Node)
	if !n.fs.tracks(rel) {
		pt, drop := child.openHandle(lf, flags, n.fs.cfg.Passthrough)
		if !pt {
			return ch, &plainFile{loopbackOps: lf, node: child, drop: drop}, 0, 0
		}
		return ch, n.fs.passthroughWriter(lf, rel, drop), 0, 0
	}
	c := n.fs.callerOf(ctx)
	h := &File{loopbackOps: lf, lf: lf, node: child, fs: n.fs, who: c,
		track: true, check: n.fs.guarded(c), created: true, granted: true}
	// The creating handle loses its right too once another session
	// changes the file (File.mutate): its writes are refusable, so they
	// always reach the daemon, through FOPEN_DIRECT_IO also when the
	// handle is a passthrough one (docs/DESIGN.md#passthrough-io-modes).
	dio := n.fs.refusableIO(true, h.check)
	h.direct = dio != 0
	pt, drop := child.openHandle(lf, flags, n.fs.guardedPassthrough() && writeOnlyDirect(flags, dio))
	h.drop = drop
	h.id = guard.StatOf(&st).ID // createAt's fstat of the new file
	n.fs.cfg.Guard.NoteHandleOpen(h.id)
	h.dirty = true
	// The new file is the session's own from here (Guard.NoteCreate). Its
	// path is rel: the child joins go-fuse's tree only when Create returns.
	h.seq = n.fs.cfg.Guard.NoteCreate(c.session, guard.Target{Path: rel, Stat: guard.StatOf(&st)})
	fh, fl := guardedHandle(h, pt, true, false, dio)
	return ch, fh, fl, 0
}

// plainFile is an unguarded handle kept out of passthrough. Its writes are
// still the daemon's own changes, for the watcher.
type plainFile struct {
	loopbackOps
	node *Node
	drop func(context.Context) // drops the handle from its node (Node.openHandle)
}

// Release drops the handle from its node, then closes it.
func (p *plainFile) Release(ctx context.Context) syscall.Errno {
	p.drop(ctx)
	return p.loopbackOps.Release(ctx)
}

// ptWriter is a writable handle of an exempt file left to kernel
// passthrough: its writes never reach the daemon, so the whole life of the
// handle is one own change for the watcher, ended at release.
type ptWriter struct {
	*fs.LoopbackFile
	end  func()
	drop func(context.Context) // drops the handle from its node (Node.openHandle)
}

// passthroughWriter wraps a writable passthrough handle on rel; drop is
// its node's Node.openHandle result.
func (f *FS) passthroughWriter(lf *fs.LoopbackFile, rel string, drop func(context.Context)) *ptWriter {
	return &ptWriter{LoopbackFile: lf, end: f.ownChange(rel), drop: drop}
}

// Release closes the handle and ends its own change.
func (p *ptWriter) Release(ctx context.Context) syscall.Errno {
	p.drop(ctx)
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
