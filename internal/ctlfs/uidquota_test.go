package ctlfs

import (
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
)

// TestSnapshotBytesBounded: a uid's snapshots are bounded by
// maxSnapshotBytesPerUID (EMFILE past it, nothing held for the refused
// one), another uid's are its own, a shrink or a release always passes,
// and the count is back at zero once all are released.
func TestSnapshotBytesBounded(t *testing.T) {
	var s uidQuota
	const chunk = 1 << 20
	n := 0
	for ; n < 2*maxSnapshotBytesPerUID/chunk; n++ {
		if err := holdSnapshot(&s, 7, 0, chunk); err != nil {
			if ctltree.ErrnoOf(err) != syscall.EMFILE {
				t.Fatalf("refusal: %v", err)
			}
			break
		}
	}
	if n != maxSnapshotBytesPerUID/chunk {
		t.Fatalf("uid 7 held %d snapshots of 1 MiB, want %d", n, maxSnapshotBytesPerUID/chunk)
	}
	if err := holdSnapshot(&s, 8, 0, chunk); err != nil {
		t.Fatalf("another uid: %v", err)
	}
	if err := holdSnapshot(&s, 7, chunk, chunk/2); err != nil {
		t.Fatalf("a shrink: %v", err)
	}
	if err := holdSnapshot(&s, 7, 0, chunk/2); err != nil {
		t.Fatalf("within what the shrink freed: %v", err)
	}
	holdSnapshot(&s, 7, chunk/2, 0)
	holdSnapshot(&s, 7, chunk/2, 0)
	for range n - 1 {
		holdSnapshot(&s, 7, chunk, 0)
	}
	holdSnapshot(&s, 8, chunk, 0)
	if len(s.byUID) != 0 {
		t.Fatalf("held after every release: %v", s.byUID)
	}
}
