package journal

// The session log: one append-only JSON-lines file per session, each
// record durable before Append returns (docs/DESIGN.md#journal-store).

import (
	"bufio"
	"bytes"
	"encoding/json"
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
type PreImage struct {
	Path          string `json:"path"`
	Kind          string `json:"kind"`
	Mode          uint32 `json:"mode,omitempty"`
	Size          int64  `json:"size,omitempty"`
	Blob          string `json:"blob,omitempty"`
	Unrecoverable string `json:"unrecoverable,omitempty"`
	Target        string `json:"target,omitempty"`
	// Uid and Gid are the owner and group the name had (nil in records
	// written before they were kept): a rewind gives them back
	// (docs/DESIGN.md#as-caller).
	Uid *uint32 `json:"uid,omitempty"`
	Gid *uint32 `json:"gid,omitempty"`
}

// Record is one line of a session log. Seq numbers the records of a
// session from 1, without gaps. A change has Op (create, write, truncate,
// unlink, rename, exchange, mkdir, rmdir, chmod, symlink, link, or any
// other name the caller uses), Path, Path2 for the second name (a rename's
// target, an exchange's other name, a link's new name), and Pre: the
// pre-images of the names it touches whose first change in the interval it
// is. A checkpoint record has Op OpCheckpoint, ID and Label.
type Record struct {
	Seq   uint64     `json:"seq"`
	Time  time.Time  `json:"time"`
	Op    string     `json:"op"`
	Path  string     `json:"path,omitempty"`
	Path2 string     `json:"path2,omitempty"`
	Pre   []PreImage `json:"pre,omitempty"`
	ID    string     `json:"id,omitempty"`
	Label string     `json:"label,omitempty"`
	// Ref and After are an after-note's (Op OpAfter): the Seq of the
	// change it follows (0 for a handle's close) and the states it left.
	Ref   uint64  `json:"ref,omitempty"`
	After []After `json:"after,omitempty"`
}

// ReadLog reads the session log at path: every complete line, in order,
// and the length in bytes of the complete prefix. A last line without its
// newline, or one that does not parse as JSON, is a torn append (a crash
// mid-write) and is ignored; so is everything from a line starting with a
// NUL byte (an unsynced tail whose pages never reached the disk,
// docs/DESIGN.md#journal-rewind). A line that does not parse before the
// last is an error. A missing file is an empty log.
func ReadLog(path string) ([]Record, int64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return readRecords(f)
}

func readRecords(r io.Reader) ([]Record, int64, error) {
	br := bufio.NewReader(r)
	var out []Record
	var good int64
	var pendingErr error
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[0] == 0 {
			// A page of an unsynced tail that never reached the disk
			// reads back as NULs: everything from here is that tail.
			return out, good, nil
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if pendingErr != nil {
				return nil, 0, pendingErr
			}
			var rec Record
			if jerr := json.Unmarshal(bytes.TrimSpace(line), &rec); jerr != nil {
				// Torn only if it is the last line: decided at the next line.
				pendingErr = fmt.Errorf("journal: record after byte %d: %w", good, jerr)
			} else {
				out = append(out, rec)
				good += int64(len(line))
			}
		}
		if err == io.EOF {
			return out, good, nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

// sessionLog is the open log of one session; its owner holds the session
// mutex around every call.
type sessionLog struct {
	f    *os.File
	size int64
	// closed is set before f is closed, so the flusher, which may hold
	// the log after its owner closed it, takes a failure for that.
	closed atomic.Bool
}

// openLog opens (creating) the log at path, reads its complete records, and
// truncates a torn tail away (fsync'ed) so the next append starts on a line
// boundary.
func openLog(path string) (*sessionLog, []Record, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	recs, good, err := readRecords(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.Size() != good {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return &sessionLog{f: f, size: good}, recs, nil
}

// append writes rec as one line at the end and fdatasyncs it. On a failed
// write the file is cut back to its previous length, so no torn line stays
// behind a later record.
func (l *sessionLog) append(rec Record) error { return l.write(rec, true) }

// write appends rec as one line, fdatasync'ed when sync is set (see
// docs/DESIGN.md#journal-rewind for which records skip it).
func (l *sessionLog) write(rec Record, sync bool) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	b = append(b, '\n')
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
	l.size += int64(len(b))
	return nil
}

func (l *sessionLog) close() error {
	l.closed.Store(true)
	return l.f.Close()
}
