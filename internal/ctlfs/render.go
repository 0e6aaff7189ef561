package ctlfs

// The control tree's one generic virtual-file mechanism: ctlNode renders any
// ctltree.Node (directory, file or symlink) and ctlHandle implements the
// four file kinds (read-only, append, ctl, clone). Features never touch FUSE;
// they describe their files with package ctltree.
//
// Nodes hold a path, not the ctltree value, and resolve it from the root on
// every operation, so a dynamic entry (a session, a task) that goes away or
// is replaced under the same name is never served from a stale inode.

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
)

// ctlNameMax is the longest name looked up in the control tree, in bytes:
// NAME_MAX, as on the backing file systems.
const ctlNameMax = 255

// ctlCacheTimeout is the kernel entry/attribute timeout of control nodes.
// Their content and existence change at any time. Zero would mean "use the
// mount's default" to go-fuse, so it is the smallest non-zero duration.
const ctlCacheTimeout = time.Nanosecond

// ctlIno returns the stable inode number of a control-tree path. They live
// in the upper half of the 63-bit space, away from backing inode numbers and
// from go-fuse's automatic numbers (2^63 and up). The number is a pure
// function of the path (FNV-1a), so nothing is remembered per path: a
// caller looking up endless distinct names that resolve (compact session id
// prefixes in any letter case) cannot grow the daemon's memory.
func ctlIno(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return (h.Sum64() >> 2) | 1<<62
}

// resolve walks the control tree from its root along elems.
func (t *Tree) resolve(c ctltree.Caller, elems []string) ctltree.Node {
	var cur ctltree.Node = t.root
	for _, name := range elems {
		d, ok := cur.(*ctltree.Dir)
		if !ok {
			return nil
		}
		cur = d.Child(c, name)
		if cur == nil {
			return nil
		}
	}
	return cur
}

// child creates (or finds) the inode for a resolved ctltree node.
func (t *Tree) child(ctx context.Context, parent *fs.Inode, elems []string, name string, node ctltree.Node, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var path []string
	if name != ctltree.DirName || elems != nil {
		path = append(append([]string{}, elems...), name)
	}
	key := ctltree.DirName + "/" + strings.Join(path, "/")
	n := &ctlNode{t: t, elems: path}
	mode := n.fill(node, &out.Attr)
	out.Attr.Ino = ctlIno(key)
	out.SetEntryTimeout(ctlCacheTimeout)
	out.SetAttrTimeout(ctlCacheTimeout)
	return parent.NewInode(ctx, n, fs.StableAttr{Mode: mode, Ino: out.Attr.Ino}), 0
}

// ctlNode is one node of the control tree.
type ctlNode struct {
	fs.Inode
	t     *Tree
	elems []string // path below .rubino
}

var (
	_ fs.NodeLookuper   = (*ctlNode)(nil)
	_ fs.NodeReaddirer  = (*ctlNode)(nil)
	_ fs.NodeOpener     = (*ctlNode)(nil)
	_ fs.NodeGetattrer  = (*ctlNode)(nil)
	_ fs.NodeSetattrer  = (*ctlNode)(nil)
	_ fs.NodeReadlinker = (*ctlNode)(nil)
	_ fs.NodeUnlinker   = (*ctlNode)(nil)
	_ fs.NodeRmdirer    = (*ctlNode)(nil)
	_ fs.FileReader     = (*ctlHandle)(nil)
	_ fs.FileWriter     = (*ctlHandle)(nil)
	_ fs.FileFlusher    = (*ctlHandle)(nil)
	_ fs.FileReleaser   = (*ctlHandle)(nil)
)

func (n *ctlNode) caller(ctx context.Context) ctltree.Caller {
	return n.t.host.Caller(ctx)
}

func (n *ctlNode) resolve(ctx context.Context) (ctltree.Node, ctltree.Caller) {
	c := n.caller(ctx)
	return n.t.resolve(c, n.elems), c
}

// fill sets attributes for node and returns its file type bits.
func (n *ctlNode) fill(node ctltree.Node, a *fuse.Attr) uint32 {
	t := n.t.cfg.Started
	a.SetTimes(&t, &t, &t)
	a.Uid, a.Gid = n.t.cfg.Owner, 0
	a.Nlink = 1
	switch v := node.(type) {
	case *ctltree.Dir:
		a.Mode = syscall.S_IFDIR | 0555
		a.Nlink = 2
	case *ctltree.Symlink:
		a.Mode = syscall.S_IFLNK | 0777
	case *ctltree.File:
		perm := v.Mode
		if perm == 0 {
			perm = 0666
			if v.Kind == ctltree.ReadOnly || v.Kind == ctltree.Stream {
				perm = 0444
			}
		}
		a.Mode = syscall.S_IFREG | perm
	}
	return a.Mode & syscall.S_IFMT
}

