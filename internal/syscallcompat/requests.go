package syscallcompat

// What go-fuse's node API does not pass on, kept by in-flight request
// (its cancel channel, which the bridge hands to the node as
// fuse.Context.Cancel): the caller's umask, applied by the daemon unless
// the backing directory has a default POSIX ACL (docs/DESIGN.md#posix-acl),
// and whether a READ fills the page cache (docs/DESIGN.md#mmap-page-in).

import (
	"context"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// requestUmasks maps an in-flight request's cancel channel to its umask.
var requestUmasks sync.Map // <-chan struct{} -> uint32

// WithUmask records umask for the request whose cancel channel is cancel
// and returns the function that forgets it (deferred by rawHooks).
func WithUmask(cancel <-chan struct{}, umask uint32) func() {
	requestUmasks.Store(cancel, umask)
	return func() { requestUmasks.Delete(cancel) }
}

// HasDefaultACL reports whether the directory d has a default POSIX ACL
// (system.posix_acl_default exists and is not empty).
func HasDefaultACL(d Dir) bool {
	n, err := GetxattrAt(d, ".", "system.posix_acl_default", nil)
	return err == nil && n > 0
}

// UmaskOf returns the umask WithUmask recorded for the in-flight request
// whose cancel channel is cancel; ok is false for none. Safe for
// concurrent use.
func UmaskOf(cancel <-chan struct{}) (umask uint32, ok bool) {
	v, ok := requestUmasks.Load(cancel)
	if !ok {
		return 0, false
	}
	return v.(uint32), true
}

// pageInReads holds the cancel channels of in-flight page-cache READs.
var pageInReads sync.Map // <-chan struct{} -> struct{}

// MarkPageIn records in as a page-cache READ when it carries no lock owner
// and returns the function that forgets it (deferred by rawHooks).
// Rule: docs/DESIGN.md#mmap-page-in. Safe for concurrent use.
func MarkPageIn(cancel <-chan struct{}, in *fuse.ReadIn) func() {
	if in.ReadFlags&fuse.READ_LOCKOWNER != 0 {
		return func() {}
	}
	pageInReads.Store(cancel, struct{}{})
	return func() { pageInReads.Delete(cancel) }
}

// IsPageIn reports whether the READ of ctx (a *fuse.Context) fills the kernel's page cache
// rather than a caller's buffer. A request that did not pass rawHooks
// (never on the mount) counts as a read(2).
func IsPageIn(ctx context.Context) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok {
		return false
	}
	_, ok = pageInReads.Load(c.Cancel)
	return ok
}

// CopyReadMax is the largest READ reply (bytes) CopiedRead copies.
const CopyReadMax = 64 << 10

// CopiedRead is a READ's result (res, st) as the reply should carry it:
// a result spliced from a backing descriptor (fuse.ReadResultFd) of at
// most CopyReadMax bytes is read now, by one pread(2) into buf (the
// request's buffer, which the reply then holds), and replied with one
// writev(2) as a vector result (go-fuse would pass a plain data result
// through a pipe before falling back to writev); larger ones and every
// other result are returned as they are (docs/DESIGN.md#small-read-copy).
// A failed pread is the READ's errno. go-fuse splices an fd result
// through a pipe: a header write, a splice in, a splice out and a pipe
// drain, twice over on a short read at the end of the file, which every
// read of a small file is.
func CopiedRead(res fuse.ReadResult, st fuse.Status, buf []byte) (fuse.ReadResult, fuse.Status) {
	fd, ok := res.(interface{ Seekable() (uintptr, int64, int) })
	if !ok || st != fuse.OK {
		return res, st
	}
	if _, _, sz := fd.Seekable(); sz > CopyReadMax {
		return res, st
	}
	b, st := res.Bytes(buf)
	if st != fuse.OK {
		return nil, st
	}
	return fuse.ReadResultVector([][]byte{b}), fuse.OK
}
