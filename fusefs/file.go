package fusefs

import (
	"context"
	"os"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/journalhook"
)

// loopbackOps is every file operation of fs.LoopbackFile except
// PassthroughFd. Embedding it (rather than *fs.LoopbackFile) keeps a guarded
// handle out of kernel passthrough, which would hide its writes from the
// guard: a handle on a guarded file that may write is never given to the
// kernel for passthrough.
type loopbackOps interface {
	fs.FileGetattrer
	fs.FileReader
	fs.FileWriter
	fs.FileGetlker
	fs.FileSetlker
	fs.FileSetlkwer
	fs.FileLseeker
	fs.FileFlusher
	fs.FileFsyncer
	fs.FileSetattrer
	fs.FileAllocater
	fs.FileReleaser
	fs.FileIoctler
}

// File is an open file handle on a guarded (non-exempt) backing file.
//
// Reads are registered with the session seen at open: at open for a
// read-only handle, at the first READ otherwise. The first mutation through
// a writable handle asks the guard (deferred from open, so an O_RDWR open
// that never writes is never refused); the right it gets is lost as soon as
// another session mutates the file. Own writes are credited (guard.NoteWrite)
// at flush and release, attributed to the opener's session because RELEASE
// arrives with pid 0. A writable handle the guard may refuse is a direct-I/O
// handle (FS.refusableIO), so a refused write never reaches the page cache.
//
// Concurrency: mu serialises the handle's own bookkeeping; guarded mutations
// additionally hold guard.Lock for the file identity.
type File struct {
	loopbackOps
	lf   *fs.LoopbackFile
	node *Node
	fs   *FS

	who     caller // the session and pid seen at open
	check   bool   // the guard decides this handle's mutations
	track   bool   // register reads, credit writes
	id      guard.FileID
	created bool // this handle created the file
	direct  bool // opened with FOPEN_DIRECT_IO (FS.refusableIO)
	// drop drops the handle from its node (Node.openHandle).
	drop func(context.Context)
	// hj is the handle's journal state (nil: not writable, or no
	// journal): its first change is recorded, its file noted at release.
	hj *journalhook.Handle

	mu         sync.Mutex
	registered bool   // the read has been registered
	granted    bool   // the handle may mutate
	seq        uint64 // mutation sequence the right was checked against
	dirty      bool   // mutated and not yet credited
	// fluxPending: this handle made a daemon-first change (O_TRUNC open,
	// truncate, ...) and has sent no request since (see settle).
	fluxPending bool
	// wh hashes what the handle writes while it writes the file in order
	// from offset 0, so credit need not read it back
	// (docs/DESIGN.md#lazy-hash).
	wh guard.WriteHash
	// own is the stat the handle's own last change left (ownstat.go).
	own ownStat
	// shared: a shared read handle (shared_read.go); readStat is the stat
	// its registered read was taken at.
	shared   bool
	readStat guard.Stat
	// pt: a read-write passthrough handle's unseen stores (ptwrite.go).
	pt ptState
}

// fd runs fn with the handle's backing descriptor. The descriptor stays
// open until Release, and fn never runs after it.
func (h *File) fd(fn func(fd int) syscall.Errno) syscall.Errno {
	// PassthroughFd is go-fuse's only exported way to the descriptor; the
	// handle itself never offers it to the kernel (see loopbackOps).
	fd, ok := h.lf.PassthroughFd()
	if !ok {
		return syscall.EBADF
	}
	return fn(fd)
}