// Getattr reports the node's attributes; a node that went away is ENOENT.
func (n *ctlNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	node, _ := n.resolve(ctx)
	if node == nil {
		return syscall.ENOENT
	}
	n.fill(node, &out.Attr)
	out.Attr.Ino = n.StableAttr().Ino
	out.SetTimeout(ctlCacheTimeout)
	return 0
}

// Setattr accepts a truncation to size 0 (the shell's `echo cmd > ctl`
// opens with O_TRUNC) and refuses every other change with EACCES.
func (n *ctlNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	node, _ := n.resolve(ctx)
	f, ok := node.(*ctltree.File)
	if !ok {
		return syscall.EACCES
	}
	if sz, ok := in.GetSize(); ok && (sz != 0 || f.Kind == ctltree.ReadOnly || f.Kind == ctltree.Stream) {
		return syscall.EACCES
	}
	if _, ok := in.GetMode(); ok {
		return syscall.EACCES
	}
	if _, ok := in.GetUID(); ok {
		return syscall.EACCES
	}
	return n.Getattr(ctx, fh, out)
}

// Lookup resolves a child of a control directory.
func (n *ctlNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(name) > ctlNameMax {
		// ENAMETOOLONG, as the backing file system answers for the same
		// name: no control-tree name is that long.
		return nil, syscall.ENAMETOOLONG
	}
	node, c := n.resolve(ctx)
	d, ok := node.(*ctltree.Dir)
	if !ok {
		return nil, syscall.ENOTDIR
	}
	child := d.Child(c, name)
	if child == nil {
		// A lookup answers for one caller (another's task or session is
		// hidden, docs/DESIGN.md#task-authority): the kernel must not keep
		// the negative entry for the next caller, so it gets the control
		// tree's timeout, not the mount-wide NegativeTimeout (go-fuse keeps
		// a timeout set here).
		out.SetEntryTimeout(ctlCacheTimeout)
		return nil, syscall.ENOENT
	}
	return n.t.child(ctx, n.EmbeddedInode(), n.elems, name, child, out)
}

// Unlink refuses to remove a control file with EPERM. Without it go-fuse
// would report success for a node that has no Unlink and drop the child
// from its inode tree, so `rm .rubino/README` would "succeed".
func (n *ctlNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.refuseRemove(ctx, name)
}

// Rmdir refuses to remove a control directory with EPERM (see Unlink).
func (n *ctlNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.refuseRemove(ctx, name)
}

func (n *ctlNode) refuseRemove(ctx context.Context, name string) syscall.Errno {
	c := n.caller(ctx)
	// EPERM: the control tree is virtual; its entries come and go with the
	// objects they describe (end a session, stop a task), never by unlink.
	n.t.recordError(c, append(append([]string{}, n.elems...), name), syscall.EPERM,
		"control-tree entries cannot be removed: end a session or stop a task through its ctl file")
	return syscall.EPERM
}

// Readdir lists a control directory.
func (n *ctlNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	node, c := n.resolve(ctx)
	d, ok := node.(*ctltree.Dir)
	if !ok {
		return nil, syscall.ENOTDIR
	}
	var list []fuse.DirEntry
	for _, name := range d.Names(c) {
		child := d.Child(c, name)
		if child == nil {
			continue
		}
		var a fuse.Attr
		mode := n.fill(child, &a)
		key := ctltree.DirName + "/" + strings.Join(append(append([]string{}, n.elems...), name), "/")
		list = append(list, fuse.DirEntry{Name: name, Mode: mode, Ino: ctlIno(key)})
	}
	return fs.NewListDirStream(list), 0
}

// Readlink returns a control symlink's target for this caller.
func (n *ctlNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	node, c := n.resolve(ctx)
	l, ok := node.(*ctltree.Symlink)
	if !ok {
		return nil, syscall.EINVAL
	}
	return []byte(l.Target(c)), 0
}

