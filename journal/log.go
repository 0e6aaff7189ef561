package journal

// The session log: one append-only JSON-lines file per session, each
// record durable before Append returns (docs/DESIGN.md#journal-store).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// Kinds of a pre-image.
const (
	KindAbsent  = "absent"
	KindFile    = "file"
	KindDir     = "dir"
	KindSymlink = "symlink"
)

// OpCheckpoint is the Op of a checkpoint record.
const OpCheckpoint = "checkpoint"

// PreImage is the state of one path before the first change of it in a
// checkpoint interval. Kind is one of KindAbsent, KindFile, KindDir,
// KindSymlink. Mode is the full st_mode (type and permission bits) for a
// file or directory. A file has Size (bytes) and either Blob (the address
// in the blob store) or Unrecoverable (UnrecoverableTooLarge). A symlink
// has Target.
//
// In the log a path is written as PID, an id of the log's path table
// (docs/DESIGN.md#journal-paths), and Path is empty; reading resolves it
// back into Path and zeroes PID. A log line of the older format, with
// Path and no PID, reads the same.
type PreImage struct {
	Path          string `json:"path,omitempty"`
	PID           uint64 `json:"pid,omitempty"`
	Kind          string `json:"kind"`
	Mode          uint32 `json:"mode,omitempty"`
	Size          int64  `json:"size,omitempty"`
	Blob          string `json:"blob,omitempty"`
	Unrecoverable string `json:"unrecoverable,omitempty"`
	Target        string `json:"target,omitempty"`
	// TargetX is, in the log only, a symlink target that is not valid
	// UTF-8, in hex (Target then holds it with each bad byte as U+FFFD);
	// every reader of this package puts it back into Target
	// (docs/DESIGN.md#journal-paths).
	TargetX string `json:"target_x,omitempty"`
	// Uid and Gid are the owner and group the name had (nil in records
	// written before they were kept): a rewind gives them back
	// (docs/DESIGN.md#as-caller).
	Uid *uint32 `json:"uid,omitempty"`
	Gid *uint32 `json:"gid,omitempty"`
	// Rdev is a device node's device number (st_rdev), given back by the
	// mknod that restores it; 0 for anything else, and in records written
	// before it was kept.
	Rdev uint64 `json:"rdev,omitempty"`
}

// Record is one line of a session log. Seq numbers the records of a
// session from 1, without gaps. A change has Op (create, write, truncate,
// unlink, rename, exchange, mkdir, rmdir, chmod, symlink, link, or any
// other name the caller uses), Path, Path2 for the second name (a rename's
// target, an exchange's other name, a link's new name), and Pre: the
// pre-images of the names it touches whose first change in the interval it
// is. A checkpoint record has Op OpCheckpoint, ID and Label.
//
// In the log, Path and Path2 are written as PID and PID2, ids of the log's
// path table, and Defs defines the ids the line is the first to use
// (docs/DESIGN.md#journal-paths); every reader of this package resolves
// them back into the path strings and zeroes PID, PID2 and Defs.
type Record struct {
	Seq   uint64     `json:"seq"`
	Time  time.Time  `json:"time"`
	Op    string     `json:"op"`
	Defs  []PathDef  `json:"defs,omitempty"`
	Path  string     `json:"path,omitempty"`
	PID   uint64     `json:"pid,omitempty"`
	Path2 string     `json:"path2,omitempty"`
	PID2  uint64     `json:"pid2,omitempty"`
	Pre   []PreImage `json:"pre,omitempty"`
	ID    string     `json:"id,omitempty"`
	Label string     `json:"label,omitempty"`
	// Owner is, on the first record of a log, the uid of its session
	// (Options.OwnerOf; nil when that was not known, and in logs written
	// before logs named it): GC counts the log in that uid's share, and
	// the name stays that uid's, even once the session registry has
	// forgotten the session (docs/DESIGN.md#journal-share,
	// docs/DESIGN.md#session-names).
	Owner *uint32 `json:"owner,omitempty"`
	// Ref and After are an after-note's (Op OpAfter): the Seq of the
	// change it follows (0 for a handle's close) and the states it left.
	Ref   uint64  `json:"ref,omitempty"`
	After []After `json:"after,omitempty"`
	// Failed is set by Journal.Records on a change record that a later
	// failure note (OpFailed) names: its backing operation failed. It is
	// never written.
	Failed bool `json:"-"`
}

