package ctltree

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

var errMissing = errors.New("missing")

type typedErr struct{}

func (typedErr) Error() string { return "typed" }

func TestErrnoTable(t *testing.T) {
	tab := &ErrnoTable{Rules: []ErrnoRule{
		Is(errMissing, syscall.ENOENT),
		As[typedErr](syscall.EAGAIN),
		Is(context.DeadlineExceeded, syscall.ETIMEDOUT),
	}}
	cases := []struct {
		err  error
		want syscall.Errno
	}{
		{fmt.Errorf("x: %w", errMissing), syscall.ENOENT},
		{fmt.Errorf("y: %w", typedErr{}), syscall.EAGAIN},
		{context.DeadlineExceeded, syscall.ETIMEDOUT}, // a rule beats the common tail
		{context.Canceled, syscall.EINTR},
		{errors.New("other"), syscall.EIO},
		{Errorf(syscall.EPERM, "chosen"), syscall.EPERM},
	}
	for _, c := range cases {
		var ce *Error
		if !errors.As(tab.Map(c.err), &ce) || ce.Errno != c.want {
			t.Errorf("Map(%v) = %v, want errno %v", c.err, tab.Map(c.err), c.want)
		}
		if got := tab.Errno(c.err); got != c.want {
			t.Errorf("Errno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if tab.Map(nil) != nil || tab.Errno(nil) != 0 {
		t.Error("nil error must map to nil / 0")
	}
	withDefault := &ErrnoTable{Default: syscall.EINVAL, Reason: func(err error) string { return "r: " + err.Error() }}
	var ce *Error
	if !errors.As(withDefault.Map(errors.New("bad")), &ce) || ce.Errno != syscall.EINVAL || ce.Msg != "r: bad" {
		t.Errorf("default/reason: got %+v", ce)
	}
}

func TestJSONLines(t *testing.T) {
	type rec struct {
		P string `json:"p"`
	}
	b, err := JSONLines([]rec{{"a<b>&c"}, {"d"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"p\":\"a<b>&c\"}\n{\"p\":\"d\"}\n"; string(b) != want {
		t.Errorf("JSONLines = %q, want %q", b, want)
	}
	if b, err := JSONLines[rec](nil); err != nil || len(b) != 0 {
		t.Errorf("empty: %q %v", b, err)
	}
}