// Open opens a control file. Writable opens of read-only files are refused
// with EACCES even for root, whom default_permissions does not stop.
// Handles are direct-I/O: content is generated per read, never cached. A
// handle opened with O_NONBLOCK never blocks in a read: a file that would
// wait (a stream, an answer, a task's wait) returns EAGAIN instead.
func (n *ctlNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	node, c := n.resolve(ctx)
	f, ok := node.(*ctltree.File)
	if !ok {
		if node == nil {
			return nil, 0, syscall.ENOENT
		}
		return nil, 0, syscall.EISDIR
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY && (f.Kind == ctltree.ReadOnly || f.Kind == ctltree.Stream) {
		n.t.recordError(c, n.elems, syscall.EACCES, "read-only control file")
		return nil, 0, syscall.EACCES
	}
	if f.Kind == ctltree.Stream {
		return n.t.openStream(n.elems, f, c, flags) // stream.go
	}
	return &ctlHandle{t: n.t, elems: n.elems, file: f, caller: c, nonblock: flags&syscall.O_NONBLOCK != 0},
		fuse.FOPEN_DIRECT_IO, 0
}

// ctlHandle is an open control file. Reads serve a snapshot rendered at the
// first read and re-rendered at every read at offset 0; after a failed write
// the next read returns "error: REASON\n" once.
type ctlHandle struct {
	t      *Tree
	elems  []string
	file   *ctltree.File
	caller ctltree.Caller
	// nonblock is O_NONBLOCK as given at open (go-fuse hands a read no
	// flags): reads pass ctltree.WithNonBlocking to the file's Read.
	nonblock bool

	mu      sync.Mutex
	content []byte
	loaded  bool
	pending []byte // partial line of an append file
	cloneID string
	cloned  bool  // the clone file took its spec (an empty id reads as nothing)
	cursor  int64 // clone files: handle-local read position
	errMsg  string
	// pages serves a rendered file (File.Render) or a rendered clone
	// reply (File.CloneRender): pager.go.
	pages *pager
}

// Read serves the content.
func (h *ctlHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.errMsg != "" {
		msg := "error: " + h.errMsg + "\n"
		h.errMsg = ""
		return fuse.ReadResultData([]byte(msg)), 0
	}
	if h.file.Kind == ctltree.ReadOnly && h.file.Render != nil && h.pages == nil {
		file, c := h.file, h.caller
		h.pages = &pager{render: func(w io.Writer) error { return file.Render(c, w) }, slots: &h.t.renders, uid: c.Uid}
	}
	if h.pages != nil {
		data, err := h.pages.read(off, len(dest))
		if err != nil {
			return nil, h.fail(err)
		}
		return fuse.ReadResultData(data), 0
	}
	if h.file.Kind == ctltree.Clone {
		if !h.cloned {
			return nil, h.fail(ctltree.Errorf(syscall.EINVAL, "write a spec before reading the id"))
		}
		// The id is read from the same handle that wrote the spec; a shell
		// (`read id <&3`) reads at the write position, so the read position
		// is the handle's own, reset by a read at offset 0.
		if off == 0 {
			h.cursor = 0
		}
		var data []byte
		if h.cloneID != "" {
			data = []byte(h.cloneID + "\n")
		}
		if h.cursor >= int64(len(data)) {
			return fuse.ReadResultData(nil), 0
		}
		end := min(int64(len(data)), h.cursor+int64(len(dest)))
		out := data[h.cursor:end]
		h.cursor = end
		return fuse.ReadResultData(out), 0
	}
	if !h.loaded || off == 0 {
		if h.file.Read != nil {
			// Unlock while a blocking file (an ask's answer) waits.
			h.mu.Unlock()
			rctx := ctx
			if h.nonblock {
				rctx = ctltree.WithNonBlocking(ctx)
			}
			content, err := h.file.Read(rctx, h.caller)
			h.mu.Lock()
			if errors.Is(err, ctltree.ErrWouldBlock) {
				// EAGAIN: nothing is ready yet for an O_NONBLOCK reader.
				// Not a failure: no "error:" line, no errors entry, and
				// the next read asks the file again.
				return nil, syscall.EAGAIN
			}
			if err != nil && ctx.Err() != nil && ctltree.ErrnoOf(err) == syscall.EINTR {
				// The reader was interrupted (a signal: the kernel's
				// FUSE_INTERRUPT cancelled ctx). Not a failure either: a
				// retry of the read (EINTR, SA_RESTART) must get the
				// content, not an "error: context canceled" line read as
				// its first bytes.
				return nil, syscall.EINTR
			}
			if err != nil {
				return nil, h.fail(err)
			}
			if err := holdSnapshot(&h.t.snaps, h.caller.Uid, len(h.content), len(content)); err != nil {
				holdSnapshot(&h.t.snaps, h.caller.Uid, len(h.content), 0)
				h.content, h.loaded = nil, false
				return nil, h.fail(err)
			}
			h.content = content
		}
		h.loaded = true
	}
	if off >= int64(len(h.content)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(int64(len(h.content)), off+int64(len(dest)))
	return fuse.ReadResultData(h.content[off:end]), 0
}

// fail records err as the handle's and the tree's last error and returns
// its errno.
func (h *ctlHandle) fail(err error) syscall.Errno {
	errno := ctltree.ErrnoOf(err)
	h.errMsg = ctltree.Clip(err.Error())
	h.t.recordError(h.caller, h.elems, errno, h.errMsg)
	return errno
}

// Write passes input to the file's handler according to its kind.
func (h *ctlHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errMsg = ""
	// EFBIG ("File too large") for oversized input: the write is refused as
	// a whole before any handler runs, so nothing of it is applied.
	if len(data) > ctltree.MaxWrite {
		h.pending = nil
		return 0, h.fail(ctltree.Errorf(syscall.EFBIG, "write of %d bytes exceeds the control-file limit of %d bytes", len(data), ctltree.MaxWrite))
	}
	if h.file.Kind == ctltree.Append && len(h.pending) > 0 {
		if i := bytes.IndexByte(data, '\n'); (i < 0 && len(h.pending)+len(data) > ctltree.MaxLine) || i > ctltree.MaxLine-len(h.pending) {
			h.pending = nil
			return 0, h.fail(ctltree.Errorf(syscall.EFBIG, "line longer than the control-file limit of %d bytes (carried over from earlier writes)", ctltree.MaxLine))
		}
	}
	var err error
	switch h.file.Kind {
	case ctltree.ReadOnly:
		err = ctltree.Errorf(syscall.EACCES, "read-only control file")
	case ctltree.Append:
		buf := append(h.pending, data...)
		h.pending = nil
		i := bytes.LastIndexByte(buf, '\n')
		if i >= 0 {
			err = h.file.Append(h.caller, buf[:i+1])
		}
		if err == nil && len(buf)-(i+1) > ctltree.MaxLine {
			err = ctltree.Errorf(syscall.EFBIG, "line longer than the control-file limit of %d bytes", ctltree.MaxLine)
		}
		if err == nil {
			h.pending = append([]byte(nil), buf[i+1:]...)
		}
	case ctltree.Ctl:
		err = h.file.Write(h.caller, bytes.TrimRight(data, "\n"))
	case ctltree.Clone:
		if h.cloned {
			err = ctltree.Errorf(syscall.EINVAL, "this handle already created %s; open the clone file again", h.cloneID)
			break
		}
		if h.file.CloneRender != nil {
			var render func(io.Writer) error
			if render, err = h.file.CloneRender(h.caller, data); err == nil {
				h.pages, h.cloned = &pager{render: render, cursor: true, slots: &h.t.renders, uid: h.caller.Uid}, true
			}
			break
		}
		var id string
		id, err = h.file.Clone(h.caller, data)
		if err == nil {
			h.cloneID, h.cloned = id, true
		}
	}
	if err != nil {
		return 0, h.fail(err)
	}
	return uint32(len(data)), 0
}

// Flush passes a final partial line of an append file on close.
func (h *ctlHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.file.Kind != ctltree.Append || len(h.pending) == 0 {
		return 0
	}
	line := append(h.pending, '\n')
	h.pending = nil
	if err := h.file.Append(h.caller, line); err != nil {
		return h.fail(err)
	}
	return 0
}

// Release drops the handle (and stops a renderer it started).
func (h *ctlHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pages != nil {
		h.pages.stop()
	}
	if len(h.content) > 0 {
		holdSnapshot(&h.t.snaps, h.caller.Uid, len(h.content), 0)
		h.content = nil
	}
	return 0
}

// recordError appends one failure at the control file elems to
// /.rubino/errors (the tree's ctltree.ErrorRing: msg is clipped, the last
// ctltree.MaxErrors entries are kept). Safe for concurrent use.
func (t *Tree) recordError(c ctltree.Caller, elems []string, errno syscall.Errno, msg string) {
	t.errs.Add(ctltree.ErrorRecord{Time: time.Now(), Session: c.Session, Pid: c.Pid,
		Path: ctltree.DirName + "/" + strings.Join(elems, "/"), Errno: ctltree.ErrnoName(errno), Message: msg})
}
