package ctltree

import (
	"context"
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrnoName returns the symbolic name of an errno ("EINVAL"), as
// /.rubino/errors, the metrics and the access log show it; an errno
// without one is shown as its message.
func ErrnoName(e syscall.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return e.Error()
}

// ErrnoRule maps one kind of domain error to the errno a control-file caller
// sees. Match reports whether the rule applies to err.
type ErrnoRule struct {
	Match func(err error) bool
	Errno syscall.Errno
}

// Is is the rule "errors.Is(err, target) → errno".
func Is(target error, errno syscall.Errno) ErrnoRule {
	return ErrnoRule{Match: func(err error) bool { return errors.Is(err, target) }, Errno: errno}
}

// As is the rule "errors.As(err, *T) → errno", for error types rather than
// sentinel values.
func As[T error](errno syscall.Errno) ErrnoRule {
	return ErrnoRule{Match: func(err error) bool {
		var t T
		return errors.As(err, &t)
	}, Errno: errno}
}

// ErrnoTable is a feature's table from domain errors to errnos, the one
// mapper every control-tree feature uses (tasks, compaction, sessions).
//
// The rule it follows: an *Error passes through unchanged (its handler chose
// the errno); otherwise the first matching rule picks the errno, then the
// common tail applies (a cancelled or timed-out request context → EINTR: the
// caller was interrupted or the mount is going away), and anything else is
// Default (EIO when zero). The reason shown is err's message, passed through
// Reason when set. A table is read-only after construction and safe for
// concurrent use.
type ErrnoTable struct {
	Rules   []ErrnoRule
	Default syscall.Errno
	// Reason rewrites the readable reason; nil keeps err.Error().
	Reason func(err error) string
}

// Map returns nil for nil, err itself when it already carries an *Error,
// and otherwise an *Error with the errno the table gives and the reason.
func (t *ErrnoTable) Map(err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	return &Error{Errno: t.Errno(err), Msg: t.reason(err)}
}

// Errno returns the errno the table gives err (0 for nil), without building
// an *Error: for callers that only choose a log level or a status.
func (t *ErrnoTable) Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Errno
	}
	for _, r := range t.Rules {
		if r.Match(err) {
			return r.Errno
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return syscall.EINTR
	}
	if t.Default != 0 {
		return t.Default
	}
	return syscall.EIO
}

func (t *ErrnoTable) reason(err error) string {
	if t.Reason != nil {
		return t.Reason(err)
	}
	return err.Error()
}
