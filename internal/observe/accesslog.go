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

// accessLogReadersPerUID and accessLogReaders bound the attached readers:
// of one uid, and in all (the mount's owner and root, outside every
// session, past the second too). Each reader costs every request of the
// mount a look (publish) and holds up to accessLogBuffer lines: 4,000
// readers of one uid took the daemon from 26 MB to 418 MB and made a stat
// 300 times slower. At most about 60 MB are held.
const (
	accessLogReadersPerUID = 8
	accessLogReaders       = 64
)

// accessLog is the set of readers of .rubino/accesslog.
type accessLog struct {
	mu      sync.Mutex
	byUID   map[uint32]int                // attached readers per uid (under mu)
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

// open attaches a new reader of uid that gets the lines see accepts (nil:
// all). After close the reader's feed is at its end. EMFILE, with the
// reason, past accessLogReadersPerUID readers of uid or, unless exempt
// (the owner or root outside every session), accessLogReaders in all.
func (l *accessLog) open(uid uint32, exempt bool, see func(sess string, uid uint32) bool) (*alogReader, error) {
	r := &alogReader{log: l, uid: uid, see: see, ch: make(chan []byte), done: make(chan struct{})}
	select {
	case <-l.closed:
		return r, nil // never attached: its first read is end-of-file
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var cur []*alogReader
	if p := l.readers.Load(); p != nil {
		cur = *p
	}
	if l.byUID[uid] >= accessLogReadersPerUID || !exempt && len(cur) >= accessLogReaders {
		return nil, ctltree.Errorf(syscall.EMFILE, "%d readers of the access log are attached, %d of them uid %d's (at most %d of one uid, %d in all): close one first",
			len(cur), l.byUID[uid], uid, accessLogReadersPerUID, accessLogReaders)
	}
	if l.byUID == nil {
		l.byUID = map[uint32]int{}
	}
	l.byUID[uid]++
	r.attached = true
	r.ch = make(chan []byte, accessLogBuffer)
	next := append(append(make([]*alogReader, 0, len(cur)+1), cur...), r)
	l.readers.Store(&next)
	return r, nil
}

// detach removes r from the readers.
func (l *accessLog) detach(r *alogReader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.attached {
		r.attached = false
		if l.byUID[r.uid]--; l.byUID[r.uid] <= 0 {
			delete(l.byUID, r.uid)
		}
	}
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
	see      func(sess string, uid uint32) bool
	uid      uint32 // the reader's, counted in accessLog.byUID
	attached bool   // counted (under accessLog.mu)
	ch       chan []byte
	dropped  atomic.Uint64 // lines lost since the last report
	done     chan struct{}
	once     sync.Once

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
		return feed(o.m.alog.open(c.Uid, true, nil))
	}
	see := func(sess string, uid uint32) bool {
		if sess == "-" || sess == sessions.Unknown {
			return uid == c.Uid && outside
		}
		return h.MayActOn(c, sess)
	}
	return feed(o.m.alog.open(c.Uid, false, see))
}

// feed is open's answer as a ctltree.Feed: nil, not a nil reader, with an
// error.
func feed(r *alogReader, err error) (ctltree.Feed, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
