package sessions

import (
	"errors"
	"testing"
	"time"
)

// TestNameOfEndedSessionKeptForItsUID: a name listed among the ended
// sessions is its owner's: another uid's registration of it (by any of
// the ways: pid, kept, rename) fails with ErrSessionExists, the same uid's
// succeeds; NameHeld is asked too, and OnRegister runs once per name
// registered.
func TestNameOfEndedSessionKeptForItsUID(t *testing.T) {
	s := NewRegistry()
	var registered []string
	s.OnRegister = func(name string, _ time.Time) { registered = append(registered, name) }
	held := errors.New("held")
	s.NameHeld = func(name string, owner uint32) error {
		if name == "journaled" && owner != 7 {
			return held
		}
		return nil
	}
	if err := s.RegisterKeptFor(7, "mine", "cmd"); err != nil {
		t.Fatal(err)
	}
	if err := s.End("mine"); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterKeptFor(8, "mine", "cmd"); !errors.Is(err, ErrSessionExists) {
		t.Fatalf("uid 8 registered uid 7's ended name: %v", err)
	}
	if err := s.RegisterFor(8, "mine", 1, "cmd", false); !errors.Is(err, ErrSessionExists) {
		t.Fatalf("uid 8 registered uid 7's ended name by pid: %v", err)
	}
	if err := s.RegisterKeptFor(8, "other", "cmd"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename("other", "mine"); !errors.Is(err, ErrSessionExists) {
		t.Fatalf("uid 8 renamed its session to uid 7's ended name: %v", err)
	}
	if err := s.RegisterKeptFor(8, "journaled", "cmd"); !errors.Is(err, held) {
		t.Fatalf("NameHeld's refusal: %v", err)
	}
	if err := s.RegisterKeptFor(7, "mine", "cmd"); err != nil {
		t.Fatalf("uid 7 registering its own ended name: %v", err)
	}
	if err := s.Rename("other", "renamed"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"mine", "other", "mine", "renamed"}; len(registered) != len(want) || registered[2] != "mine" || registered[3] != "renamed" {
		t.Fatalf("OnRegister saw %q, want %q", registered, want)
	}
}
