package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/journalhook"
)

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
//     first READ. A read-write open that can only be a passthrough one
//     (another passthrough handle holds the inode) is decided here
//     instead, since its mapped stores would reach no handler
//     (Node.decidePtOpen; EACCES for an unread or stale file).
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
	pol := n.fs.policyOf(rel, false, n.fs.cross.Shared()) // one answer for the open's decisions
	pol.cache = n.fs.cachesPages(rel, pol.shared)
	if !pol.tracks {
		return n.openUntracked(ctx, rel, flags, pol)
	}
	c := n.fs.callerOf(ctx)
	acc := flags & syscall.O_ACCMODE
	writable := acc != syscall.O_RDONLY
	h := &File{node: n, fs: n.fs, who: c, track: true, check: n.fs.guarded(c)}
	if writable && n.fs.jh != nil {
		h.hj = n.fs.jh.NewHandle(c.session)
	}

	// One walk to the parent directory serves the stat and the open. Only
	// a truncating open needs the stat before the open (the guard decides
	// on it); every other open takes the identity from its descriptor
	// (fstat), one path lookup fewer.
	d, leaf, errno := n.fs.bk.prepareAt(rel)
	if errno != 0 {
		return nil, 0, errno
	}
	defer d.Close()
	trunc := flags&syscall.O_TRUNC != 0
	var st syscall.Stat_t
	if trunc {
		if _, errno := statAt(d, leaf, &st); errno != 0 {
			return nil, 0, errno
		}
		if errno := n.isFileAt(&st); errno != 0 {
			return nil, 0, errno // before the truncation (docs/DESIGN.md#dir-identity)
		}
		h.id = guard.StatOf(&st).ID
	}

	var lf *fs.LoopbackFile
	open := func() (errno syscall.Errno) {
		if lf, errno = openFileAt(d, leaf, n.fs.cross.DirectFlags(flags)); errno == 0 {
			killPrivOnTrunc(ctx, flags, mustFd(lf))
			if trunc {
				n.fs.cross.SyncBeforeUnlock(mustFd(lf)) // the truncation reaches the server under the locks
			}
		}
		return errno
	}
	if writable && trunc && regular(&st) {
		gen := n.fs.jh.Gen() // before the record (journalhook.Handle)
		// A guarded mutation (docs/DESIGN.md#mutation-path), decided on
		// the file as stat'ed again under its identity lock.
		var seq uint64
		seq, errno = mutation{
			subject: subject{names: []mutName{{rel: rel, change: rewritten}}},
			asks:    []ask{{0, guard.OpOpenTrunc}},
			was:     &guardedChild{ok: true, rel: rel, st: st, id: h.id},
			by:      &c,
			jop:     jTruncate,
			run:     func([]dirFd) syscall.Errno { return open() },
			then: func(g guardedChild) {
				h.id = g.id
				h.granted, h.dirty = true, true
				h.beginFlux()
				h.lf = lf
				h.noteOwnStat()     // the stat the truncation left (ownstat.go)
				h.hj.Truncated(gen) // the open's record is the handle's first
			},
		}.apply(ctx, n.fs)
		if errno == 0 {
			h.seq = seq // the handle is no one's but this open's yet
		}
	} else {
		if trunc {
			defer n.fs.oc.ownChange(rel)()
		}
		errno = open()
		if errno == 0 && !trunc {
			if err := syscall.Fstat(mustFd(lf), &st); err != nil {
				lf.Release(ctx)
				return nil, 0, fs.ToErrno(err)
			}
			if errno := n.isFileAt(&st); errno != 0 {
				lf.Release(ctx)
				return nil, 0, errno
			}
			h.id = guard.StatOf(&st).ID
		}
	}
	if errno != 0 {
		return nil, 0, errno
	}
	h.lf, h.loopbackOps = lf, lf
	dio := n.fs.refusableIO(writable, h.check)
	// A read-only handle whose read is registered here needs the daemon
	// for nothing else (passthrough, or kept pages: FS.pagedRead), and a
	// write-only direct-I/O one loses nothing as passthrough (iomode.go).
	read := !writable && inTree && (h.check || !n.fs.cfg.AllowUnregistered)
	shared := pol.shared
	if shared && !writable {
		// Served and registered by the daemon at its first READ
		// (shared_read.go).
		h.shared, read, dio = true, false, fuse.FOPEN_DIRECT_IO
	}
	h.direct = dio != 0
	prefer := n.fs.guardedPassthrough() && (read && !n.fs.pagedRead(pol, st.Size, -1) || writeOnlyDirect(flags, dio))
	pt, drop := n.openHandle(lf, flags, prefer)
	if pt && acc == syscall.O_RDWR && h.check && !h.granted {
		// Forced into passthrough: its shared mappings would store
		// unseen (docs/DESIGN.md#passthrough-mmap-credit).
		if errno := n.decidePtOpen(h, rel); errno != 0 {
			drop(context.Background()) // no handle reached the kernel: uncounted now
			lf.Release(ctx)
			return nil, 0, errno
		}
	}
	h.drop = drop
	n.fs.cfg.Guard.NoteHandleOpen(h.id)
	if pt && acc == syscall.O_RDWR {
		// Its shared mappings store into the backing file unseen
		// (docs/DESIGN.md#passthrough-mmap-credit).
		base := guard.StatOf(&st)
		if h.own.ok {
			base = h.own.st // what its own truncation left
		}
		n.notePtWriter(h, base)
	}
	if read {
		h.registerRead()
	}
	// Shared: close-to-open, the kernel drops its pages at every open.
	fh, fl := guardedHandle(h, pt, writable, read, pol.cacheFlag()|dio)
	return fh, fl, 0
}

