package observe

// .rubino/accesslog, in the style of JuiceFS's .accesslog: every open
// handle is a reader with its own bounded buffer of lines; rawWrap
// publishes one line per FUSE operation to every reader without ever
// blocking (a full buffer drops the line and counts it; the reader is told
// how many it lost at its next read); an idle reader gets a heartbeat line
// every second.
//
// A line is
//
//	2026.11.24 10:00:00.123456 [uid:0,gid:0,pid:123,session:default] write (42,4096,0,7): OK (4096) <0.000031>
//
// local time, the caller, the op with its arguments (node ids are the FUSE
// node ids the kernel uses, 1 for the root, as JuiceFS's inode numbers),
// "OK" or the errno's name, the result where the op has one, and the time
// the daemon took in seconds.

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/sessions"
)

// accessLogBuffer is a reader's buffer, in lines. A `cat` keeps up with
// bursts of thousands of operations (`git status`); a reader that does not
// read loses lines, never the writers' time.
const accessLogBuffer = 4096

// accessLogHeartbeat is how long a reader waits for a line before it gets a
// heartbeat line instead.
const accessLogHeartbeat = time.Second

// accessLogTime is the time layout of a line (JuiceFS's).
const accessLogTime = "2006.01.02 15:04:05.000000"

// accessLog is the set of readers of .rubino/accesslog.
type accessLog struct {
	mu      sync.Mutex
	readers atomic.Pointer[[]*alogReader] // copy-on-write; nil or empty: no reader
	closed  chan struct{}                 // closed by close: every feed ends
	once    sync.Once
	dropped prometheus.Counter // rubinofs_accesslog_dropped_lines_total
}

func newAccessLog() *accessLog {
	return &accessLog{
		closed: make(chan struct{}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rubinofs_accesslog_dropped_lines_total",
			Help: "Access-log lines dropped because a reader's buffer was full.",
		}),
	}
}

// active reports whether any reader is attached: one atomic load, so
// producers build no line while nobody reads.
func (l *accessLog) active() bool {
	p := l.readers.Load()
	return p != nil && len(*p) > 0
}

// publish hands line (which must not be modified afterwards), a request
// of session sess by uid uid, to every reader that may see it
// (alogReader.see). It never blocks: a reader whose buffer is full loses
// the line.
func (l *accessLog) publish(line []byte, sess string, uid uint32) {
	p := l.readers.Load()
	if p == nil {
		return
	}
	for _, r := range *p {
		if r.see != nil && !r.see(sess, uid) {
			continue
		}
		select {
		case r.ch <- line:
		default:
			r.dropped.Add(1)
			l.dropped.Inc()
		}
	}
}