// registerRead registers the content of the handle as read by its session,
// under the identity lock so no guarded mutation is half-done. While a
// daemon-first change of the file is pending in the kernel (flux.in: an
// O_TRUNC open whose handle has not been used since), the kernel may serve
// this reader older bytes from its page cache than the hash taken now, so
// the read is registered in flux and will not vouch for a write. Without
// this, two sessions could both write a value derived from the same read:
// a lost update (tests/sessions_test.go TestSessionsConcurrentCounter).
func (h *File) registerRead() {
	if !h.track || h.registered {
		return
	}
	h.registered = true
	// Whose reads these are (the session's, a scanner process's, or no
	// one's: docs/DESIGN.md#scanner-reads) is read from /proc before the
	// identity lock is taken, bounded by procfs.Bound.
	gc := h.who.guardCaller(h.fs)
	if h.fs.cfg.Guard.WantsFacts(h.who.session) {
		gc.Facts()
	}
	unlock := h.fs.cfg.Guard.Lock(h.id)
	defer unlock()
	h.fd(func(fd int) syscall.Errno {
		t, err := fdTarget(h.node.rel(), fd)
		if err != nil {
			return 0
		}
		// The hash of a large file is deferred (docs/DESIGN.md#lazy-hash):
		// the background worker opens it by its backing path, since this
		// handle may be gone by then.
		rel := t.Path
		later := func() (*os.File, error) { return h.fs.bk.openForHashAt(rel) }
		if h.fs.flux.in(h.id) {
			h.fs.cfg.Guard.NoteReadInFluxBy(gc, t)
		} else if _, err := h.fs.cfg.Guard.NoteReadDeferred(gc, t, later); err != nil {
			h.fs.log.Warn("registering a read failed: the session must read the file again", "path", t.Path, "session", h.who.session, "err", err)
		}
		return 0
	})
}

// beginFlux marks a daemon-first change by this handle as pending in the
// kernel until the handle's next request (which the kernel sends only after
// the syscall that made the change has returned).
func (h *File) beginFlux() {
	if !h.fluxPending {
		h.fluxPending = true
		h.fs.flux.add(h.id, 1)
	}
}

// settle is called first by every request on the handle: a pending
// daemon-first change has been applied by the kernel by now.
func (h *File) settle() {
	if h.fluxPending {
		h.fluxPending = false
		h.fs.flux.add(h.id, -1)
	}
}

// Read serves content and registers the read at the first READ of a
// read-write handle that reaches the caller's buffer. A page-in through a
// direct-I/O handle (the fault of a mapping of it) registers nothing and
// is served only while the session may write the file
// (docs/DESIGN.md#mmap-page-in).
func (h *File) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.shared {
		return h.readShared(ctx, buf, off)
	}
	h.mu.Lock()
	h.settle()
	if h.direct && isPageIn(ctx) {
		errno := h.mapPageIn()
		h.mu.Unlock()
		if errno != 0 {
			return nil, errno
		}
		return h.loopbackOps.Read(ctx, buf, off)
	}
	if !h.registered {
		h.registerRead()
	}
	h.mu.Unlock()
	return h.loopbackOps.Read(ctx, buf, off)
}

// mutate runs op, one guarded mutation through this handle (gop), as an
// FS.mutate of the handle (onHandle; docs/DESIGN.md#mutation-path): under
// the file identity lock, the first mutation asks the guard; later ones
// re-ask only if another session mutated the file since (the handle then
// loses its right: its session's record is stale, and the file is not
// half-overwritten). After a success the handle is dirty (credited at
// flush and release), a change other than a plain write is in flux until
// the handle's next request, and the handle keeps the mutation sequence.
func (h *File) mutate(gop guard.Op, op func() syscall.Errno) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settle()
	seq, errno := mutation{
		subject: onHandle(h),
		asks:    []ask{{0, gop}},
		jop:     journalhook.OpOf(gop),
		run:     func([]dirFd) syscall.Errno { return op() },
		then: func(guardedChild) {
			if gop != guard.OpWrite {
				h.beginFlux() // truncate, fallocate, copy_file_range: daemon first
			}
			h.dirty = true
			h.noteOwnStat()
		},
	}.apply(context.Background(), h.fs)
	if errno == 0 && h.track {
		h.seq = seq
		h.ptOwnChange(h.seq)
	}
	return errno
}

// Write writes through the handle, guarded by mutate. A refused write
// changes nothing, the mode included.
func (h *File) Write(ctx context.Context, data []byte, off int64) (written uint32, errno syscall.Errno) {
	errno = h.mutate(guard.OpWrite, func() syscall.Errno {
		if h.track {
			h.statBeforeWrite()
		}
		var e syscall.Errno
		written, e = h.loopbackOps.Write(ctx, data, off)
		if e == 0 && h.direct {
			h.dropPrivs(ctx)
		}
		if h.track {
			h.hashWritten(e, data[:min(int(written), len(data))], off)
		}
		return e
	})
	return written, errno
}

// statBeforeWrite gives the handle's WriteHash the file's stat right
// before a write, once the handle has written: a change between two of
// its writes (another handle's, or outside the mount) breaks the hash,
// which may then be cached for the session's next decision
// (docs/DESIGN.md#fine-ctime). Called under the handle's mutex and
// identity lock.
func (h *File) statBeforeWrite() {
	if h.wh.Started() { // the first write, at offset 0, is the whole file or breaks it
		h.statForHash(h.wh.Before)
	}
}

