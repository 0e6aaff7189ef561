package ctlfs

// The paged read of a control file whose content is rendered as it is
// read (ctltree.File.Render, CloneRender): the renderer writes into a pipe
// from a goroutine of the handle's own, each read takes the next chunk,
// and only the last chunk is kept (for a read of it again), so a long
// list is never held whole (docs/DESIGN.md#ctl-render).

import (
	"errors"
	"io"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
)

// pager is the rendered content of one handle. The handle's mutex guards
// it; the renderer goroutine only writes to the pipe.
type pager struct {
	render func(w io.Writer) error
	// cursor: a read's offset is ignored except that 0 starts again (a
	// clone file's reply, read at the write position by a shell).
	cursor bool

	pr      *io.PipeReader
	pos     int64  // bytes served so far
	last    []byte // the last chunk served, from offset lastOff
	lastOff int64
	done    bool // the renderer ended (EOF or error, in err)
	err     error
	buf     []byte
	started bool

	// slots, when set, bounds the renderers of uid running at once
	// (Tree.renders): each renderer goroutine holds one from its start
	// until its render returns (its content written, or its next write
	// failed once the handle was released or read again from 0).
	slots *uidQuota
	uid   uint32
}

// start (re)starts the renderer, or returns the EMFILE error when uid
// runs as many as it may (the pager is then as if never started).
func (p *pager) start() error {
	p.stop()
	p.started = false
	if p.slots != nil {
		if err := takeRender(p.slots, p.uid); err != nil {
			return err
		}
	}
	pr, pw := io.Pipe()
	p.pr, p.pos, p.last, p.lastOff, p.done, p.err, p.started = pr, 0, nil, 0, false, nil, true
	render, slots, uid := p.render, p.slots, p.uid
	go func() {
		pw.CloseWithError(render(pw))
		if slots != nil {
			giveRender(slots, uid)
		}
	}()
	return nil
}

// stop ends the renderer (its next write fails, and its slot is given
// back as it returns) and drops the pipe.
func (p *pager) stop() {
	if p.pr != nil {
		p.pr.CloseWithError(errPagerClosed)
		p.pr = nil
	}
}

// errPagerClosed is what a renderer's write returns once its handle was
// released or restarted.
var errPagerClosed = errors.New("control file handle closed")

// read serves n bytes at off. EINVAL for an offset out of order; the
// renderer's error once its content is exhausted.
func (p *pager) read(off int64, n int) ([]byte, error) {
	if !p.started || (off == 0 && p.pos > 0) {
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	if p.cursor {
		off = p.pos
	}
	if off >= p.lastOff && off < p.pos { // the last chunk again
		end := min(int64(len(p.last)), off-p.lastOff+int64(n))
		return p.last[off-p.lastOff : end], nil
	}
	if off != p.pos {
		return nil, ctltree.Errorf(syscall.EINVAL, "this control file is read in order: read at offset %d, next is %d (read it again from offset 0)", off, p.pos)
	}
	if p.done {
		return nil, p.err
	}
	if cap(p.buf) < n {
		p.buf = make([]byte, n)
	}
	got, err := io.ReadFull(p.pr, p.buf[:n])
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		p.done, err = true, nil
	} else if err != nil {
		p.done, p.err = true, ctltree.Errorf(syscall.EIO, "%v", err)
		if got == 0 {
			return nil, p.err
		}
		err = nil
	}
	if got == 0 { // the end: the last chunk stays readable again
		return nil, err
	}
	p.last = append(p.last[:0], p.buf[:got]...)
	p.lastOff = p.pos
	p.pos += int64(got)
	return p.last, err
}