// ReadLog reads the session log at path: every complete line, in order,
// and the length in bytes of the complete prefix. A last line without its
// newline, or one that does not parse as JSON, is a torn append (a crash
// mid-write) and is ignored; so is everything from a line starting with a
// NUL byte (an unsynced tail whose pages never reached the disk,
// docs/DESIGN.md#journal-rewind). A line that does not parse before the
// last is an error. A missing file is an empty log. It holds every record
// in memory; ScanLog streams.
func ReadLog(path string) ([]Record, int64, error) {
	var out []Record
	good, err := ScanLog(path, func(r Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, good, nil
}

// ScanLog reads the session log at path as ReadLog does, but passes each
// record to fn, in order, as it is read, with its paths resolved
// (docs/DESIGN.md#journal-paths), and holds only one line and the log's
// path table in memory. It returns the length of the complete prefix. An
// error of fn stops the scan and is returned; so is a bad line before
// the last (after fn has seen the records before it).
func ScanLog(path string, fn func(Record) error) (int64, error) {
	good, _, err := scanFile(path, func(r *Record, _ *pathTable) error { return fn(*r) })
	return good, err
}

// scanFile is ScanLog passing the reader's path table along (ids of
// the log's own, or interned by the caller); it returns the table too.
func scanFile(path string, fn func(*Record, *pathTable) error) (int64, *pathTable, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, newPathTable(), nil
	}
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	return scanRecords(f, fn, false)
}

// scanRaw is scanFile without resolving: fn sees each line's ids (PID,
// PID2, the pre-images' and after-states' PID; Path set only by a line
// of the older format), for a reader that keys by id and builds a path
// only when it prints one (docs/DESIGN.md#journal-paths).
func scanRaw(path string, fn func(*Record, *pathTable) error) (*pathTable, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return newPathTable(), nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, tab, err := scanRecords(f, fn, true)
	return tab, err
}

// errStop is returned by a scan callback to end the scan early.
var errStop = errors.New("journal: scan stopped")

func scanRecords(r io.Reader, fn func(*Record, *pathTable) error, raw bool) (int64, *pathTable, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	tab := newPathTable()
	var good int64
	var pendingErr error
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[0] == 0 {
			// A page of an unsynced tail that never reached the disk
			// reads back as NULs: everything from here is that tail.
			return good, tab, nil
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if pendingErr != nil {
				return 0, nil, pendingErr
			}
			var rec Record
			jerr := json.Unmarshal(bytes.TrimSpace(line), &rec)
			if jerr == nil && raw {
				jerr = tab.defineRaw(&rec)
			} else if jerr == nil {
				jerr = tab.resolve(&rec)
			}
			if jerr != nil {
				// Torn only if it is the last line: decided at the next line.
				pendingErr = fmt.Errorf("journal: record after byte %d: %w", good, jerr)
			} else {
				if ferr := fn(&rec, tab); ferr != nil {
					return good, tab, ferr
				}
				good += int64(len(line))
			}
		}
		if err == io.EOF {
			return good, tab, nil
		}
		if err != nil {
			return 0, nil, err
		}
	}
}

// sessionLog is the open log of one session; its owner holds the session
// mutex around every call.
type sessionLog struct {
	f    *os.File
	size int64
	// tab is the log's path table: the ids its lines define, and the
	// paths interned since that are written with their next use.
	tab *pathTable
	// grew, when set, is told the bytes each append added (the budget).
	grew func(int64)
	// closed is set before f is closed, so the flusher, which may hold
	// the log after its owner closed it, takes a failure for that.
	closed atomic.Bool
	// buf is the line write encodes into, kept between writes (they are
	// serialised by the log's owner) unless a line made it larger than
	// maxKeptLine bytes.
	buf []byte
}

// maxKeptLine bounds, in bytes, the line buffer a log keeps between
// writes: a record with many pre-images or path definitions gets a buffer
// of its own.
const maxKeptLine = 64 << 10

// openLog opens (creating) the log at path, passes its complete records
// to fn (nil: none), and truncates a torn tail away (fsync'ed) so the
// next append starts on a line boundary.
func openLog(path string, fn func(*Record, *pathTable) error) (*sessionLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		fn = func(*Record, *pathTable) error { return nil }
	}
	good, tab, err := scanRecords(f, fn, false)
	if err != nil {
		f.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Size() != good {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &sessionLog{f: f, size: good, tab: tab}, nil
}

// append writes rec as one line at the end and fdatasyncs it. On a failed
// write the file is cut back to its previous length, so no torn line stays
// behind a later record.
func (l *sessionLog) append(rec Record) error { return l.write(rec, true) }

// write appends rec as one line, fdatasync'ed when sync is set (see
// docs/DESIGN.md#journal-rewind for which records skip it), its paths
// written as ids of the log's path table (docs/DESIGN.md#journal-paths).
func (l *sessionLog) write(rec Record, sync bool) error {
	wire, defs := l.tab.encode(rec)
	b, err := appendRecord(l.buf[:0], &wire)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if cap(b) <= maxKeptLine {
		l.buf = b
	} else {
		l.buf = nil
	}
	if _, err := l.f.WriteAt(b, l.size); err != nil {
		l.f.Truncate(l.size)
		return err
	}
	if sync {
		if err := fdatasync(l.f); err != nil {
			l.f.Truncate(l.size)
			return err
		}
	}
	l.tab.markWritten(defs)
	l.size += int64(len(b))
	if l.grew != nil {
		l.grew(int64(len(b)))
	}
	return nil
}

func (l *sessionLog) close() error {
	l.closed.Store(true)
	return l.f.Close()
}
