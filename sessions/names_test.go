package sessions

import (
	"errors"
	"fmt"
	"sync/atomic"
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

// TestOwnerOfWhileSessionsEnd: OwnerOf reads the ended list while
// sessions end and the list is compacted in place (MaxEnded); under -race
// a read after the registry's mutex is released is caught.
func TestOwnerOfWhileSessionsEnd(t *testing.T) {
	s := NewRegistry()
	s.MaxEnded = 2
	var last atomic.Value
	last.Store("")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 2000; i++ {
			name := fmt.Sprintf("s%d", i)
			if err := s.RegisterKeptFor(7, name, "cmd"); err != nil {
				t.Error(err)
				return
			}
			s.End(name)
			last.Store(name)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
			if uid, ok := s.OwnerOf(last.Load().(string)); ok && uid != 7 {
				t.Errorf("OwnerOf = %d", uid)
			}
		}
	}
}