// hashWritten feeds the bytes of a write (errno e, data written at off)
// to the handle's WriteHash with the file's stat after it; a failed write
// breaks it. Called under the handle's mutex and identity lock.
func (h *File) hashWritten(e syscall.Errno, data []byte, off int64) {
	if e != 0 || !h.wh.Active() {
		h.wh.Break()
		return
	}
	h.statForHash(func(st guard.Stat) { h.wh.Wrote(off, data, st) })
}

// statForHash calls fn with the file's stat through the handle's
// descriptor; a failed fstat breaks the handle's WriteHash instead.
func (h *File) statForHash(fn func(guard.Stat)) {
	h.fd(func(fd int) syscall.Errno {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) != nil {
			h.wh.Break()
			return 0
		}
		fn(guard.StatOf(&st))
		return 0
	})
}

// dropPrivs clears set-user-ID, and set-group-ID when group-exec is set,
// after a write through a direct-I/O handle by a caller other than root,
// as a write through the page cache does. There the kernel removes the
// bits itself before writing (file_remove_privs, sent as a mode change:
// fs/fuse/dir.c keeps set-group-ID without group-exec), but on the direct
// path it leaves them to the daemon, whose own write as root would keep
// them (docs/DESIGN.md#killpriv).
func (h *File) dropPrivs(ctx context.Context) {
	if !callerKillsPriv(ctx) {
		return
	}
	h.fd(func(fd int) syscall.Errno {
		killPrivFd(fd)
		return 0
	})
}

// Allocate is fallocate(2) through the handle, guarded like a write.
func (h *File) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	return h.mutate(guard.OpFallocate, func() syscall.Errno {
		return h.loopbackOps.Allocate(ctx, off, size, mode)
	})
}

// credit tells the guard the handle's session wrote the current content, if
// it did and no other session mutated the file since.
func (h *File) credit() {
	h.notePtStores() // stores through a shared mapping (ptwrite.go)
	if !h.track || !h.dirty {
		return
	}
	h.dirty = false
	unlock := h.fs.cfg.Guard.Lock(h.id)
	defer unlock()
	last := h.adoptLateExternal(h.fs.cfg.Guard.LastMutation(h.id))
	if last.Seq != h.seq && last.Session != h.who.session {
		return // someone else changed it after us: our record must stay stale
	}
	h.fd(func(fd int) syscall.Errno {
		t, err := fdTarget(h.node.rel(), fd)
		if err == nil {
			// The bytes hashed as they were written are the content when
			// this handle's writes are the whole file and nothing changed
			// it since (no mutation through the mount, the stat its last
			// write left); otherwise the content is read back.
			var sum guard.Hash
			if last.Seq == h.seq {
				sum, _ = h.wh.Sum(t.Stat)
			}
			h.fs.creditWrite(h.who.session, t, "write", sum)
		}
		return 0
	})
}

// Flush is close(2) of one descriptor of the handle: credit the writes so
// the session's next edit passes, then flush the backing fd.
func (h *File) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	h.settle()
	h.credit()
	h.mu.Unlock()
	return h.loopbackOps.Flush(ctx)
}

// Release is the last close of the handle (it arrives with pid 0). The
// handle leaves its node's open handles and the guard's count
// (Guard.NoteHandleRelease: the records of a file unlinked while open are
// dropped with its last handle) before its descriptor is closed: while it
// is open the inode number cannot be reused, so a new file that gets it
// cannot have its fresh state dropped by this release.
func (h *File) Release(ctx context.Context) syscall.Errno {
	h.drop(ctx)
	h.mu.Lock()
	h.settle()
	h.credit()
	h.pt.released = true // no credit by another handle from here (creditPtWriters)
	h.mu.Unlock()
	h.node.dropPtWriter(h)
	h.fs.cfg.Guard.NoteHandleRelease(h.id)
	if h.hj != nil { // a read-only handle: no path walk for nothing
		fd := -1 // by the handle's descriptor: the node's name lags behind a rename
		h.fd(func(d int) syscall.Errno { fd = d; return 0 })
		h.hj.Release(h.node.rel(), fd)
	}
	return h.loopbackOps.Release(ctx)
}
