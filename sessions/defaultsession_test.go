package sessions

import (
	"errors"
	"os"
	"testing"
)

// TestDefaultSessionNames: the default session of each uid, and back.
func TestDefaultSessionNames(t *testing.T) {
	for _, c := range []struct {
		uid, owner uint32
		name       string
	}{{1000, 1000, "default"}, {0, 1000, "default-0"}, {65534, 0, "default-65534"}, {4294967295, 0, "default-4294967295"}} {
		if got := DefaultFor(c.uid, c.owner); got != c.name {
			t.Errorf("DefaultFor(%d, %d) = %q, want %q", c.uid, c.owner, got, c.name)
		}
		if uid, ok := DefaultUID(c.name, c.owner); !ok || uid != c.uid {
			t.Errorf("DefaultUID(%q, %d) = %d, %v", c.name, c.owner, uid, ok)
		}
		if ValidName(c.name) == nil {
			t.Errorf("%q is accepted as a session name", c.name)
		}
	}
	for _, n := range []string{"default-", "default-01", "default-+1", "default-4294967296", "default-x", "defaults", "default-1a"} {
		if _, ok := DefaultUID(n, 0); ok {
			t.Errorf("DefaultUID(%q) ok", n)
		}
	}
}

// TestSessionCapPerOwner: each owner has its own cap; the sessions of one
// never refuse another's; ending one frees a place; OwnerOf answers for
// live and ended sessions.
func TestSessionCapPerOwner(t *testing.T) {
	s := NewRegistry()
	s.MaxPerOwner = 2
	s.MountOwner = 0
	for _, n := range []string{"a", "b"} {
		if err := s.RegisterKeptFor(65534, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RegisterKeptFor(65534, "c", ""); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("third session of uid 65534: %v", err)
	}
	if err := s.RegisterFor(0, "r", uint32(os.Getpid()), "", false); err != nil {
		t.Fatalf("root past nobody's cap: %v", err)
	}
	if u, ok := s.OwnerOf("r"); !ok || u != 0 {
		t.Fatalf("OwnerOf(r) = %d %v", u, ok)
	}
	s.End("a")
	if u, ok := s.OwnerOf("a"); !ok || u != 65534 {
		t.Fatalf("OwnerOf(a), ended = %d %v", u, ok)
	}
	if err := s.RegisterKeptFor(65534, "c", ""); err != nil {
		t.Fatalf("after an end: %v", err)
	}
	s.End("r")
}
