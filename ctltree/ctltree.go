// Package ctltree describes the rubinofs control tree (/.rubino) as plain Go
// values, with no FUSE import. Features (status, guard, sessions, agents,
// compaction) build their files from the five node kinds below; the
// control tree's room, internal/ctlfs, renders one generic virtual-file
// mechanism for all of them.
//
// The model is Plan 9's /net: read-only files for state, append files for
// streams of records, ctl files that take one command per write(2), and clone
// files that create an object on write and return its id on read from the same
// handle (open RDWR, write a spec, read the id at offset 0).
//
// Errors: a handler returns *Error to choose the errno that reaches the caller
// (EINVAL for malformed input, ENOENT for unknown ids, EPERM for an
// unauthorised caller, EAGAIN for a refused spawn, ...) together with a
// readable reason. internal/ctlfs records the reason: the next read on the same handle
// returns "error: REASON\n" once, and /.rubino/errors keeps a bounded log. Any
// other non-nil error reaches the caller as EIO.
//
// Concurrency: handlers may be called concurrently from many FUSE requests;
// they must do their own locking. A Read handler may block (an ask's answer,
// a task's completion); it must return when ctx is done (the caller was
// interrupted or the mount is going away), and must not block at all when
// NonBlocking(ctx) is true (the reader opened the file with O_NONBLOCK): it
// then returns ErrWouldBlock (EAGAIN) when nothing is ready yet.
package ctltree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
)

// MaxWrite is the largest single write(2) a control file accepts, in bytes.
// A larger write fails with EFBIG before any handler runs, so oversized input
// is refused as a whole and never half-applied.
//
// The mount's max_write is the same 1 MiB, so one write(2) of up to MaxWrite
// bytes reaches a handler as one piece; the kernel splits a larger write(2)
// into pieces of at most 1 MiB, and each piece is judged on its own (the
// parsers' own limits, all smaller, refuse an oversized command).
const MaxWrite = 1 << 20

// MaxLine is the longest line an Append file accepts, in bytes, counting a
// partial line carried over from earlier writes on the same handle. A
// longer line fails with EFBIG; the handle's partial line is dropped and
// nothing of it reaches the handler.
const MaxLine = MaxWrite

// Caller identifies who issued a control-file operation. The mount fills it
// from the FUSE request header (pid, uid, gid) and resolves the session.
type Caller struct {
	Pid     uint32 // caller's thread-group id as the kernel reported it; 0 when unknown
	Uid     uint32 // caller's fs uid
	Gid     uint32 // caller's fs gid
	Session string // the caller's guard session ("default" when unregistered)
	// Privileged is true for the mount's owner (the uid that started the
	// daemon) and for root; it does not imply anything about sessions.
	Privileged bool
}

// Error is a handler error carrying the errno the caller sees and a readable
// reason for the control tree.
type Error struct {
	Errno syscall.Errno
	Msg   string
}

// Error implements error.
func (e *Error) Error() string { return e.Msg }

// Errorf builds an *Error with errno and a formatted reason.
func Errorf(errno syscall.Errno, format string, args ...any) *Error {
	return &Error{Errno: errno, Msg: fmt.Sprintf(format, args...)}
}

// ErrnoOf returns the errno an error maps to: the *Error's errno when err
// wraps one, a syscall.Errno as is, EIO for anything else, and 0 for nil.
func ErrnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Errno
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}

// ErrWouldBlock is what a blocking Read handler or Feed returns at once,
// instead of waiting, when NonBlocking(ctx) is true and nothing is ready:
// the reader sees EAGAIN, as from an empty pipe opened with O_NONBLOCK. It
// is not a failure: internal/ctlfs neither logs it in /.rubino/errors nor turns it
// into the handle's "error: REASON" line, and a later read tries again.
var ErrWouldBlock = &Error{Errno: syscall.EAGAIN, Msg: "nothing to read yet and the file was opened with O_NONBLOCK"}

// nonBlockKey marks a context as a read of an O_NONBLOCK handle.
type nonBlockKey struct{}

// WithNonBlocking returns ctx marked as a read of a handle opened with
// O_NONBLOCK; internal/ctlfs marks every read of such a handle.
func WithNonBlocking(ctx context.Context) context.Context {
	return context.WithValue(ctx, nonBlockKey{}, true)
}

// NonBlocking reports whether ctx is a read of an O_NONBLOCK handle: a
// handler that would wait returns ErrWouldBlock instead.
func NonBlocking(ctx context.Context) bool {
	v, _ := ctx.Value(nonBlockKey{}).(bool)
	return v
}

// Node is one entry of the control tree: *Dir, *File or *Symlink.
type Node interface{ ctlNode() }

// Entry names a child of a static directory.
type Entry struct {
	Name string
	Node Node
}

// Dir is a directory. Static children come from Entries (in order); dynamic
// children (per-session, per-task and per-transcript directories) come from
// List and Lookup. Either part may be nil.
type Dir struct {
	Entries []Entry
	// List returns the names of the dynamic children, in display order.
	List func(c Caller) []string
	// Lookup resolves one dynamic child; nil means ENOENT. Names are never
	// paths: internal/ctlfs never passes a name containing '/' or equal
	// to "." / "..".
	Lookup func(c Caller, name string) Node
}

