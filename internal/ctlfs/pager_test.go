package ctlfs

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// A rendered file is served in order, a chunk at a time; a read of the
// last chunk again is served from it; a read at 0 starts again; a read
// elsewhere is EINVAL; a renderer's error reaches the reader after the
// content before it (docs/DESIGN.md#ctl-render).
func TestPagerInOrder(t *testing.T) {
	var want strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&want, "line %04d\n", i)
	}
	renders := 0
	p := &pager{render: func(w io.Writer) error {
		renders++
		for i := 0; i < 1000; i++ {
			if _, err := fmt.Fprintf(w, "line %04d\n", i); err != nil {
				return err
			}
		}
		return nil
	}}
	read := func(off int64, n int) string {
		b, err := p.read(off, n)
		if err != nil {
			t.Fatalf("read %d at %d: %v", n, off, err)
		}
		return string(b)
	}
	var got strings.Builder
	for off := int64(0); ; {
		b := read(off, 4096)
		if b == "" {
			break
		}
		got.WriteString(b)
		off += int64(len(b))
	}
	if got.String() != want.String() {
		t.Fatalf("read %d bytes, want %d", got.Len(), want.Len())
	}
	if s := read(8192, 10); s != want.String()[8192:8202] {
		t.Fatalf("a re-read of the last chunk's range: %q", s)
	}
	if _, err := p.read(100, 10); ctltree.ErrnoOf(err) != syscall.EINVAL {
		t.Fatalf("a read out of order: %v", err)
	}
	if s := read(0, 10); s != "line 0000\n" || renders != 2 {
		t.Fatalf("a read at 0: %q after %d renders", s, renders)
	}
	p.stop()

	bad := &pager{render: func(w io.Writer) error {
		io.WriteString(w, "partial\n")
		return errors.New("disk on fire")
	}}
	if b, err := bad.read(0, 4096); err != nil || string(b) != "partial\n" {
		t.Fatalf("before the error: %q %v", b, err)
	}
	if _, err := bad.read(8, 4096); ctltree.ErrnoOf(err) != syscall.EIO || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("the renderer's error: %v", err)
	}
}

// TestPagerRenderSlots: one uid runs at most maxRendersPerUID renderers
// at once (the read that would start one more fails with EMFILE, another
// uid's goes through); a renderer that has written its content, or whose
// handle was released, gives its slot back as it returns.
func TestPagerRenderSlots(t *testing.T) {
	var slots uidQuota
	content := strings.Repeat("x", 100000) // more than a pipe write at once: the renderer waits for its reader
	mk := func(uid uint32) *pager {
		return &pager{render: func(w io.Writer) error { _, err := io.WriteString(w, content); return err }, slots: &slots, uid: uid}
	}
	held := func(uid uint32) int { slots.mu.Lock(); defer slots.mu.Unlock(); return int(slots.byUID[uid]) }
	waitHeld := func(uid uint32, want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); held(uid) != want; {
			if time.Now().After(deadline) {
				t.Fatalf("uid %d holds %d slots, want %d", uid, held(uid), want)
			}
			time.Sleep(time.Millisecond) // the renderer goroutine returns on its own
		}
	}
	var ps []*pager
	for range maxRendersPerUID {
		p := mk(7)
		if _, err := p.read(0, 100); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	extra := mk(7)
	if _, err := extra.read(0, 100); ctltree.ErrnoOf(err) != syscall.EMFILE {
		t.Fatalf("read past the slots: %v, want EMFILE", err)
	}
	other := mk(8)
	if _, err := other.read(0, 100); err != nil {
		t.Fatalf("another uid: %v", err)
	}
	for off := int64(100); ; { // ps[0] to the end: its renderer returns
		b, err := ps[0].read(off, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		off += int64(len(b))
	}
	waitHeld(7, maxRendersPerUID-1)
	if _, err := extra.read(0, 100); err != nil {
		t.Fatalf("after a renderer wrote its content: %v", err)
	}
	for _, p := range append(ps, extra, other) {
		p.stop()
	}
	waitHeld(7, 0)
	waitHeld(8, 0)
}
