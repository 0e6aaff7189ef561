package ctlfs

// The snapshots open control-file handles hold, bounded per uid.

import (
	"sync"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
)

// maxSnapshotBytesPerUID bounds the bytes of content snapshots the open
// control-file handles of one uid hold (snapshotBytes).
const maxSnapshotBytesPerUID = 64 << 20

// snapshotBytes counts, per uid, the content snapshots open handles hold.
// A read-only control file serves the content it produced at its first
// read until the handle is released (or read again at offset 0), so a
// uid holding many handles held a copy each: 2,000 handles of a
// 2,000-record guard/tracked took the daemon from 26 MB to 263 MB, and
// the records of a session that read every file of a large tree run to
// megabytes a copy. Past maxSnapshotBytesPerUID the read fails with
// EMFILE and the reason; releasing handles frees their bytes.
// Concurrency: mu guards byUID.
type snapshotBytes struct {
	mu    sync.Mutex
	byUID map[uint32]int64
}

// hold replaces a snapshot of old bytes held by uid with one of new bytes
// (0: released), or returns the EMFILE error, holding nothing new, when
// that would take uid past the bound. A shrink or release always passes.
func (s *snapshotBytes) hold(uid uint32, old, new int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.byUID[uid]
	next := cur - int64(old) + int64(new)
	if new > old && next > maxSnapshotBytesPerUID {
		return ctltree.Errorf(syscall.EMFILE, "the open control-file handles of uid %d hold %d bytes of content, and this one would add %d, past %d: read files to the end and close them",
			uid, cur, new-old, maxSnapshotBytesPerUID)
	}
	if next <= 0 {
		delete(s.byUID, uid)
		return nil
	}
	if s.byUID == nil {
		s.byUID = map[uint32]int64{}
	}
	s.byUID[uid] = next
	return nil
}
