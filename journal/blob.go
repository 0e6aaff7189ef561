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

// UnrecoverableOverBudget is the marker a pre-image carries instead of a
// blob address when storing its bytes would have pushed the store past its
// budget (Options.Budget): the mutation goes on, a rewind reports the path.
const UnrecoverableOverBudget = "unrecoverable: over budget"

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
// UnrecoverableTooLarge and Addr empty when the file was over the limit
// (UnrecoverableOverBudget when the store's budget had no room for it).
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
	// budget is the most bytes of blobs kept (0: no bound); used is the
	// running total of the stored blobs' sizes (temporary copies
	// excluded), set by one walk at NewBlobs and kept by PutFromFd and
	// Remove.
	budget atomic.Int64
	used   atomic.Int64
	// others, when set, is the rest of the journal that counts against
	// the budget (the session logs' bytes: docs/DESIGN.md#journal-budget).
	others func() int64
	// clones, ranges and plains count blobs copied by each method (tests
	// and metrics).
	clones, ranges, plains atomic.Int64
	// deferSync (SyncWrite) leaves a new blob's fsync and its directory's
	// to the journal's flusher, listed in deferred
	// (docs/DESIGN.md#journal-sync).
	deferSync bool
	deferred  deferredSync
	// subs marks the fan-out directories (xx/, by their first byte) known
	// to exist, so a new blob costs no mkdir(2) once its directory is made.
	subs [256]atomic.Bool
	linkState
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
	b := &Blobs{dir: dir, limit: limit, mode: mode}
	var used int64
	err := b.Walk(func(_ string, size int64) error {
		used += size
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.used.Store(used)
	return b, nil
}

// BlobsAt returns the blob store under dir (STATE/journal/blobs) for a
// reader outside the daemon that owns it (the CLI restoring pre-images
// into a branch's base layer: docs/DESIGN.md#branch-from): Open, Path and
// Check work, read with the caller's own credentials. It creates nothing
// and does not walk the store (Used is 0); it must not be written to
// (PutFromFd, PutFile, Remove): the daemon's store is the one that
// counts. Safe for concurrent use.
func BlobsAt(dir string) *Blobs { return &Blobs{dir: dir, limit: DefaultMaxBlobSize} }

// SetBudget bounds the store to budget bytes of blobs (0: no bound). A
// blob that would take the store past it is not stored: PutFromFd returns
// UnrecoverableOverBudget. Safe to call at any time.
func (b *Blobs) SetBudget(budget int64) { b.budget.Store(budget) }

// Used is the running total of the stored blobs' sizes in bytes
// (temporary copies not counted).
func (b *Blobs) Used() int64 { return b.used.Load() }

// reserve adds n bytes to the running total, and to sh's (nil: no
// share), unless that passes the budget or sh's limit; it reports
// whether it did (docs/DESIGN.md#journal-share).
func (b *Blobs) reserve(n int64, sh *Share) bool {
	if !sh.take(n) {
		return false
	}
	for {
		budget, used := b.budget.Load(), b.used.Load()
		if budget > 0 && (used+n > budget || b.others != nil && used+n+b.others() > budget) {
			sh.give(n)
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// unreserve gives back a reserve of n bytes (and sh's) for a blob that
// was not stored after all.
func (b *Blobs) unreserve(n int64, sh *Share) {
	b.used.Add(-n)
	sh.give(n)
}

// Walk calls fn with the address and size (bytes) of every stored blob
// (the tmp directory skipped), in directory order.
func (b *Blobs) Walk(fn func(addr string, size int64) error) error {
	subs, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	for _, sd := range subs {
		if !sd.IsDir() || len(sd.Name()) != 2 {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(b.dir, sd.Name()))
		if err != nil {
			return err
		}
		for _, e := range ents {
			addr := sd.Name() + e.Name()
			if !e.Type().IsRegular() || !validAddr(addr) {
				continue
			}
			info, err := e.Info()
			if err != nil {
				if os.IsNotExist(err) {
					continue
				}
				return err
			}
			if err := fn(addr, info.Size()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove deletes the blob addr and takes its size off the running total
// (GC, which makes sure no log names it); a missing blob is no error.
func (b *Blobs) Remove(addr string) (int64, error) {
	if !validAddr(addr) {
		return 0, fmt.Errorf("journal: bad blob address %q", addr)
	}
	p := b.Path(addr)
	st, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := os.Remove(p); err != nil {
		return 0, err
	}
	b.used.Add(-st.Size())
	return st.Size(), nil
}

// Path is where the blob with address addr is (or would be) stored.
func (b *Blobs) Path(addr string) string { return BlobPath(b.dir, addr) }

// BlobPath is where the blob with address addr (32 hex digits) is stored
// in the blob store at dir (STATE/journal/blobs): dir/A[:2]/A[2:]. It lets
// a reader that does not own the journal (a branch merge reading a branch
// daemon's pre-images) find a blob without opening the store.
func BlobPath(dir, addr string) string { return filepath.Join(dir, addr[:2], addr[2:]) }

// Open opens the stored blob addr for reading; the error wraps
// os.ErrNotExist when it is not stored.
func (b *Blobs) Open(addr string) (*os.File, error) {
	if !validAddr(addr) {
		return nil, fmt.Errorf("journal: bad blob address %q", addr)
	}
	return os.Open(b.Path(addr))
}

// UnrecoverableLost is the marker a rewind or diff gives a pre-image whose
// blob is missing, shorter or longer than the record says, or no longer
// hashes to its address: an OS crash before the flusher made it durable
// (docs/DESIGN.md#journal-sync), or damage to the store. Its bytes cannot
// be restored; the path is reported, never restored wrongly.
const UnrecoverableLost = "unrecoverable: blob lost"

// Check reports whether the blob addr is stored complete: size bytes
// whose xxh3-128 is addr. It reads the whole blob. The error wraps
// os.ErrNotExist when it is missing; a short, long or altered blob is an
// error too.
func (b *Blobs) Check(addr string, size int64) error {
	f, err := b.Open(addr)
	if err != nil {
		return err
	}
	defer f.Close()
	h := xxh3.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("journal: blob %s has %d bytes, the record says %d", addr, n, size)
	}
	sum := h.Sum128().Bytes()
	if got := hex.EncodeToString(sum[:]); got != addr {
		return fmt.Errorf("journal: blob %s hashes to %s", addr, got)
	}
	return nil
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
// stored: the Blob carries UnrecoverableTooLarge; one whose bytes are new to
// the store and would take it past its budget carries
// UnrecoverableOverBudget (an address already stored costs nothing and is
// returned). Otherwise the bytes go to
// a temporary file (reflink, copy_file_range or plain copy, by the store's
// CopyMode), are hashed from that copy, fsync'ed, renamed to their address
// and the directory fsync'ed, so a returned address is durable and its
// blob complete; in SyncWrite mode the two fsyncs are left to the
// journal's flusher (docs/DESIGN.md#journal-sync), so a returned blob is
// complete in the page cache and durable within the flush interval. An
// address already stored is kept and the copy discarded.
// Errors are those of the copy, fsync or rename (ENOSPC, EIO, ...).
func (b *Blobs) PutFromFd(fd int, size int64) (Blob, error) { return b.putFromFd(fd, size, nil) }

// putFromFd is PutFromFd charging a new blob's bytes to sh too (nil: no
// share): docs/DESIGN.md#journal-share.
func (b *Blobs) putFromFd(fd int, size int64, sh *Share) (Blob, error) {
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
	addr := hexAddr(sum)
	out := Blob{Addr: addr, Size: n, Method: method}
	final := b.Path(addr)
	if _, err := os.Lstat(final); err == nil {
		out.Dedup = true
		if err := b.syncDedup(final); err != nil {
			return Blob{}, err
		}
		return out, nil
	}
	if !b.reserve(n, sh) {
		return Blob{Unrecoverable: UnrecoverableOverBudget, Size: n}, nil
	}
	reserved := true
	defer func() {
		if reserved {
			b.unreserve(n, sh)
		}
	}()
	if !b.deferSync {
		if err := tmp.Sync(); err != nil {
			return Blob{}, err
		}
	}
	if err := tmp.Close(); err != nil {
		return Blob{}, err
	}
	keep = true
	sub := filepath.Dir(final)
	if err := b.placeAt(func() error { return os.Rename(tmp.Name(), final) }, sub, sum[0]); err != nil {
		os.Remove(tmp.Name())
		return Blob{}, err
	}
	reserved = false // the blob is in place: its size stays counted
	if b.deferSync {
		b.deferred.add(final, sub)
	} else if err := syncDir(sub); err != nil {
		return Blob{}, err
	}
	b.count(method)
	return out, nil
}

// count counts one blob stored by method.
func (b *Blobs) count(method Method) {
	switch method {
	case MethodClone:
		b.clones.Add(1)
	case MethodRange:
		b.ranges.Add(1)
	case MethodLink:
		b.links.Add(1)
	default:
		b.plains.Add(1)
	}
}

func hexAddr(sum [16]byte) string { return hex.EncodeToString(sum[:]) }

// syncDedup makes durable the blob final another writer stored: it may
// have renamed it in and not yet fsync'ed the directory, so the directory
// is synced here too (SyncWrite: that writer listed it for the flusher).
func (b *Blobs) syncDedup(final string) error {
	if b.deferSync {
		return nil
	}
	return syncDir(filepath.Dir(final))
}

// makeSub makes the fan-out directory sub (of blobs whose address starts
// with the byte first) unless it is known to exist, and makes its name
// durable (fsync of the store's directory; SyncWrite leaves that to the
// flusher). A directory GC or a person removed is made again: the rename
// into it fails with ENOENT and the caller's next blob retries.
func (b *Blobs) makeSub(sub string, first byte) error {
	if b.subs[first].Load() {
		return nil
	}
	err := os.Mkdir(sub, 0o700)
	switch {
	case err == nil && b.deferSync:
		b.deferred.add("", b.dir)
	case err == nil:
		if err := syncDir(b.dir); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrExist):
		return err
	}
	b.subs[first].Store(true)
	return nil
}

// placeAt runs place (the rename or link that names a blob in sub) after
// makeSub; when place finds no sub (removed since makeSub learned it
// exists) it forgets it and tries once more.
func (b *Blobs) placeAt(place func() error, sub string, first byte) error {
	if err := b.makeSub(sub, first); err != nil {
		return err
	}
	err := place()
	if errors.Is(err, os.ErrNotExist) {
		b.subs[first].Store(false)
		if err := b.makeSub(sub, first); err != nil {
			return err
		}
		err = place()
	}
	return err
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

// syncDir fsyncs a directory, making the names created in it durable (or
// a file, its data).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