// refusableIO returns FOPEN_DIRECT_IO for a handle whose writes the guard
// may refuse: writable, of a guarded file, opened by a caller the guard
// decides for, the guard enforcing; 0 (the page cache) for every other.
// A cached write(2) fills the shared pages before WRITE reaches us, too
// late for a refusal; a direct-I/O write touches no page, and the kernel
// drops the written range after an allowed one. Decided at open for every
// such handle: its right can end when another session changes the file.
// docs/DESIGN.md#refused-writes
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
	pol := n.fs.policyOf(rel, false, n.fs.cross.Shared())
	pol.cache = n.fs.cachesPages(rel, pol.shared)
	tracked := pol.tracks
	var c caller
	if tracked || pol.journals {
		c = n.fs.callerOf(ctx)
	}
	var st syscall.Stat_t
	var ch *fs.Inode
	var lf *fs.LoopbackFile
	gen := n.fs.jh.Gen() // before the record (journalhook.Handle)
	// One fresh mutation (docs/DESIGN.md#journal-hook): O_EXCL fails on
	// an existing name, so no guarded file's identity needs its lock.
	errno := n.fs.mutate(ctx, mutation{
		kind:    fresh,
		subject: subject{names: []mutName{{rel: rel, dir: n}}},
		by:      &c,
		jop:     jCreate,
		run: func(at []dirFd) (e syscall.Errno) {
			ch, lf, e = n.createAt(ctx, at[0], dirRel, name, flags|syscall.O_EXCL, mode, out, &st)
			return e
		},
	})
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
	hj := n.fs.jh.Created(rel, c.session, gen)
	if !tracked {
		pt, drop := child.openHandle(lf, flags, n.fs.cfg.Passthrough && hj == nil)
		if !pt {
			return ch, &plainFile{loopbackOps: lf, node: child, drop: drop, hj: hj}, 0, 0
		}
		return ch, n.fs.passthroughWriter(lf, rel, drop, hj), 0, 0
	}
	h := &File{loopbackOps: lf, lf: lf, node: child, fs: n.fs, who: c,
		track: true, check: n.fs.guarded(c), created: true, granted: true, hj: hj}
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
	h.own = ownStat{ok: true, st: guard.StatOf(&st)}
	n.fs.cross.NoteOwn(h.id, h.own.st)
	fh, fl := guardedHandle(h, pt, true, false, dio)
	return ch, fh, fl, 0
}

