package main

// Control-file I/O with plain blocking system calls
// (docs/DESIGN.md#ctl-blocking-io). Every subcommand reads and writes the
// control tree through readCtl, writeCtl, cloneCtl or a ctlFile, never
// through an *os.File: os.Open registers a FUSE file with Go's poller
// (edge-triggered epoll, descriptor switched to O_NONBLOCK), and a control
// write the daemon refuses with EAGAIN (a cap: "try again later") then
// parks the goroutine for a readiness event that never comes. Here EAGAIN
// is an error like any other: the command prints the daemon's reason and
// exits.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
)

// ctlFile is an open control file: a plain descriptor that is never
// registered with Go's poller and stays in blocking mode, so a read that
// blocks in the daemon (agents/ID/wait, answer, approval) blocks in the
// kernel, and a write refused with any errno (EAGAIN included) returns it.
// A blocked read is interruptible: a signal makes the kernel send the
// daemon FUSE_INTERRUPT, the control tree answers the read with EINTR, and
// the Go runtime's default SIGINT/SIGTERM handling then ends the process.
// Not safe for concurrent use.
type ctlFile struct {
	fd   int
	path string
}

// openCtl opens the control file at path (absolute) with flags
// (unix.O_RDONLY or unix.O_RDWR; O_CLOEXEC is added), retrying on EINTR. A
// failure is an *fs.PathError with Op "open" and the errno, as os.OpenFile
// returns, so errors.Is(err, fs.ErrNotExist) works on it.
func openCtl(path string, flags int) (*ctlFile, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return &ctlFile{fd: fd, path: path}, nil
	}
}

// close closes the descriptor once; later calls return nil. An errno the
// daemon answered the FLUSH with is a *ctlError without a reason (the
// handle it would be read from is gone).
func (f *ctlFile) close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return f.fail(err)
	}
	return nil
}

// write writes data in a single write(2) (one command, or one batch of
// lines for an append file), retrying on EINTR only. A refusal is a
// *ctlError carrying the errno and the reason the control tree left on
// this handle; a short write is an error naming the counts.
func (f *ctlFile) write(data []byte) error {
	for {
		n, err := unix.Write(f.fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return f.fail(err)
		}
		if n != len(data) {
			return fmt.Errorf("%s: short write: %d of %d bytes", f.path, n, len(data))
		}
		return nil
	}
}

// readAll reads from the current offset to end of file (read(2) until it
// returns 0), retrying on EINTR. A failed read (a blocking read cancelled
// by the daemon, an unauthorised reader) is a *ctlError with the reason.
func (f *ctlFile) readAll() ([]byte, error) {
	return f.readLoop(func(b []byte, _ int64) (int, error) { return unix.Read(f.fd, b) })
}

// readAllAt reads from offset off to end of file with pread(2), for a
// reply on the handle a request was written to (clone and request files
// answer from offset 0).
func (f *ctlFile) readAllAt(off int64) ([]byte, error) {
	return f.readLoop(func(b []byte, pos int64) (int, error) { return unix.Pread(f.fd, b, off+pos) })
}

// copyAt copies from offset off to end of file to w with pread(2), a
// buffer at a time, never holding the whole reply (a streamed journal
// reply, docs/DESIGN.md#ctl-render). A failed read is a *ctlError with the
// reason; a failed write to w is returned as is.
func (f *ctlFile) copyAt(w io.Writer, off int64) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Pread(f.fd, buf, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return f.fail(err)
		}
		if n == 0 {
			return nil
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
	}
}

// readLoop calls rd with a free slice of a growing buffer and the bytes
// read so far, until rd returns 0 bytes.
func (f *ctlFile) readLoop(rd func(b []byte, pos int64) (int, error)) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd(buf[len(buf):cap(buf)], int64(len(buf)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, f.fail(err)
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// fail turns a failed system call on f into a *ctlError, reading the
// reason the control tree left on the same handle: one pread at offset 0,
// which the control tree answers with its one-shot "error: REASON" line
// (a read from the current offset would read on into the file's content,
// or fail on a clone file with a second error). err that is not an errno
// is wrapped with the path.
func (f *ctlFile) fail(err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	reason := ""
	if f.fd >= 0 {
		buf := make([]byte, 4096)
		if n, _ := unix.Pread(f.fd, buf, 0); n > 0 {
			line, _, _ := strings.Cut(string(buf[:n]), "\n")
			reason = strings.TrimSpace(strings.TrimPrefix(line, "error:"))
		}
	}
	return &ctlError{Path: f.path, Errno: errno, Reason: reason}
}

// ctlError is a failed control-file operation: the errno the kernel
// returned and the reason the control tree gave for it ("" when it gave
// none).
type ctlError struct {
	Path   string
	Errno  syscall.Errno
	Reason string
}

func (e *ctlError) Error() string {
	switch {
	case e.Reason == "":
		return fmt.Sprintf("%s: %s", e.Path, e.Errno)
	case strings.HasSuffix(e.Reason, e.Errno.Error()): // the reason already ends with it
		return fmt.Sprintf("%s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Path, e.Reason, e.Errno)
}

// Unwrap returns the errno, for errors.Is(err, syscall.EAGAIN) and the
// like.
func (e *ctlError) Unwrap() error { return e.Errno }

// ctlPathOf is the absolute path of the control file rel of mount mnt.
func ctlPathOf(mnt, rel string) string { return filepath.Join(mnt, ctltree.DirName, rel) }

// readCtl reads a whole control file (ctlFile.readAll). It blocks while
// the file blocks (agents/ID/wait), interruptibly.
func readCtl(mnt, rel string) ([]byte, error) {
	f, err := openCtl(ctlPathOf(mnt, rel), unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.close()
	return f.readAll()
}

// writeCtl writes one command (or one batch of lines, for append files) to
// a control file in a single write(2) on a read-write handle (the reason
// of a refusal is read back from it), then closes it.
func writeCtl(mnt, rel string, data []byte) error {
	f, err := openCtl(ctlPathOf(mnt, rel), unix.O_RDWR)
	if err != nil {
		return err
	}
	defer f.close()
	if err := f.write(data); err != nil {
		return err
	}
	return f.close()
}

// cloneCtl opens a clone file read-write, writes spec and reads the new id
// from the same handle at offset 0. A refusal (a cap: EAGAIN; a malformed
// spec: EINVAL; too long: EFBIG; not allowed: EPERM) is a *ctlError with
// the daemon's reason.
func cloneCtl(mnt, rel string, spec []byte) (string, error) {
	f, err := openCtl(ctlPathOf(mnt, rel), unix.O_RDWR)
	if err != nil {
		return "", err
	}
	defer f.close()
	if len(spec) == 0 {
		spec = []byte("\n")
	}
	if err := f.write(spec); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	n, err := unix.Pread(f.fd, buf, 0)
	for err == unix.EINTR {
		n, err = unix.Pread(f.fd, buf, 0)
	}
	if err != nil {
		return "", fmt.Errorf("%s: reading the new id: %w", f.path, err)
	}
	id := strings.TrimSpace(string(buf[:n]))
	if id == "" {
		return "", fmt.Errorf("%s: no id returned", f.path)
	}
	return id, nil
}
