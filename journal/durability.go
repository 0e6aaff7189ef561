package journal

// When the journal's writes become durable: on the request path (SyncFsync)
// or by one background flusher within a bound (SyncWrite)
// (docs/DESIGN.md#journal-sync).

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SyncMode says when a record and its blob are made durable
// (docs/DESIGN.md#journal-sync).
type SyncMode int

const (
	// SyncWrite (the default) writes the blob and the record with
	// write(2), the blob named at its address, before Record returns, with
	// no fsync on the request path: both survive any crash of the daemon
	// (kill -9 included), as the page cache keeps them. A background
	// flusher makes them durable on disk within about FlushInterval
	// (the bytes of a pre-image kept by linking the doomed inode are
	// left to the kernel's writeback, as the file's own would have been:
	// docs/DESIGN.md#journal-link-durable); an OS crash or power loss may
	// lose the most recent ones (as SQLite's WAL with synchronous=NORMAL
	// does), which a rewind reports as unrecoverable (UnrecoverableLost)
	// or never sees.
	SyncWrite SyncMode = iota
	// SyncFsync fsyncs the blob and its directory and fdatasyncs the
	// record before Record returns (docs/DESIGN.md#journal-store): an
	// acknowledged change survives an OS crash too.
	SyncFsync
)

// DefaultFlushInterval is how long, at most, the flusher of SyncWrite
// waits after the first write it has not made durable (1 s).
const DefaultFlushInterval = time.Second

// String is the mode's name in the config: "write" or "fsync".
func (m SyncMode) String() string {
	if m == SyncFsync {
		return "fsync"
	}
	return "write"
}

// ParseSyncMode parses "write" or "fsync" (journal.sync, --journal-sync).
func ParseSyncMode(s string) (SyncMode, error) {
	switch s {
	case "write", "":
		return SyncWrite, nil
	case "fsync":
		return SyncFsync, nil
	}
	return SyncWrite, fmt.Errorf("journal: sync mode %q is not write or fsync", s)
}

// flusher is SyncWrite's background flusher: one goroutine that, once
// kicked, waits the interval and then makes durable every blob and log
// written since the last flush. It never runs on a request path.
type flusher struct {
	interval time.Duration
	onError  func(error)
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}

	mu    sync.Mutex // one flush at a time
	dmu   sync.Mutex // guards dirty
	dirty map[*sessionLog]struct{}

	// afterFlush, when set (tests), is called after each background flush.
	afterFlush func()
}

// startFlusher starts j's flusher (SyncWrite only).
func (j *Journal) startFlusher(interval time.Duration, onError func(error)) {
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	fl := &flusher{interval: interval, onError: onError, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), dirty: map[*sessionLog]struct{}{}}
	j.fl = fl
	go j.flushLoop(fl)
}

func (j *Journal) flushLoop(fl *flusher) {
	defer close(fl.done)
	// Off the request path: make the store's 256 fan-out directories now,
	// so a blob's first write in a directory costs no mkdir.
	if err := j.blobs.makeSubs(fl.stop); err != nil && fl.onError != nil {
		fl.onError(err)
	}
	t := time.NewTimer(fl.interval)
	t.Stop()
	for {
		select {
		case <-fl.stop:
			return
		case <-fl.kick:
		}
		t.Reset(fl.interval)
		select {
		case <-fl.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if err := j.Flush(); err != nil && fl.onError != nil {
			fl.onError(err)
		}
		if fl.afterFlush != nil {
			fl.afterFlush()
		}
	}
}

// makeSubs makes every fan-out directory of the store (blobs/00 to
// blobs/ff) not known to exist, stopping early when stop is closed.
func (b *Blobs) makeSubs(stop <-chan struct{}) error {
	for i := 0; i < 256; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		a := hexAddr([16]byte{byte(i)})
		if err := b.makeSub(filepath.Dir(b.Path(a)), byte(i)); err != nil {
			return err
		}
	}
	return nil
}

// stopFlusher stops the flusher goroutine and waits for it (Close then
// flushes once more itself).
func (j *Journal) stopFlusher() {
	if j.fl == nil {
		return
	}
	select {
	case <-j.fl.stop:
	default:
		close(j.fl.stop)
	}
	<-j.fl.done
}

// wrote notes that l was written without an fdatasync: the next flush
// makes it durable. A no-op in SyncFsync mode (no flusher; the next
// fdatasync'ed record of the log covers it, docs/DESIGN.md#journal-rewind).
func (j *Journal) wrote(l *sessionLog) {
	fl := j.fl
	if fl == nil {
		return
	}
	fl.dmu.Lock()
	fl.dirty[l] = struct{}{}
	fl.dmu.Unlock()
	select {
	case fl.kick <- struct{}{}:
	default:
	}
}

