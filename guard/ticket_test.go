package guard

import (
	"syscall"
	"testing"
)

// begin takes a ticket on ids with nothing to decide.
func begin(t *testing.T, g *Guard, ids ...FileID) *Ticket {
	t.Helper()
	tk, errno := g.Begin(Plan{IDs: ids, Under: func() Look { return Look{} }})
	if errno != 0 || tk.Again {
		t.Fatalf("Begin: %v again=%v", errno, tk.Again)
	}
	return tk
}

// TestTicketDoneNotes checks what the guard is told for each change
// (docs/DESIGN.md#mutation-path).
func TestTicketDoneNotes(t *testing.T) {
	g := New(Config{Mode: ModeEnforce})
	for i, c := range []struct {
		name   string
		ch     Change
		nlink  uint64
		noted  bool // NoteMutation: the sequence grows
		forget bool // NoteLastNameGone without open handles: the identity is forgotten
	}{
		{"unchanged", Unchanged, 1, false, false},
		{"rewritten", Rewritten, 1, true, false},
		{"unlinked last", Unlinked, 1, false, true},
		{"unlinked one of two", Unlinked, 2, true, false},
		{"replaced last", Replaced, 1, false, true},
		{"replaced one of two", Replaced, 2, false, false},
	} {
		id := FileID{Dev: 1, Ino: uint64(100 + i)}
		g.NoteMutation(id, "other") // seq 1
		tk := begin(t, g, id)
		seq, _ := tk.Done("s", []Noted{{ID: id, Change: c.ch, Nlink: c.nlink}}, nil)
		m := g.LastMutation(id)
		switch {
		case c.forget && m.Seq != 0:
			t.Errorf("%s: %+v, want the identity forgotten", c.name, m)
		case c.noted && (m.Seq != 2 || m.Session != "s" || seq != 2):
			t.Errorf("%s: %+v (seq %d), want seq 2 by s", c.name, m, seq)
		case !c.forget && !c.noted && (m.Seq != 1 || m.Session != "other"):
			t.Errorf("%s: %+v, want it untouched", c.name, m)
		}
	}
}

// TestTicketLocks checks that a ticket holds its identities locked from
// Begin to Done, also after a refusal, and that Again holds nothing.
func TestTicketLocks(t *testing.T) {
	g := New(Config{Mode: ModeEnforce})
	id := FileID{Dev: 1, Ino: 7}
	tk, errno := g.Begin(Plan{IDs: []FileID{id, id}, Under: func() Look {
		return Look{Asks: []Ask{{Op: OpTruncate, Target: Target{Path: "f", Stat: Stat{ID: id}}}}}
	}})
	if errno != syscall.EACCES || !tk.Denied {
		t.Fatalf("unread file: %v denied=%v, want EACCES", errno, tk.Denied)
	}
	got := make(chan struct{})
	go func() { g.Lock(id)(); close(got) }()
	select {
	case <-got:
		t.Fatal("the identity is not locked after a refusal")
	default:
	}
	tk.Done("s", nil, nil)
	<-got                  // released by Done
	tk.Done("s", nil, nil) // a second Done does nothing
	tk, _ = g.Begin(Plan{IDs: []FileID{id}, Under: func() Look { return Look{Again: true} }})
	if !tk.Again {
		t.Fatal("Again not reported")
	}
	g.Lock(id)() // nothing held
}
