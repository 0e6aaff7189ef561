package guard

import (
	"os"
	"testing"

	"github.com/rubinofs/rubinofs/sessions"
)

// decideCode returns "" when op by session is allowed, else the refusal's
// code.
func decideCode(g *Guard, session string, f *file) Code {
	d := g.Decide(session, OpWrite, f.target())
	if d.Allow {
		return ""
	}
	return d.Code
}

// TestOwnWritesKeepRecordFresh is the own-write refresh
// (docs/DESIGN.md#own-write-refresh) for writes not yet credited: while every mutation since the session's fresh record is
// its own (a first handle's writes, credited only at flush or release), the
// record stays fresh for that session, so a second handle of the same
// session may write (tests/posix_compare_test.go two_handles_one_session).
// Any change by someone else in between keeps the record stale, so the
// lost-update protections hold (another session's write: ABA; an external
// change; a change while the record's hash was taken; a read served in
// flux).
func TestOwnWritesKeepRecordFresh(t *testing.T) {
	cases := []struct {
		name string
		// steps runs between the read of "v1" and the session's own
		// write of the file (NoteMutation by "s", then new bytes).
		steps func(g *Guard, f *file, id FileID)
		want  Code
	}{
		{"own writes only", func(g *Guard, f *file, id FileID) {}, ""},
		{"own writes twice", func(g *Guard, f *file, id FileID) {
			g.NoteMutation(id, "s")
			f.write("s, first\n")
		}, ""},
		{"another session mutated first", func(g *Guard, f *file, id FileID) {
			g.NoteMutation(id, "B")
			f.write("B's bytes\n")
		}, CodeStale},
		{"another session mutated to the same bytes (ABA)", func(g *Guard, f *file, id FileID) {
			g.NoteMutation(id, "B")
		}, CodeStale},
		{"external change first", func(g *Guard, f *file, id FileID) {
			f.write("an editor's bytes\n")
			g.Invalidate(id)
			g.NoteMutation(id, sessions.External)
		}, CodeStale},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(Config{})
			f := newFile(t, "v1\n")
			id := f.target().Stat.ID
			must(t, g.NoteRead("s", f.target()))
			c.steps(g, f, id)
			g.NoteMutation(id, "s")
			f.write("v2 by s, not credited yet\n")
			if got := decideCode(g, "s", f); got != c.want {
				t.Fatalf("s's second writer: %q, want %q", got, c.want)
			}
			// Another session that read v1 is stale whatever happened.
			if got := decideCode(g, "B", f); got == "" {
				t.Fatalf("B, who never read the file, was allowed")
			}
		})
	}

	t.Run("another session mutated after the own write", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "v1\n")
		id := f.target().Stat.ID
		must(t, g.NoteRead("s", f.target()))
		must(t, g.NoteRead("B", f.target()))
		g.NoteMutation(id, "s")
		f.write("s\n")
		g.NoteMutation(id, "B")
		f.write("B\n")
		g.NoteMutation(id, "s") // s's first handle kept writing
		f.write("s again\n")
		if got := decideCode(g, "s", f); got != CodeStale {
			t.Fatalf("s after B's write in between: %q, want stale", got)
		}
	})

	t.Run("no mutation noted", func(t *testing.T) {
		// New bytes without any mutation through the mount (an external
		// change the watcher has not reported): the hash decides.
		g := New(Config{})
		f := newFile(t, "v1\n")
		must(t, g.NoteRead("s", f.target()))
		f.write("changed outside\n")
		if got := decideCode(g, "s", f); got != CodeStale {
			t.Fatalf("unnoted change: %q, want stale", got)
		}
	})

	t.Run("read in flux", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "v1\n")
		id := f.target().Stat.ID
		g.NoteReadInFlux("s", f.target())
		g.NoteMutation(id, "s")
		f.write("s\n")
		if got := decideCode(g, "s", f); got != CodeStale {
			t.Fatalf("own write on an in-flux read: %q, want stale", got)
		}
	})

	t.Run("mutation while the read is hashed", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "v1\n")
		tg := f.target()
		id := tg.Stat.ID
		open := tg.Open
		tg.Open = func() (*os.File, error) {
			// The watcher reports an external change while the
			// read's hash is being taken: the hash may be of the
			// bytes before or after it.
			g.NoteMutation(id, sessions.External)
			return open()
		}
		must(t, g.NoteRead("s", tg))
		g.NoteMutation(id, "s")
		f.write("s\n")
		if got := decideCode(g, "s", f); got != CodeStale {
			t.Fatalf("own write on a read hashed across a change: %q, want stale", got)
		}
	})

	t.Run("credit ends the exemption's base", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "v1\n")
		id := f.target().Stat.ID
		must(t, g.NoteRead("s", f.target()))
		g.NoteMutation(id, "s")
		f.write("s\n")
		must(t, g.NoteWrite("s", f.target())) // flushed: the record is of "s\n"
		if got := decideCode(g, "s", f); got != "" {
			t.Fatalf("after the credit: %q, want allowed", got)
		}
		f.write("changed outside\n") // no mutation noted since the credit
		if got := decideCode(g, "s", f); got != CodeStale {
			t.Fatalf("unnoted change after the credit: %q, want stale", got)
		}
	})
}

