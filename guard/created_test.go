package guard

import (
	"testing"

	"github.com/rubinofs/rubinofs/sessions"
)

// byPathOps are the decisions made by path on a file while a handle on it
// may still be open.
var byPathOps = []Op{OpUnlink, OpTruncate, OpOpenTrunc, OpRenameOver, OpExchange}

// decideAll returns the code of each of byPathOps by session on f ("" when
// allowed), in order.
func decideAll(g *Guard, session string, f *file) []Code {
	var out []Code
	for _, op := range byPathOps {
		d := g.Decide(session, op, f.target())
		out = append(out, d.Code)
	}
	return out
}

// wantAll fails unless every code in got is want.
func wantAll(t *testing.T, who string, got []Code, want Code) {
	t.Helper()
	for i, c := range got {
		if c != want {
			t.Errorf("%s %s: %q, want %q", who, byPathOps[i], c, want)
		}
	}
}

// TestCreatedFileIsOwn: a file a session creates is its own from the
// moment of creation. While the creating handle's writes are not credited
// yet, every by-path decision of that session finds it fresh, for as long
// as every mutation since is the session's own; another session has never
// read it.
func TestCreatedFileIsOwn(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "")
		g.NoteCreate("s", f.target())
		wantAll(t, "s", decideAll(g, "s", f), "")
		wantAll(t, "B", decideAll(g, "B", f), CodeUnread)
	})
	t.Run("own writes not credited", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "")
		id := f.target().Stat.ID
		g.NoteCreate("s", f.target())
		g.NoteMutation(id, "s")
		f.write("one\n")
		g.NoteMutation(id, "s") // a second handle of s, or a truncate by path
		f.write("one\ntwo\n")
		wantAll(t, "s", decideAll(g, "s", f), "")
		wantAll(t, "B", decideAll(g, "B", f), CodeUnread)
	})
	t.Run("tracked as own and fresh", func(t *testing.T) {
		g := New(Config{})
		f := newFile(t, "")
		g.NoteCreate("s", f.target())
		g.NoteMutation(f.target().Stat.ID, "s")
		f.write("one\n")
		recs := g.Tracked("s", func(string) (Target, error) { return f.target(), nil })
		if len(recs) != 1 || recs[0].State != "fresh" || !recs[0].Own || recs[0].Path != f.rel {
			t.Fatalf("tracked %+v, want one fresh own record of %s", recs, f.rel)
		}
	})
	t.Run("reused identity", func(t *testing.T) {
		// An earlier file with the same identity, written over by B:
		// the created file does not inherit that record.
		g := New(Config{})
		f := newFile(t, "")
		id := f.target().Stat.ID
		must(t, g.NoteRead("s", f.target()))
		g.NoteMutation(id, "B")
		g.NoteCreate("s", f.target())
		wantAll(t, "s", decideAll(g, "s", f), "")
	})
	t.Run("mode off keeps no record", func(t *testing.T) {
		g := New(Config{Mode: ModeOff})
		f := newFile(t, "")
		if seq := g.NoteCreate("s", f.target()); seq == 0 {
			t.Fatalf("sequence 0, want the creation's mutation")
		}
		if n := g.RecordCount("s"); n != 0 {
			t.Fatalf("records in mode off: %d", n)
		}
	})
}

// TestCreatedFileStaleAfterOthersChange: the creator's ownership ends with
// any change that is not its own; its by-path mutations are then refused
// as stale, as for a file it read.
func TestCreatedFileStaleAfterOthersChange(t *testing.T) {
	cases := []struct {
		name string
		// change runs after s created the file and wrote "mine\n"
		// through its handle (not credited).
		change func(g *Guard, f *file, id FileID)
	}{
		{"another session's write", func(g *Guard, f *file, id FileID) {
			g.NoteMutation(id, "B")
			f.write("mine\ntheirs\n")
		}},
		{"another session's write of the same bytes", func(g *Guard, f *file, id FileID) {
			g.NoteMutation(id, "B")
		}},
		{"external write", func(g *Guard, f *file, id FileID) {
			f.write("external\n")
			g.Invalidate(id)
			g.NoteMutation(id, sessions.External)
		}},
		{"external write, then an own write", func(g *Guard, f *file, id FileID) {
			f.write("external\n")
			g.Invalidate(id)
			g.NoteMutation(id, sessions.External)
			g.NoteMutation(id, "s")
			f.write("external\nmine\n")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(Config{})
			f := newFile(t, "")
			id := f.target().Stat.ID
			g.NoteCreate("s", f.target())
			g.NoteMutation(id, "s")
			f.write("mine\n")
			c.change(g, f, id)
			wantAll(t, "s", decideAll(g, "s", f), CodeStale)
		})
	}

	t.Run("bytes not written by the session", func(t *testing.T) {
		// Content that appeared with no mutation of the session since
		// the creation (a change the watcher has not reported): the
		// record vouches for the empty content only.
		g := New(Config{})
		f := newFile(t, "")
		g.NoteCreate("s", f.target())
		f.write("unnoted\n")
		wantAll(t, "s", decideAll(g, "s", f), CodeStale)
	})

	t.Run("change while registering", func(t *testing.T) {
		// A target whose stat already shows bytes (an external write
		// between the creation and its report) counts them as unseen.
		g := New(Config{})
		f := newFile(t, "")
		f.write("raced in\n")
		g.NoteCreate("s", f.target())
		wantAll(t, "s", decideAll(g, "s", f), CodeStale)
	})
}