// openUntracked is openRel of a file the guard keeps no state for (it is
// exempt, or the guard is off): the loopback's handle, with kernel
// passthrough when enabled, except for a writable handle whose changes
// the journal records (docs/DESIGN.md#journal-hook), which stays a
// plainFile so its writes reach the daemon. An O_TRUNC open of a
// journaled file is one fresh mutation, journaled as a truncate.
func (n *Node) openUntracked(ctx context.Context, rel string, flags uint32, pol policy) (fs.FileHandle, uint32, syscall.Errno) {
	writable := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	var hj *journalhook.Handle
	var session string
	if writable && pol.journals {
		session = n.fs.callerOf(ctx).session
		hj = n.fs.jh.NewHandle(session)
	}
	var lf *fs.LoopbackFile
	open := func() (errno syscall.Errno) {
		if lf, errno = n.openAt(rel, flags); errno == 0 {
			killPrivOnTrunc(ctx, flags, mustFd(lf))
		}
		return errno
	}
	var errno syscall.Errno
	switch {
	case flags&syscall.O_TRUNC != 0 && hj != nil:
		c := caller{session: session}
		gen := n.fs.jh.Gen() // before the record (journalhook.Handle)
		errno = n.fs.mutate(ctx, mutation{kind: fresh, subject: subject{names: []mutName{{rel: rel}}}, by: &c, jop: jTruncate,
			run: func([]dirFd) syscall.Errno { return open() }})
		hj.Truncated(gen)
	case flags&syscall.O_TRUNC != 0:
		end := n.fs.oc.ownChange(rel)
		errno = open()
		end()
	default:
		errno = open()
	}
	if errno != 0 {
		return nil, 0, errno
	}
	prefer := n.fs.cfg.Passthrough && hj == nil && (writable || !n.fs.pagedRead(pol, -1, mustFd(lf)))
	pt, drop := n.openHandle(lf, flags, prefer)
	if !pt {
		return &plainFile{loopbackOps: lf, node: n, drop: drop, hj: hj}, pol.cacheFlag(), 0
	}
	if writable {
		// Forced into passthrough by another handle of the inode: its
		// writes never reach the daemon, so its first change is
		// journaled now, before any.
		if errno := hj.Change(jWrite, rel); errno != 0 {
			drop(ctx)
			lf.Release(ctx)
			return nil, 0, errno
		}
		return n.fs.passthroughWriter(lf, rel, drop, hj), 0, 0
	}
	return &keptFile{LoopbackFile: lf, node: n, drop: drop}, 0, 0
}

// plainFile is an unguarded handle kept out of passthrough. Its writes are
// still the daemon's own changes, for the watcher, and journaled (hj).
type plainFile struct {
	loopbackOps
	node *Node
	drop func(context.Context) // drops the handle from its node (Node.openHandle)
	hj   *journalhook.Handle   // nil: not journaled
}

// Release drops the handle from its node, then closes it.
func (p *plainFile) Release(ctx context.Context) syscall.Errno {
	p.drop(ctx)
	if p.hj != nil {
		fd := -1
		if lf, ok := p.loopbackOps.(*fs.LoopbackFile); ok {
			fd = mustFd(lf)
		}
		p.hj.Release(p.node.rel(), fd)
	}
	return p.loopbackOps.Release(ctx)
}

// ptWriter is a writable handle of an exempt file left to kernel
// passthrough: its writes never reach the daemon, so the whole life of the
// handle is one own change for the watcher, ended at release.
type ptWriter struct {
	*fs.LoopbackFile
	end  func()
	drop func(context.Context) // drops the handle from its node (Node.openHandle)
	rel  string
	fs   *FS
	hj   *journalhook.Handle // journaled at open (nil: not journaled)
}

// passthroughWriter wraps a writable passthrough handle on rel; drop is
// its node's Node.openHandle result, hj its journal state (or nil).
func (f *FS) passthroughWriter(lf *fs.LoopbackFile, rel string, drop func(context.Context), hj *journalhook.Handle) *ptWriter {
	return &ptWriter{LoopbackFile: lf, end: f.oc.ownChange(rel), drop: drop, rel: rel, fs: f, hj: hj}
}

// Release closes the handle and ends its own change.
func (p *ptWriter) Release(ctx context.Context) syscall.Errno {
	p.drop(ctx)
	fd := mustFd(p.LoopbackFile)
	if p.hj != nil {
		p.hj.Release(p.rel, fd) // by its descriptor, before the close: p.rel is the name at open
	}
	errno := p.LoopbackFile.Release(ctx)
	p.end()
	return errno
}

// Write writes through the loopback handle as an own change, journaled
// first (Handle.Change: its errno refuses the write).
func (p *plainFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := p.hj.Change(jWrite, p.node.rel()); errno != 0 {
		return 0, errno
	}
	defer p.node.fs.oc.ownChange(p.node.rel())()
	return p.loopbackOps.Write(ctx, data, off)
}

// Allocate is fallocate(2) through the handle, journaled as a write.
func (p *plainFile) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if errno := p.hj.Change(jWrite, p.node.rel()); errno != 0 {
		return errno
	}
	defer p.node.fs.oc.ownChange(p.node.rel())()
	return p.loopbackOps.Allocate(ctx, off, size, mode)
}

// mustFd returns the descriptor of a live loopback handle.
func mustFd(lf *fs.LoopbackFile) int {
	fd, _ := lf.PassthroughFd()
	return fd
}