// syncRecord says whether rec is fdatasync'ed before Record returns: in
// SyncFsync mode the records needsSync names, in SyncWrite mode none.
func (j *Journal) syncRecord(rec Record) bool {
	return j.fl == nil && needsSync(rec)
}

// Flush makes durable, now, every blob and session log written without an
// fsync (SyncWrite): the blobs first (fsync of each new copied blob, then
// of the directories that gained a name), then the logs (fdatasync), so a
// record the flush makes durable has its blob durable too, or, for a blob
// linked from a doomed inode, named, its bytes as durable as the file's
// own were (docs/DESIGN.md#journal-link-durable). It is what the
// flusher runs; Close runs it once more. Safe for concurrent use (flushes
// are serialised); a no-op in SyncFsync mode. The error is the first
// fsync or fdatasync error; the flush goes on past it.
func (j *Journal) Flush() error {
	fl := j.fl
	if fl == nil {
		return nil
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	err := j.blobs.flushPending()
	fl.dmu.Lock()
	logs := fl.dirty
	fl.dirty = map[*sessionLog]struct{}{}
	fl.dmu.Unlock()
	for l := range logs {
		if e := l.datasync(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// datasync fdatasyncs the log's file; safe while a writer appends, and
// against a concurrent close: a log closed meanwhile (GC removed it, or
// the journal closed it after its own flush) is no failure.
func (l *sessionLog) datasync() error {
	if l.closed.Load() {
		return nil
	}
	rc, err := l.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		if l.closed.Load() {
			return nil
		}
		return err
	}
	return serr
}

// deferredSync is the blob store's list of what SyncWrite left unsynced:
// blob files renamed into place and directories that gained a name.
type deferredSync struct {
	mu    sync.Mutex
	files []string
	dirs  map[string]struct{}
}

func (d *deferredSync) add(file string, dirs ...string) {
	d.mu.Lock()
	if file != "" {
		d.files = append(d.files, file)
	}
	if d.dirs == nil {
		d.dirs = map[string]struct{}{}
	}
	for _, dir := range dirs {
		d.dirs[dir] = struct{}{}
	}
	d.mu.Unlock()
}

func (d *deferredSync) take() ([]string, map[string]struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ds := d.files, d.dirs
	d.files, d.dirs = nil, nil
	return f, ds
}

// flushPending fsyncs the blobs copied since the last flush, then the
// directories that gained a name (a linked blob's too: its bytes are the
// kernel's to write back, docs/DESIGN.md#journal-link-durable). A blob removed meanwhile (GC) is
// skipped. The blobs go in batches of flushBatch (syncBlobs), so that
// their writeback is started together and each fsync waits for less
// (docs/DESIGN.md#journal-flush-batch).
func (b *Blobs) flushPending() error {
	files, dirs := b.deferred.take()
	var first error
	keep := func(err error) {
		if err != nil && !os.IsNotExist(err) && first == nil {
			first = err
		}
	}
	for len(files) > 0 {
		n := min(len(files), flushBatch)
		syncBlobs(files[:n], keep)
		files = files[n:]
	}
	for d := range dirs {
		keep(fsyncPath(d))
	}
	return first
}

// flushBatch is how many blobs one syncBlobs call holds open (descriptors).
const flushBatch = 256

// syncBlobs makes the blob files at paths durable: it opens each
// (read-only, not following a symlink), starts the writeback of all of
// them (sync_file_range(2) SYNC_FILE_RANGE_WRITE, a hint: its errors are
// ignored), then fsyncs each and closes it. Each failure (open or fsync,
// as an *os.PathError; a missing path satisfies os.IsNotExist) is passed
// to keep.
func syncBlobs(paths []string, keep func(error)) {
	fds := make([]int, len(paths))
	for i, p := range paths {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			keep(&os.PathError{Op: "open", Path: p, Err: err})
			fd = -1
		} else {
			_ = unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		}
		fds[i] = fd
	}
	for i, fd := range fds {
		if fd < 0 {
			continue
		}
		if err := fsyncFd(fd); err != nil {
			keep(&os.PathError{Op: "fsync", Path: paths[i], Err: err})
		}
		unix.Close(fd)
	}
}

// fsyncFd fsyncs fd, again after EINTR.
func fsyncFd(fd int) error {
	for {
		if err := unix.Fsync(fd); err != unix.EINTR {
			return err
		}
	}
}

// fsyncPath opens path read-only and fsyncs it (a file's data, a
// directory's names) with three system calls: no *os.File, so no fstat
// and no poller registration per blob (docs/DESIGN.md#journal-link-named).
// A missing path is an error satisfying os.IsNotExist.
func fsyncPath(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	err = fsyncFd(fd)
	unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "fsync", Path: path, Err: err}
	}
	return nil
}