// open attaches a new reader that gets the lines see accepts (nil: all).
// After close the reader's feed is at its end.
func (l *accessLog) open(see func(sess string, uid uint32) bool) *alogReader {
	r := &alogReader{log: l, see: see, ch: make(chan []byte, accessLogBuffer), done: make(chan struct{})}
	select {
	case <-l.closed:
		return r // never attached: its first read is end-of-file
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var cur []*alogReader
	if p := l.readers.Load(); p != nil {
		cur = *p
	}
	next := append(append(make([]*alogReader, 0, len(cur)+1), cur...), r)
	l.readers.Store(&next)
	return r
}

// detach removes r from the readers.
func (l *accessLog) detach(r *alogReader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.readers.Load()
	if p == nil {
		return
	}
	next := make([]*alogReader, 0, len(*p))
	for _, x := range *p {
		if x != r {
			next = append(next, x)
		}
	}
	l.readers.Store(&next)
}

// close ends every feed, present and future (unmount). Idempotent.
func (l *accessLog) close() {
	l.once.Do(func() { close(l.closed) })
}

// alogReader is one open handle of .rubino/accesslog: a ctltree.Feed.
type alogReader struct {
	log *accessLog
	// see filters the lines by the request's session and uid (nil: the
	// reader sees all): set at open from the reader's caller.
	see     func(sess string, uid uint32) bool
	ch      chan []byte
	dropped atomic.Uint64 // lines lost since the last report
	done    chan struct{}
	once    sync.Once

	mu      sync.Mutex // serialises reads of this handle
	pending []byte     // the rest of a line cut by a short read
}

// Read implements ctltree.Feed: it blocks until a line, a heartbeat (after
// accessLogHeartbeat without a line), the end of the feed (io.EOF: the
// handle was released or the mount is going away) or ctx's end (ctx.Err():
// the reader was interrupted), then fills p with as many whole lines as are
// waiting. Lost lines are reported first, as "TIME #dropped N lines". When
// ctltree.NonBlocking(ctx) it never waits: with nothing waiting it returns
// io.EOF if the feed ended, else ctltree.ErrWouldBlock.
func (r *alogReader) Read(ctx context.Context, p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	n := 0
	if d := r.dropped.Swap(0); d > 0 {
		n = r.put(p, n, fmt.Appendf(nil, "%s #dropped %d lines: this reader fell behind (buffer %d lines)\n",
			time.Now().Format(accessLogTime), d, accessLogBuffer))
	}
	if n == 0 && ctltree.NonBlocking(ctx) {
		// An O_NONBLOCK reader takes what is waiting, or EAGAIN: it gets
		// no heartbeats, which only keep a blocked reader informed.
		select {
		case line := <-r.ch:
			n = r.put(p, n, line)
		default:
			select {
			case <-r.done:
				return 0, io.EOF
			case <-r.log.closed:
				return 0, io.EOF
			default:
				return 0, ctltree.ErrWouldBlock
			}
		}
	}
	if n == 0 {
		t := time.NewTimer(accessLogHeartbeat)
		select {
		case line := <-r.ch:
			t.Stop()
			n = r.put(p, n, line)
		case <-t.C:
			return r.put(p, 0, fmt.Appendf(nil, "%s #heartbeat\n", time.Now().Format(accessLogTime))), nil
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-r.done:
			t.Stop()
			return 0, io.EOF
		case <-r.log.closed:
			t.Stop()
			return 0, io.EOF
		}
	}
	for n < len(p) && len(r.pending) == 0 {
		select {
		case line := <-r.ch:
			n = r.put(p, n, line)
		default:
			return n, nil
		}
	}
	return n, nil
}

// put copies line into p at n and returns the new fill. A line that does
// not fit is kept whole for the next read, unless p holds nothing yet: then
// it is cut and its rest kept.
func (r *alogReader) put(p []byte, n int, line []byte) int {
	if len(line) <= len(p)-n {
		return n + copy(p[n:], line)
	}
	if n > 0 {
		r.pending = line
		return n
	}
	c := copy(p, line)
	r.pending = line[c:]
	return c
}

// Close implements ctltree.Feed: it detaches the reader; a blocked Read
// returns io.EOF. Idempotent.
func (r *alogReader) Close() {
	r.once.Do(func() {
		close(r.done)
		r.log.detach(r)
	})
}

// openAccessLog is the Open of the Stream file .rubino/accesslog: any
// caller may read it, and sees the lines of the sessions it may see
// (Host.MayActOn, decided per line as it is published): the mount's owner and
// root from outside every session see every line; anyone else sees its own
// session's, and from outside every session those of the sessions its uid
// owns. A line naming no session ("-": pid 0, or a handle opened while no
// reader was attached) is shown to such a reader only when it is the
// reader's uid's and the reader is outside every session.
func (o *Observer) openAccessLog(c ctltree.Caller) (ctltree.Feed, error) {
	h := o.host
	if h == nil {
		return nil, ctltree.Errorf(syscall.EIO, "the access log has no mount to ask who may see its lines")
	}
	outside := h.Outside(c)
	if c.Privileged && outside { // the mount's owner or root, outside every session
		return o.m.alog.open(nil), nil
	}
	see := func(sess string, uid uint32) bool {
		if sess == "-" || sess == sessions.Unknown {
			return uid == c.Uid && outside
		}
		return h.MayActOn(c, sess)
	}
	return o.m.alog.open(see), nil
}
