package fusefs

// The Stream kind of the generic control-file mechanism (ctl.go): each open
// handle gets its own ctltree.Feed, and reads block on it, unless the
// handle was opened with O_NONBLOCK: then a read with nothing ready is
// EAGAIN at once. The handle is direct-I/O and stream-like (FOPEN_STREAM:
// no file position, the offset is ignored), so the kernel neither caches
// nor reads ahead.

import (
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
)

// openStream opens a Stream file for a reader (ctlNode.Open has refused
// writable opens); flags are the open(2) flags, of which O_NONBLOCK is
// kept for the handle's reads. The feed's Open error reaches the caller
// with its errno (ctltree.ErrnoOf) and is recorded in .rubino/errors.
func (f *FS) openStream(elems []string, file *ctltree.File, c ctltree.Caller, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if file.Open == nil {
		// EIO: a Stream file without a feed is a bug of its feature.
		f.recordCtlError(c, elems, syscall.EIO, "stream file has no feed")
		return nil, 0, syscall.EIO
	}
	feed, err := file.Open(c)
	if err != nil {
		errno := ctltree.ErrnoOf(err)
		f.recordCtlError(c, elems, errno, err.Error())
		return nil, 0, errno
	}
	return &streamHandle{fs: f, feed: feed, nonblock: flags&syscall.O_NONBLOCK != 0},
		fuse.FOPEN_DIRECT_IO | fuse.FOPEN_STREAM, 0
}

// streamHandle is an open Stream file.
type streamHandle struct {
	fs   *FS
	feed ctltree.Feed
	// nonblock is O_NONBLOCK as given at open. The handle keeps it: go-fuse
	// hands a read no flags, so a later fcntl(F_SETFL) is not seen.
	nonblock bool
}

var (
	_ fs.FileReader   = (*streamHandle)(nil)
	_ fs.FileReleaser = (*streamHandle)(nil)
)

// Read blocks on the feed (see ctltree.Feed) and ignores off. It returns
// EINTR when the request is interrupted (the reader got a signal: ^C on
// `cat`), 0 bytes (end of file) when the feed ended, EAGAIN on an
// O_NONBLOCK handle with nothing ready (as an empty pipe: the reader polls
// or moves on, and never hangs), and EIO for any other feed error. The
// request is marked quiet: the observability room neither times nor logs
// it (Observer.MarkQuiet).
func (h *streamHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.fs.cfg.Observe.MarkQuiet(ctx.Done())
	if h.nonblock {
		ctx = ctltree.WithNonBlocking(ctx)
	}
	n, err := h.feed.Read(ctx, dest)
	switch {
	case err == nil:
		return fuse.ReadResultData(dest[:n]), 0
	case errors.Is(err, io.EOF):
		return fuse.ReadResultData(nil), 0
	case errors.Is(err, ctltree.ErrWouldBlock):
		return nil, syscall.EAGAIN
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, syscall.EINTR
	}
	return nil, syscall.EIO
}

// Release ends the handle's feed.
func (h *streamHandle) Release(ctx context.Context) syscall.Errno {
	h.feed.Close()
	return 0
}
