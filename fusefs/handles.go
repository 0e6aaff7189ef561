package fusefs

// Open file handles per inode, for changes of a file whose name is gone
// (tests/posix_compare_test.go fchmod_unlinked_open_file): fchmod, fchown
// and futimens reach the daemon as a SETATTR without a file handle
// (fs/fuse/dir.c fuse_do_setattr sets FATTR_FH only for a size change), and
// natively they work on the open file even once it was unlinked or renamed
// over. Setattr then uses the descriptor of one of these (node_attr.go).

import (
	"context"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// openHandles is the set of open file handles of one inode: each handle's
// loopback file, and whether it was opened for writing. The zero value is
// ready to use. Concurrency: mu guards set; a handle is dropped from the set
// before its descriptor is closed, so a descriptor found in the set is open
// as long as mu is held.
type openHandles struct {
	mu  sync.Mutex
	set map[*fs.LoopbackFile]bool
}

// keepHandle registers lf, a handle of n opened with the open(2) flags
// flags, and returns the function that drops it again. The handle's Release
// must call drop before it closes lf. drop is idempotent.
func (n *Node) keepHandle(lf *fs.LoopbackFile, flags uint32) (drop func()) {
	o := &n.handles
	o.mu.Lock()
	if o.set == nil {
		o.set = make(map[*fs.LoopbackFile]bool)
	}
	o.set[lf] = flags&syscall.O_ACCMODE != syscall.O_RDONLY
	o.mu.Unlock()
	untrack := n.fs.handles.trackFile(lf, n) // FS-wide, for FS.Close
	return func() {
		o.mu.Lock()
		delete(o.set, lf)
		if len(o.set) == 0 {
			o.set = nil // a node without open handles holds no map (100k files: 20 MB)
		}
		o.mu.Unlock()
		untrack()
	}
}

// handleFd returns a duplicate (close-on-exec) of the descriptor of one of
// n's open handles, preferring a writable one when write is set, and whether
// that one is writable; ok is false when n has no open handle. The caller
// closes fd.
func (n *Node) handleFd(write bool) (fd int, writable, ok bool) {
	o := &n.handles
	o.mu.Lock()
	defer o.mu.Unlock()
	var pick *fs.LoopbackFile
	for lf, w := range o.set {
		if pick == nil || (write && w && !writable) {
			pick, writable = lf, w
		}
	}
	if pick == nil {
		return -1, false, false
	}
	src, live := pick.PassthroughFd()
	if !live {
		return -1, false, false
	}
	fd, err := unix.FcntlInt(uintptr(src), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, false, false
	}
	return fd, writable, true
}

// insideOrGone reports whether fd, a duplicate of an open handle's
// descriptor of a node, may carry a change the kernel sent by the node's
// name: its file has no link left, or its dentry is still under the
// workspace root. Never a file moved out of the workspace
// (docs/DESIGN.md#handle-fallback). Costs an fstat and two readlinks.
func (b *backing) insideOrGone(fd int) bool {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && st.Nlink == 0 {
		return true
	}
	_, inside := b.relOfFd(fd)
	return inside
}

// relOfFd is the workspace-relative name the kernel has now for the
// backing descriptor fd's file: its /proc/self/fd link less the backing
// root's, both read now, so a moved backing directory is followed (two
// readlinks, syscallcompat.FdLink). inside is false for a file outside
// the root, or when either link cannot be read. A file with no name
// keeps the link's " (deleted)" suffix.
func (b *backing) relOfFd(fd int) (rel string, inside bool) {
	root := b.rootDir().FD
	if root < 0 || fd < 0 {
		return "", false
	}
	p, err := syscallcompat.FdLink(fd)
	if err != nil {
		return "", false
	}
	r, err := syscallcompat.FdLink(root)
	if err != nil {
		return "", false
	}
	return strings.CutPrefix(p, strings.TrimSuffix(r, "/")+"/")
}

// sameInode reports whether st (with the inode generation gen, as statAt
// returns them) is n's own backing inode: the stable attributes go-fuse
// knows n by, which mix in the device and the birth time. The root is
// always itself.
func (n *Node) sameInode(st *syscall.Stat_t, gen uint64) bool {
	if n.isRoot() {
		return true
	}
	want, got := n.StableAttr(), n.fs.bk.stableAttr(st, gen)
	return want.Ino == got.Ino && want.Gen == got.Gen
}

// keptFile is a loopback handle handed to the kernel as it is (a read-only
// handle left to kernel passthrough, an O_TMPFILE handle), registered with
// its node until released. Embedding *fs.LoopbackFile keeps every interface
// of the loopback handle, PassthroughFd included.
type keptFile struct {
	*fs.LoopbackFile
	node *Node
	drop func(context.Context) // Node.openHandle
}

// Release drops the handle from its node, then closes it.
func (k *keptFile) Release(ctx context.Context) syscall.Errno {
	k.drop(ctx)
	return k.LoopbackFile.Release(ctx)
}

// keep wraps lf, opened on n with flags, as a registered keptFile.
// A keptFile is offered to passthrough: it is counted as a passthrough
// handle of n (iomode.go).
func (n *Node) keep(lf *fs.LoopbackFile, flags uint32) *keptFile {
	_, drop := n.openHandle(lf, flags, true)
	return &keptFile{LoopbackFile: lf, node: n, drop: drop}
}

// fsHandles is every open file and directory handle of one FS that holds a
// backing descriptor, so that FS.Close can close the descriptors of handles
// whose RELEASE (or RELEASEDIR) never arrived: the kernel sends them
// asynchronously, and when the mount is torn down first they never come
// (tests/mount_helper_test.go checks that no descriptor outlives the
// mount). The zero value is ready to use. Concurrency: mu guards the maps
// and closed; a handle registered after closeHandles is closed at once.
type fsHandles struct {
	mu     sync.Mutex
	closed bool
	files  map[*fs.LoopbackFile]*Node
	dirs   map[*keptDir]bool
}

// trackFile registers lf, a handle of n, FS-wide and returns the function
// that drops it (idempotent). After closeHandles it closes lf instead (the
// server has stopped: nothing will use or release it).
func (h *fsHandles) trackFile(lf *fs.LoopbackFile, n *Node) (drop func()) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		lf.Release(context.Background())
		return func() {}
	}
	if h.files == nil {
		h.files = make(map[*fs.LoopbackFile]*Node)
	}
	h.files[lf] = n
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.files, lf)
		h.mu.Unlock()
	}
}