// TestTrackedOwnWrites: guard/tracked shows a record extended by own writes
// as fresh, and one another session wrote over as stale.
func TestTrackedOwnWrites(t *testing.T) {
	g := New(Config{})
	f := newFile(t, "v1\n")
	id := f.target().Stat.ID
	must(t, g.NoteRead("s", f.target()))
	must(t, g.NoteRead("B", f.target()))
	g.NoteMutation(id, "s")
	f.write("s\n")
	lookup := func(string) (Target, error) { return f.target(), nil }
	for session, want := range map[string]string{"s": "fresh", "B": "stale"} {
		recs := g.Tracked(session, lookup)
		if len(recs) != 1 || recs[0].State != want {
			t.Fatalf("%s: tracked %+v, want one %s record", session, recs, want)
		}
	}
}

// TestLastNameGoneWithOpenHandles: a file whose last name is removed while
// handles on it are open keeps its records until the last handle is
// released (POSIX: it stays writable through them), and other sessions'
// records of it turn stale; without open handles it is forgotten at once.
func TestLastNameGoneWithOpenHandles(t *testing.T) {
	t.Run("open handles", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "v1\n")
		id := f.target().Stat.ID
		g.NoteHandleOpen(id)
		g.NoteHandleOpen(id)
		must(t, g.NoteWrite("s", f.target()))
		must(t, g.NoteRead("B", f.target()))
		g.NoteLastNameGone(id, "s")
		if got := decideCode(g, "s", f); got != "" {
			t.Fatalf("s writing its unlinked open file: %q, want allowed", got)
		}
		if got := decideCode(g, "B", f); got != CodeStale {
			t.Fatalf("B after s unlinked the file: %q, want stale", got)
		}
		g.NoteHandleRelease(id)
		if n := g.RecordCount("s"); n != 1 {
			t.Fatalf("records of s with one handle still open: %d, want 1", n)
		}
		g.NoteHandleRelease(id)
		if n, m := g.RecordCount("s"), g.RecordCount("B"); n != 0 || m != 0 {
			t.Fatalf("records after the last release: s %d, B %d, want none", n, m)
		}
		if last := g.LastMutation(id); last != (Mutation{}) {
			t.Fatalf("mutation of a forgotten identity: %+v", last)
		}
		// The identity may now be reused: a new file there is unread.
		if got := decideCode(g, "s", f); got != CodeUnread {
			t.Fatalf("after the last release: %q, want unread", got)
		}
	})
	t.Run("no open handle", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "v1\n")
		id := f.target().Stat.ID
		g.NoteHandleOpen(id)
		g.NoteHandleRelease(id)
		must(t, g.NoteWrite("s", f.target()))
		g.NoteLastNameGone(id, "s")
		if n := g.RecordCount("s"); n != 0 {
			t.Fatalf("records after the last name went with no handle open: %d", n)
		}
	})
	t.Run("release without unlink keeps records", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "v1\n")
		id := f.target().Stat.ID
		g.NoteHandleOpen(id)
		must(t, g.NoteWrite("s", f.target()))
		g.NoteHandleRelease(id)
		if got := decideCode(g, "s", f); got != "" {
			t.Fatalf("after a plain release: %q, want allowed", got)
		}
	})
}
