package guard

import (
	"strings"
	"syscall"
	"testing"
)

// TestDecideErrno: a refusal carries the configured errno (EACCES by
// default, EPERM when configured), in enforce and in warn mode; an allowed
// mutation carries none.
func TestDecideErrno(t *testing.T) {
	for _, c := range []struct {
		cfg  syscall.Errno
		want syscall.Errno
	}{{0, syscall.EACCES}, {syscall.EACCES, syscall.EACCES}, {syscall.EPERM, syscall.EPERM}} {
		for _, mode := range []Mode{ModeEnforce, ModeWarn} {
			g := New(Config{Mode: mode, Errno: c.cfg})
			if g.Errno() != c.want {
				t.Fatalf("Errno() = %v, want %v", g.Errno(), c.want)
			}
			f := newFile(t, "x\n")
			d := g.Decide("s", OpOpenTrunc, f.target())
			if d.Code != CodeUnread || d.Errno != c.want {
				t.Fatalf("%s, errno %d: %+v, want unread with %v", mode, c.cfg, d, c.want)
			}
			must(t, g.NoteRead("s", f.target()))
			if d := g.Decide("s", OpOpenTrunc, f.target()); !d.Allow || d.Errno != 0 {
				t.Fatalf("after a read: %+v, want allow without errno", d)
			}
		}
	}
}

// TestDecideUnlinkPolicy: with UnlinkGuard an unread or stale file's unlink
// is refused; with UnlinkAllow it is allowed, while every other op on the
// same file stays refused.
func TestDecideUnlinkPolicy(t *testing.T) {
	for _, pol := range []UnlinkPolicy{UnlinkGuard, UnlinkAllow} {
		g := New(Config{Unlink: pol})
		if g.Unlink() != pol {
			t.Fatalf("Unlink() = %v", g.Unlink())
		}
		unread := newFile(t, "a\n")
		stale := newFile(t, "b\n")
		must(t, g.NoteRead("s", stale.target()))
		stale.write("changed\n")
		for _, f := range []*file{unread, stale} {
			d := g.Decide("s", OpUnlink, f.target())
			if pol == UnlinkGuard && d.Allow {
				t.Fatalf("guard: unlink allowed: %+v", d)
			}
			if pol == UnlinkAllow && (!d.Allow || d.WouldDeny) {
				t.Fatalf("allow: unlink refused: %+v", d)
			}
			if d := g.Decide("s", OpRenameOver, f.target()); d.Allow {
				t.Fatalf("%s: rename-over allowed: %+v", pol, d)
			}
		}
	}
}

// TestParsePolicy: the parsers accept exactly the documented values and
// String/ErrnoName round-trip them.
func TestParsePolicy(t *testing.T) {
	for _, s := range []string{"guard", "allow"} {
		u, err := ParseUnlinkPolicy(s)
		if err != nil || u.String() != s {
			t.Fatalf("ParseUnlinkPolicy(%q) = %v, %v", s, u, err)
		}
	}
	for _, s := range []string{"EACCES", "EPERM"} {
		e, err := ParseErrno(s)
		if err != nil || ErrnoName(e) != s {
			t.Fatalf("ParseErrno(%q) = %v, %v", s, e, err)
		}
	}
	for _, s := range []string{"", "Allow", "deny"} {
		if _, err := ParseUnlinkPolicy(s); err == nil {
			t.Errorf("ParseUnlinkPolicy(%q) accepted", s)
		}
	}
	for _, s := range []string{"", "eacces", "EBUSY", "ENOENT"} {
		if _, err := ParseErrno(s); err == nil {
			t.Errorf("ParseErrno(%q) accepted", s)
		}
	}
}

// TestDecideWarnWording: a warn-mode decision is allowed and its message
// says so (WarnPrefix), never "refusing"; enforce mode's says "refusing",
// for an unread and for a stale file alike.
func TestDecideWarnWording(t *testing.T) {
	for _, mode := range []Mode{ModeEnforce, ModeWarn} {
		g := New(Config{Mode: mode})
		unread := newFile(t, "a\n")
		stale := newFile(t, "b\n")
		must(t, g.NoteRead("s", stale.target()))
		stale.write("changed\n")
		for _, f := range []*file{unread, stale} {
			d := g.Decide("s", OpOpenTrunc, f.target())
			warned := strings.HasPrefix(d.Message, WarnPrefix)
			switch {
			case mode == ModeWarn && (!d.Allow || !d.WouldDeny || !warned || strings.Contains(d.Message, "refusing")):
				t.Errorf("warn: %+v", d)
			case mode == ModeEnforce && (d.Allow || warned):
				t.Errorf("enforce: %+v", d)
			case d.Code == CodeUnread && !strings.Contains(d.Message, "read it first"):
				t.Errorf("%s: unread message %q does not say what to do", mode, d.Message)
			}
		}
	}
}
