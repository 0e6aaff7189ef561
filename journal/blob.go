package journal

// The blob store: the bytes of pre-images, content-addressed by xxh3-128,
// written durably and never half-written (docs/DESIGN.md#journal-store).

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// DefaultMaxBlobSize is the largest file (bytes) whose pre-image is stored
// when Options.MaxBlobSize is zero: 64 MiB.
const DefaultMaxBlobSize = 64 << 20

// UnrecoverableTooLarge is the marker a pre-image carries instead of a blob
// address when the file was larger than the size limit: its bytes were not
// stored and a rewind cannot bring them back.
const UnrecoverableTooLarge = "unrecoverable: too large"

// CopyMode selects how PutFromFd copies a file's bytes into the store.
type CopyMode int

const (
	// CopyAuto tries a reflink (FICLONE), then copy_file_range(2), then a
	// plain read and write, falling back on any error of the faster way.
	CopyAuto CopyMode = iota
	// CopyRange skips the reflink: copy_file_range(2), else a plain copy.
	CopyRange
	// CopyPlain only reads and writes (pread(2) and write(2)).
	CopyPlain
)

// Method names how one blob's bytes were copied: "clone", "range", "plain",
// or "dedup" when an identical blob was already stored (its copy discarded).
type Method string

// The copy methods PutFromFd reports.
const (
	MethodClone Method = "clone"
	MethodRange Method = "range"
	MethodPlain Method = "plain"
)

// Blob is the result of storing one file's bytes: its address (32 hex digits
// of xxh3-128 of the bytes stored), or Unrecoverable set to
// UnrecoverableTooLarge and Addr empty when the file was over the limit.
// Size is the byte count stored (or seen, when too large). Dedup reports
// that the address was already in the store and nothing new was kept.
type Blob struct {
	Addr          string
	Unrecoverable string
	Size          int64
	Method        Method
	Dedup         bool
}

// Blobs is the content-addressed store under DIR (STATE/journal/blobs): a
// blob with address A lives at DIR/A[:2]/A[2:]. Safe for concurrent use: a
// blob is written to its own temporary file and renamed into place, so two
// writers of the same bytes race only to a rename of identical content.
type Blobs struct {
	dir   string
	limit int64
	mode  CopyMode
	// clones, ranges and plains count blobs copied by each method (tests
	// and metrics).
	clones, ranges, plains atomic.Int64
}