// closeHandles closes the backing descriptor of every handle still open
// and makes later registrations close theirs at once. Call it only once the
// FUSE server has stopped (FS.Close): the kernel can no longer use the
// handles. A RELEASE still being served meanwhile closes its descriptor a
// second time, which the loopback handles report as EBADF and nothing else.
func (h *fsHandles) closeHandles() {
	h.mu.Lock()
	h.closed = true
	files, dirs := h.files, h.dirs
	h.files, h.dirs = nil, nil
	h.mu.Unlock()
	ctx := context.Background()
	for lf, n := range files {
		// Out of the node's set first: handleFd may use a descriptor only
		// while it is in the set (openHandles).
		n.handles.mu.Lock()
		delete(n.handles.set, lf)
		n.handles.mu.Unlock()
		lf.Release(ctx)
	}
	for d := range dirs {
		d.loopbackDir.Releasedir(ctx, 0)
	}
}

// loopbackDir is what go-fuse's descriptor-based directory stream offers as
// a directory handle (fs.NewLoopbackDirStreamFd).
type loopbackDir interface {
	fs.DirStream
	fs.FileReaddirenter
	fs.FileSeekdirer
	fs.FileReleasedirer
	fs.FileFsyncdirer
	fs.FileIoctler
}

// keptDir is a directory handle of node, registered FS-wide until
// RELEASEDIR; fd is its stream's descriptor.
type keptDir struct {
	loopbackDir
	h    *fsHandles
	node *Node
	fd   int
}

// Lookup is the lookup of a READDIRPLUS entry (fs.FileLookuper): name is
// stat'ed in the descriptor it was listed from, with no walk from the root
// (docs/DESIGN.md#readdirplus-at). Errors: statx(2)'s.
func (k *keptDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := k.node.lookupIn(ctx, dirFd{FD: k.fd}, name, out)
	return ch, k.node.entryTimeouts(k.node.rel(), name, out, errno)
}

// keepDir registers ds, a directory stream of n on descriptor fd handed to
// the kernel as a directory handle, so FS.Close can close fd; a stream
// that is not go-fuse's descriptor-based one is returned as it is.
func (h *fsHandles) keepDir(ds fs.DirStream, n *Node, fd int) fs.DirStream {
	ld, ok := ds.(loopbackDir)
	if !ok {
		return ds
	}
	k := &keptDir{loopbackDir: ld, h: h, node: n, fd: fd}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		ld.Releasedir(context.Background(), 0)
		return k
	}
	if h.dirs == nil {
		h.dirs = make(map[*keptDir]bool)
	}
	h.dirs[k] = true
	return k
}

// Releasedir drops the handle from the FS, then closes it.
func (k *keptDir) Releasedir(ctx context.Context, flags uint32) {
	h := k.h
	h.mu.Lock()
	delete(h.dirs, k)
	h.mu.Unlock()
	k.loopbackDir.Releasedir(ctx, flags)
}
