package guard

import "sync"

// openIdentities counts the open file handles of each file identity, as
// fusefs reports them, and remembers identities whose last name is gone
// while handles on them are still open. The zero value is ready to use.
type openIdentities struct {
	mu       sync.Mutex
	handles  map[FileID]int
	nameless map[FileID]string // the session that removed the last name
}

// NoteHandleOpen reports that a file handle on id was opened through the
// mount (fusefs: a guarded handle, at open or create). Every call must be
// matched by one NoteHandleRelease, or the records of a file deleted while
// that handle was open are never forgotten. Safe for concurrent use.
func (g *Guard) NoteHandleOpen(id FileID) {
	o := &g.open
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.handles == nil {
		o.handles = make(map[FileID]int)
	}
	o.handles[id]++
}

// NoteHandleRelease reports that a handle reported by NoteHandleOpen was
// released. When it was the last handle on id and id's last name is gone
// (NoteLastNameGone), nothing can reach the file any more and its inode
// number may be reused: the guard forgets id (Forget). Safe for concurrent
// use.
func (g *Guard) NoteHandleRelease(id FileID) {
	o := &g.open
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.handles[id]--; o.handles[id] > 0 {
		return
	}
	delete(o.handles, id)
	if by, ok := o.nameless[id]; ok {
		delete(o.nameless, id)
		g.forgetBy(id, by)
	}
}

// NoteLastNameGone reports that session removed the last name of id
// (unlink, or a rename over it) through the mount.
//
// Without open handles on id the guard forgets it at once (Forget): the
// inode number may be reused by a new file, which must not inherit records.
// With open handles the file lives on, nameless, until the last one is
// released (POSIX: an unlinked open file stays readable and writable through
// its descriptors), so the records are kept until NoteHandleRelease: a
// session that read or wrote the file may still write through a handle it
// opened (tests/posix_compare_test.go write_unlinked_open_file). Removing
// the name is a mutation by session (NoteMutation): every other session's
// record becomes stale and their handles lose the right to write.
//
// Safe for concurrent use; fusefs calls it under the identity lock.
func (g *Guard) NoteLastNameGone(id FileID, session string) {
	o := &g.open
	o.mu.Lock() // held throughout: a concurrent last release must not forget id between the two steps
	defer o.mu.Unlock()
	if o.handles[id] == 0 {
		g.forgetBy(id, session)
		return
	}
	if o.nameless == nil {
		o.nameless = make(map[FileID]string)
	}
	o.nameless[id] = session
	g.NoteMutation(id, session)
}
