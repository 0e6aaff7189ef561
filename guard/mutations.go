package guard

import "github.com/rubinofs/rubinofs/sessions"

// Mutation is the last mutation of a file identity: a sequence number that
// grows with every mutation, and who made it.
type Mutation struct {
	Seq     uint64
	Session string
}

// NoteMutation records that session mutated id (a write, truncate, O_TRUNC
// open, rename over, ...) and returns the new sequence number. A write
// handle remembers it: when the last mutation is another's, the handle has
// lost its right and must be decided again (docs/DESIGN.md#sessions).
//
// A mutation by a session through the mount also makes every other
// session's record of id stale, whatever the bytes hash to later: a write
// by session A leaves B's record stale (docs/DESIGN.md#freshness). Without it a session that
// read while another was mid-write could be judged fresh when the content
// came back to the bytes it was registered with (ABA), and an update was
// lost. An sessions.External change leaves records to the hash, which stays
// authoritative (an external touch keeps them fresh), and ends every
// session's own-write exemption (record.ownWritesSince) for id: the bytes
// may now differ from a record by more than the session's own writes.
func (g *Guard) NoteMutation(id FileID, session string) uint64 {
	g.mutMu.Lock()
	m := g.mutations[id]
	m.Seq++
	m.Session = session
	g.mutations[id] = m
	g.mutMu.Unlock()
	if g.mode == ModeOff {
		return m.Seq
	}
	if session == sessions.External {
		for _, t := range g.allTrackers() {
			t.markMixed(id)
		}
		return m.Seq
	}
	g.mu.Lock()
	others := make([]*Tracker, 0, len(g.sessions))
	for name, t := range g.sessions {
		if name != session {
			others = append(others, t)
		}
	}
	g.mu.Unlock()
	for _, t := range g.procTrackerList() {
		if t.Session() != session {
			others = append(others, t)
		}
	}
	for _, t := range others {
		t.markForeign(id)
	}
	return m.Seq
}

// LastMutation returns the last mutation of id (zero when none is known).
func (g *Guard) LastMutation(id FileID) Mutation {
	g.mutMu.Lock()
	defer g.mutMu.Unlock()
	return g.mutations[id]
}

// NoteCreate reports that session created t (a new, empty regular file:
// its path and the stat taken right after creation) through the mount with
// a handle it keeps open, and returns the mutation sequence of the creation
// (NoteMutation) for that handle.
//
// The file is the session's own from the moment of creation: the session's
// record of it starts with the empty content it made (Tracker's created
// record), so while the creating handle is still open and its writes are
// not credited yet (that happens at flush or release), by-path decisions
// (unlink, truncate, an O_TRUNC open, a rename or exchange over it) find
// the record fresh for as long as every mutation since is the session's own
// (record.ownWritesSince). Another session's mutation makes the record
// stale whatever the bytes; an external change (the watcher's) ends the
// own-write exemption, and the hash of the empty content decides, as for
// any record. Other sessions have no record: to them the file is unread.
//
// Past the record budget of the session's uid the file is made but not
// recorded, as a read past it is not (docs/DESIGN.md#record-budget).
//
// In ModeOff only the sequence is kept. Safe for concurrent use.
func (g *Guard) NoteCreate(session string, t Target) uint64 {
	seq := g.NoteMutation(t.Stat.ID, session)
	if g.mode != ModeOff {
		// Past the uid's record budget the file is made but unrecorded:
		// a later by-path change of it is refused as unread
		// (docs/DESIGN.md#record-budget).
		if tr := g.ForSession(session); g.recordAllowed(Caller{Session: session}, tr, t.Stat.ID) {
			tr.registerCreated(t, seq)
		}
	}
	return seq
}
