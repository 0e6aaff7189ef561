package sessionctl

import (
	"errors"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/sessions"
)

// ownerMap is an OwnerRegistry over a fixed map.
type ownerMap map[string]uint32

func (m ownerMap) OwnerOf(name string) (uint32, bool) { uid, ok := m[name]; return uid, ok }

// TestOwnersDefault: the mount's owner is DefaultSession, another uid its
// own default session, and past MaxDefaultSessions uids a new one is
// UnknownSession while the ones seen keep theirs.
func TestOwnersDefault(t *testing.T) {
	o := NewOwners(1000, nil)
	if got := o.Default(1000); got != sessions.Default {
		t.Fatalf("owner's default session %q", got)
	}
	if got := o.Default(2000); got != "default-2000" || !o.IsDefault(got) {
		t.Fatalf("uid 2000's default session %q", got)
	}
	for uid := uint32(3000); uid < 3000+MaxDefaultSessions; uid++ {
		o.Default(uid)
	}
	if got := o.Default(9999); got != sessions.Unknown {
		t.Fatalf("uid past the cap: %q", got)
	}
	if got := o.Default(2000); got != "default-2000" {
		t.Fatalf("a uid seen before the cap: %q", got)
	}
	if n := len(o.Defaults()); n != MaxDefaultSessions {
		t.Fatalf("%d default sessions listed", n)
	}
}

// TestOwnersMayActOn is the rule of docs/DESIGN.md#sessions: a session
// acts on itself; from outside every session the mount's owner and root
// act on all, another uid on its own sessions only; a session never on
// another.
func TestOwnersMayActOn(t *testing.T) {
	o := NewOwners(1000, ownerMap{"a": 2000, "b": 3000})
	owner := ctltree.Caller{Uid: 1000, Session: sessions.Default, Privileged: true}
	u2 := ctltree.Caller{Uid: 2000, Session: "default-2000"}
	inA := ctltree.Caller{Uid: 2000, Session: "a"}
	inAOwner := ctltree.Caller{Uid: 1000, Session: "a", Privileged: true}
	cases := []struct {
		c       ctltree.Caller
		session string
		want    bool
	}{
		{owner, "a", true}, {owner, "default-2000", true}, {owner, "nobody-knows", true},
		{u2, "a", true}, {u2, "default-2000", true}, {u2, "b", false}, {u2, sessions.Default, false},
		{u2, "nobody-knows", false},
		{inA, "a", true}, {inA, "default-2000", false}, {inA, "b", false},
		{inAOwner, "b", false}, {inAOwner, sessions.Default, false},
	}
	for _, tc := range cases {
		if got := o.MayActOn(tc.c, tc.session); got != tc.want {
			t.Errorf("uid %d in %s on %s: %v, want %v", tc.c.Uid, tc.c.Session, tc.session, got, tc.want)
		}
		err := o.MayActOnErr(tc.c, tc.session)
		var ce *ctltree.Error
		if tc.want != (err == nil) || (err != nil && (!errors.As(err, &ce) || ce.Errno != syscall.EPERM)) {
			t.Errorf("uid %d in %s on %s: error %v", tc.c.Uid, tc.c.Session, tc.session, err)
		}
	}
	if !o.Admin(owner) || o.Admin(u2) || o.Admin(inAOwner) {
		t.Error("Admin: the mount's owner from outside every session only")
	}
}