// NewBlobs returns the store under dir, creating dir and dir/tmp (0700).
// limit is the largest file stored, in bytes (0: DefaultMaxBlobSize).
func NewBlobs(dir string, limit int64, mode CopyMode) (*Blobs, error) {
	if limit <= 0 {
		limit = DefaultMaxBlobSize
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	return &Blobs{dir: dir, limit: limit, mode: mode}, nil
}

// Path is where the blob with address addr is (or would be) stored.
func (b *Blobs) Path(addr string) string {
	return filepath.Join(b.dir, addr[:2], addr[2:])
}

// Open opens the stored blob addr for reading; the error wraps
// os.ErrNotExist when it is not stored.
func (b *Blobs) Open(addr string) (*os.File, error) {
	if !validAddr(addr) {
		return nil, fmt.Errorf("journal: bad blob address %q", addr)
	}
	return os.Open(b.Path(addr))
}

func validAddr(a string) bool {
	if len(a) != 32 {
		return false
	}
	_, err := hex.DecodeString(a)
	return err == nil
}

// PutFromFd stores the bytes of the open file fd (from offset 0; fd's own
// offset is not moved), whose size the caller stat'ed as size bytes. A
// file over the limit (by size, or by the bytes found while copying) is not
// stored: the Blob carries UnrecoverableTooLarge. Otherwise the bytes go to
// a temporary file (reflink, copy_file_range or plain copy, by the store's
// CopyMode), are hashed from that copy, fsync'ed, renamed to their address
// and the directory fsync'ed, so a returned address is durable and its
// blob complete. An address already stored is kept and the copy discarded.
// Errors are those of the copy, fsync or rename (ENOSPC, EIO, ...).
func (b *Blobs) PutFromFd(fd int, size int64) (Blob, error) {
	if size > b.limit {
		return Blob{Unrecoverable: UnrecoverableTooLarge, Size: size}, nil
	}
	tmp, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "blob-")
	if err != nil {
		return Blob{}, err
	}
	keep := false
	defer func() {
		if !keep {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	method, n, err := b.copyInto(int(tmp.Fd()), fd)
	if err != nil {
		return Blob{}, err
	}
	if n > b.limit {
		return Blob{Unrecoverable: UnrecoverableTooLarge, Size: n}, nil
	}
	h := xxh3.New()
	if _, err := io.Copy(h, io.NewSectionReader(tmp, 0, n)); err != nil {
		return Blob{}, err
	}
	sum := h.Sum128().Bytes()
	addr := hex.EncodeToString(sum[:])
	out := Blob{Addr: addr, Size: n, Method: method}
	final := b.Path(addr)
	if _, err := os.Lstat(final); err == nil {
		// Another writer may have renamed it in and not yet fsync'ed the
		// directory: sync it here too, so the address returned is durable.
		out.Dedup = true
		if err := syncDir(filepath.Dir(final)); err != nil {
			return Blob{}, err
		}
		return out, nil
	}
	if err := tmp.Sync(); err != nil {
		return Blob{}, err
	}
	if err := tmp.Close(); err != nil {
		return Blob{}, err
	}
	keep = true
	sub := filepath.Dir(final)
	if err := os.Mkdir(sub, 0o700); err == nil {
		if err := syncDir(b.dir); err != nil {
			os.Remove(tmp.Name())
			return Blob{}, err
		}
	} else if !errors.Is(err, os.ErrExist) {
		os.Remove(tmp.Name())
		return Blob{}, err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		os.Remove(tmp.Name())
		return Blob{}, err
	}
	if err := syncDir(sub); err != nil {
		return Blob{}, err
	}
	switch method {
	case MethodClone:
		b.clones.Add(1)
	case MethodRange:
		b.ranges.Add(1)
	default:
		b.plains.Add(1)
	}
	return out, nil
}

// copyInto copies all of src into the empty file dst by the store's mode,
// falling back to the next method when one fails before writing anything
// it cannot undo. It returns the method used and the bytes copied.
func (b *Blobs) copyInto(dst, src int) (Method, int64, error) {
	if b.mode == CopyAuto {
		if err := unix.IoctlFileClone(dst, src); err == nil {
			var st unix.Stat_t
			if err := unix.Fstat(dst, &st); err != nil {
				return "", 0, err
			}
			return MethodClone, st.Size, nil
		}
	}
	if b.mode != CopyPlain {
		n, err := copyRange(dst, src, b.limit)
		if err == nil {
			return MethodRange, n, nil
		}
		if err := unix.Ftruncate(dst, 0); err != nil {
			return "", 0, err
		}
	}
	n, err := copyPlain(dst, src, b.limit)
	return MethodPlain, n, err
}

// copyRange copies src into dst with copy_file_range(2) until EOF or past
// limit bytes (then it stops: the caller sees n > limit).
func copyRange(dst, src int, limit int64) (int64, error) {
	var roff, woff int64
	for {
		k, err := unix.CopyFileRange(src, &roff, dst, &woff, 1<<30, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if k == 0 || roff > limit {
			return roff, nil
		}
	}
}

// copyPlain copies src into dst with pread and write until EOF or past
// limit bytes.
func copyPlain(dst, src int, limit int64) (int64, error) {
	buf := make([]byte, 1<<20)
	var off int64
	for {
		k, err := unix.Pread(src, buf, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if k == 0 {
			return off, nil
		}
		if err := writeAll(dst, buf[:k]); err != nil {
			return 0, err
		}
		off += int64(k)
		if off > limit {
			return off, nil
		}
	}
}

func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		k, err := unix.Write(fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		p = p[k:]
	}
	return nil
}

// syncDir fsyncs a directory, making the names created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
