package guard

import (
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/sessions"
)

// TestDecideUnknownSession: a caller of sessions.Unknown gets EAGAIN for a
// guarded mutation (warn mode allows and logs it), and its reads and
// writes credit nobody: no tracker is made for it.
func TestDecideUnknownSession(t *testing.T) {
	f := newFile(t, "x\n")
	g := New(Config{Errno: syscall.EPERM})
	if err := g.NoteRead(sessions.Unknown, f.target()); err != nil {
		t.Fatal(err)
	}
	g.NoteReadInFlux(sessions.Unknown, f.target())
	if err := g.NoteWrite(sessions.Unknown, f.target()); err != nil {
		t.Fatal(err)
	}
	d := g.Decide(sessions.Unknown, OpOpenTrunc, f.target())
	if d.Allow || d.Code != CodeUnknownSession || d.Errno != syscall.EAGAIN {
		t.Errorf("enforce: %+v, want a refusal with EAGAIN", d)
	}
	if s := g.Sessions(); len(s) != 0 {
		t.Errorf("trackers made for the unknown session: %v", s)
	}
	w := New(Config{Mode: ModeWarn})
	if d := w.Decide(sessions.Unknown, OpWrite, f.target()); !d.Allow || !d.WouldDeny || d.Code != CodeUnknownSession {
		t.Errorf("warn: %+v, want allowed and flagged", d)
	}
}