// NewDir returns a static directory with the given children.
func NewDir(entries ...Entry) *Dir { return &Dir{Entries: entries} }

func (*Dir) ctlNode() {}

// Child resolves name among the static entries first, then Lookup.
func (d *Dir) Child(c Caller, name string) Node {
	for _, e := range d.Entries {
		if e.Name == name {
			return e.Node
		}
	}
	if d.Lookup != nil {
		return d.Lookup(c, name)
	}
	return nil
}

// Names lists static entries then dynamic ones.
func (d *Dir) Names(c Caller) []string {
	out := make([]string, 0, len(d.Entries))
	for _, e := range d.Entries {
		out = append(out, e.Name)
	}
	if d.List != nil {
		out = append(out, d.List(c)...)
	}
	return out
}

// Kind selects how a File treats writes.
type Kind uint8

const (
	// ReadOnly files reject writes with EACCES.
	ReadOnly Kind = iota
	// Append files pass complete lines to Append: each write(2) contributes
	// its complete lines (a trailing partial line is kept on the handle and
	// joined with the next write; a partial line left at close is passed on
	// flush). An error rejects that whole chunk and nothing of it is stored.
	Append
	// Ctl files pass each write(2) as one command, trailing newline removed.
	Ctl
	// Clone files pass the first write(2) as a spec to Clone; the returned id
	// is what the same handle reads from then on ("ID\n").
	Clone
	// Stream files are read-only feeds: each open handle gets its own Feed
	// from Open (the access log); reads block until the feed has data (or
	// return EAGAIN at once on an O_NONBLOCK handle) and ignore the
	// offset; writes are refused with EACCES.
	Stream
)

// Feed is one open handle of a Stream file.
type Feed interface {
	// Read blocks until the feed has data, ctx is done (the caller was
	// interrupted: ctx.Err()) or the feed ended (io.EOF), then copies whole
	// lines into p (a line longer than p is cut; the rest comes next).
	// When NonBlocking(ctx), it never waits: with no data ready and the
	// feed not ended it returns ErrWouldBlock.
	Read(ctx context.Context, p []byte) (int, error)
	// Close ends the feed (the handle was released); a blocked Read returns.
	Close()
}

// File is a virtual file. Read renders its content; it is called once per
// open handle (at the first read) and the handle serves that snapshot, so a
// reader sees one consistent state. Blocking files (an ask's answer) may block
// inside Read until ctx is done; when NonBlocking(ctx) they return
// ErrWouldBlock instead of waiting.
type File struct {
	Kind Kind
	// Mode is the permission bits shown (default 0444 for ReadOnly and
	// Stream, 0666 otherwise). Authorisation is by Caller inside the
	// handlers, never by mode bits alone.
	Mode uint32
	// Read returns the content. nil means an empty file.
	Read func(ctx context.Context, c Caller) ([]byte, error)
	// Append takes complete lines (each ending in '\n') for Append files.
	Append func(c Caller, lines []byte) error
	// Write takes one command for Ctl files.
	Write func(c Caller, cmd []byte) error
	// Clone creates an object from spec and returns its id, for Clone files.
	Clone func(c Caller, spec []byte) (string, error)
	// Open starts a handle's feed, for Stream files.
	Open func(c Caller) (Feed, error)
	// Render, when set on a ReadOnly file, is used instead of Read: it
	// writes the content to w, from a goroutine of the handle's own
	// started at the first read, while the reader reads it in order, so
	// the content is never held whole (the journal's change lists). A
	// read at offset 0 starts it again; a read elsewhere than where the
	// last one ended (or within its chunk) is EINVAL; an error of Render,
	// or a w.Write failing because the handle was released, ends it (the
	// reader gets EIO after what was written). docs/DESIGN.md#ctl-render.
	Render func(c Caller, w io.Writer) error
	// CloneRender, when set on a Clone file, is used instead of Clone: the
	// first write(2) passes the spec, and an error fails that write (as
	// Clone's does); the returned function then writes the reply, which
	// the same handle reads as Render's content (in order; a read at
	// offset 0 starts it again).
	CloneRender func(c Caller, spec []byte) (func(w io.Writer) error, error)
}

func (*File) ctlNode() {}

// Symlink is a symbolic link whose target depends on the caller, as
// /proc/self does (/.rubino/self points at the caller's session directory).
type Symlink struct {
	Target func(c Caller) string
}

func (*Symlink) ctlNode() {}

// Text returns a ReadOnly file whose content is produced by fn.
func Text(fn func(c Caller) string) *File {
	return &File{Kind: ReadOnly, Read: func(_ context.Context, c Caller) ([]byte, error) {
		return []byte(fn(c)), nil
	}}
}

// Static returns a ReadOnly file with fixed content.
func Static(s string) *File {
	return Text(func(Caller) string { return s })
}
