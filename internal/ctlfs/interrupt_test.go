package ctlfs

import (
	"context"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
)

// TestInterruptedReadLeavesNoErrorLine: a blocking read interrupted by a
// signal (the kernel's FUSE_INTERRUPT cancels the request's context, the
// file answers EINTR) is not a failure: the reader's retry of the read
// gets the content, not an "error:" line (`rubinofs agents wait` once
// printed "task 2 error: context canceled" and the result from byte 24
// on), and .rubino/errors records nothing.
func TestInterruptedReadLeavesNoErrorLine(t *testing.T) {
	calls := 0
	file := &ctltree.File{Kind: ctltree.ReadOnly, Read: func(ctx context.Context, _ ctltree.Caller) ([]byte, error) {
		calls++
		if calls == 1 {
			<-ctx.Done()
			return nil, ctltree.Errorf(syscall.EINTR, "%v", ctx.Err())
		}
		return []byte("done\nthe result\n"), nil
	}}
	tree := &Tree{errs: new(ctltree.ErrorRing)}
	h := &ctlHandle{t: tree, elems: []string{"agents", "1", "wait"}, file: file}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, errno := h.Read(ctx, make([]byte, 4096), 0); errno != syscall.EINTR {
		t.Fatalf("interrupted read: %v, want EINTR", errno)
	}
	r, errno := h.Read(context.Background(), make([]byte, 4096), 0)
	if errno != 0 {
		t.Fatalf("the retry: %v", errno)
	}
	if b, _ := r.Bytes(make([]byte, 4096)); string(b) != "done\nthe result\n" {
		t.Fatalf("the retry read %q, want the content", b)
	}
	if recs := tree.errs.Records(nil); len(recs) != 0 {
		t.Fatalf("an interrupted read is in .rubino/errors: %+v", recs)
	}
	// A file's own EINTR while the reader was not interrupted (the mount
	// shutting down) is a failure with its reason, as before.
	calls = 0
	file.Read = func(context.Context, ctltree.Caller) ([]byte, error) {
		return nil, ctltree.Errorf(syscall.EINTR, "the mount is shutting down")
	}
	if _, errno := h.Read(context.Background(), make([]byte, 4096), 0); errno != syscall.EINTR {
		t.Fatalf("shutdown read: %v", errno)
	}
	r, _ = h.Read(context.Background(), make([]byte, 4096), 0)
	if b, _ := r.Bytes(make([]byte, 4096)); string(b) != "error: the mount is shutting down\n" {
		t.Fatalf("after a shutdown EINTR the handle reads %q, want its reason", b)
	}
}
