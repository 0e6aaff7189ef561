package fusefs

import (
	"context"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestIoOpenModes walks one inode through mixed opens: a handle gets
// passthrough only while no other kind of handle is open, and every handle
// opened while a passthrough one is open is a passthrough one.
func TestIoOpenModes(t *testing.T) {
	n := &Node{}
	want := func(got, want bool, what string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: passthrough %v, want %v", what, got, want)
		}
	}
	pt1, done1 := n.ioOpen(true)
	want(pt1, true, "first reader")
	pt2, done2 := n.ioOpen(false)
	want(pt2, true, "writer while a passthrough reader is open")
	done1()
	done1() // idempotent
	pt3, done3 := n.ioOpen(true)
	want(pt3, true, "reader while the forced writer is open")
	done2()
	done3()
	c1, cdone := n.ioOpen(false)
	want(c1, false, "writer alone")
	pt4, done4 := n.ioOpen(true)
	want(pt4, false, "reader while a non-passthrough handle is open")
	cdone()
	done4()
	pt5, done5 := n.ioOpen(true)
	want(pt5, true, "reader once every handle is released")
	done5()
	if n.io.pt != 0 || n.io.other != 0 {
		t.Fatalf("counts left: %d passthrough, %d other", n.io.pt, n.io.other)
	}
}

// TestAfterReleaseWaitsForReleaseDone: a count dropped in a RELEASE
// handler is dropped only when releaseDone runs for that request; without
// a request context it is dropped at once.
func TestAfterReleaseWaitsForReleaseDone(t *testing.T) {
	f := &FS{}
	ran := 0
	cancel := make(chan struct{})
	f.released.afterRelease(&fuse.Context{Cancel: cancel}, func() { ran++ })
	if ran != 0 {
		t.Fatal("ran before releaseDone")
	}
	f.released.releaseDone(make(chan struct{}))
	if ran != 0 {
		t.Fatal("ran for another request")
	}
	f.released.releaseDone(cancel)
	f.released.releaseDone(cancel)
	if ran != 1 {
		t.Fatalf("ran %d times, want 1", ran)
	}
	f.released.afterRelease(context.Background(), func() { ran++ })
	if ran != 2 {
		t.Fatal("no request context: did not run at once")
	}
}
