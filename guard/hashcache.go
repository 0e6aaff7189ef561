package guard

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// FileID is a file identity on the backing filesystem: (device, inode). Hard
// links share it, and a symlink resolves to its target's, so every alias of a
// file shares one read record: a read through one name covers a write through
// another (docs/DESIGN.md#file-identity).
type FileID struct {
	Dev uint64 // st_dev of the backing file
	Ino uint64 // st_ino of the backing file
}

// Stat is the part of stat(2) the guard uses: the identity and the fields of
// the hash-cache key.
type Stat struct {
	ID      FileID
	Size    int64  // bytes
	MtimeNs int64  // st_mtim, ns since the epoch
	CtimeNs int64  // st_ctim, ns since the epoch (not settable by users, so a key with it cannot be forged by utimens)
	Mode    uint32 // st_mode (type and permission bits)
	Nlink   uint64 // st_nlink
}

// StatOf converts a stat(2) result.
func StatOf(st *syscall.Stat_t) Stat {
	return Stat{
		ID:      FileID{Dev: uint64(st.Dev), Ino: st.Ino},
		Size:    st.Size,
		MtimeNs: st.Mtim.Nano(),
		CtimeNs: st.Ctim.Nano(),
		Mode:    st.Mode,
		Nlink:   uint64(st.Nlink),
	}
}

// Mtime returns the modification time.
func (s Stat) Mtime() time.Time { return time.Unix(0, s.MtimeNs) }

// Hash is an xxh3-128 content hash. The zero Hash means "not known".
type Hash struct{ Hi, Lo uint64 }

// IsZero reports whether h is the zero (unknown) hash.
func (h Hash) IsZero() bool { return h == Hash{} }

// String returns the canonical 32-digit hex form.
func (h Hash) String() string {
	b := xxh3.Uint128{Hi: h.Hi, Lo: h.Lo}.Bytes()
	return hex.EncodeToString(b[:])
}

// HashBytes hashes b (xxh3-128).
func HashBytes(b []byte) Hash {
	u := xxh3.Hash128(b)
	return Hash{Hi: u.Hi, Lo: u.Lo}
}

// hashKey is the hash cache's key: a stat identity. Any write changes size or
// mtime/ctime; ctime cannot be set back by utimens.
type hashKey struct {
	id               FileID
	size             int64
	mtimeNs, ctimeNs int64
}

func keyOf(s Stat) hashKey {
	return hashKey{id: s.ID, size: s.Size, mtimeNs: s.MtimeNs, ctimeNs: s.CtimeNs}
}

// hashEntry is the one cached hash of a file identity: only the newest stat
// key of a file can ever match again, so older ones are not kept.
type hashEntry struct {
	key      hashKey
	hash     Hash
	hashedAt int64 // ns: when reading the content began
}

// HashCache maps stat identities to content hashes so an unchanged file is not
// read again. It applies git's racy-timestamp rule (git's "racy git" problem,
// Documentation/technical/racy-git.txt): an entry whose file was modified less
// than Granularity before the hash began is not trusted, because a later write
// within the same timestamp tick would leave the key unchanged; such a file is
// rehashed on every lookup until its mtime is safely in the past. A changed byte
// under an unchanged mtime is therefore caught, while touch and byte-identical
// rewrites still hash the same.
//
// Concurrency: safe for concurrent use. Hashing happens outside the lock.
type HashCache struct {
	// Granularity is the backing filesystem's timestamp granularity as seen
	// by the racy rule (ns resolution on ext4 and tmpfs, but stamped from a
	// coarse clock that ticks every jiffy; seconds on some network and FAT
	// filesystems).
	Granularity time.Duration
	// Max bounds the number of entries; past it half the entries are
	// dropped (they are only a cache).
	Max int
	// NoReuse: lookups never hit, so every Sum reads the file (set before
	// use; Config.UntrustedStat, docs/DESIGN.md#uncached-view).
	NoReuse bool
	// FineCtime: the racy rule is off, since every change after a stat
	// gets a distinct ctime (set before use; Config.FineCtime,
	// docs/DESIGN.md#fine-ctime).
	FineCtime bool
	// MaxBytes bounds what hashing reads: a file larger than MaxBytes
	// bytes is not read, its stat stands for its content
	// (statFingerprint, docs/DESIGN.md#hash-bound); <= 0: no bound.
	MaxBytes int64
	now      func() time.Time

	mu      sync.Mutex
	entries map[FileID]hashEntry

	hits, misses, racy, hashedBytes atomic.Uint64
	// readBackBytes: bytes read to credit an own write (Tracker.NoteWrite
	// without a hash); streamed, streamedBytes: own writes credited from
	// the bytes hashed as they were written (WriteHash), and their size;
	// deferred, deferredLost: reads whose hash was deferred
	// (docs/DESIGN.md#lazy-hash), and those whose hash could not be
	// attributed to the read.
	readBackBytes, streamed, streamedBytes, deferred, deferredLost atomic.Uint64
	// fingerprinted: files over MaxBytes whose stat stood for their bytes.
	fingerprinted atomic.Uint64
}

// NewHashCache returns an empty cache. granularity <= 0 means 1 s; max <= 0
// means 1<<17 entries. now is the clock (nil: time.Now).
func NewHashCache(granularity time.Duration, max int, now func() time.Time) *HashCache {
	if granularity <= 0 {
		granularity = time.Second
	}
	if max <= 0 {
		max = 1 << 17
	}
	if now == nil {
		now = time.Now
	}
	return &HashCache{Granularity: granularity, Max: max, now: now, entries: make(map[FileID]hashEntry)}
}

// newHashCacheFor is the Guard's hash cache for cfg.
func newHashCacheFor(cfg Config) *HashCache {
	c := NewHashCache(cfg.Granularity, cfg.MaxHashes, cfg.Now)
	c.NoReuse = cfg.UntrustedStat
	c.FineCtime = cfg.FineCtime && !cfg.UntrustedStat
	c.MaxBytes = cfg.MaxHashSize
	return c
}

// overBound reports whether st's file is larger than the bytes hashing may
// read (MaxBytes): its stat stands for its content.
func (c *HashCache) overBound(st Stat) bool { return c.MaxBytes > 0 && st.Size > c.MaxBytes }

// statFingerprint is the content hash of a file over the bound
// (docs/DESIGN.md#hash-bound): xxh3-128 of a tag and the file's identity,
// size, mtime and ctime, so any change that moves one of them (every
// write, truncate and attribute change does) changes it. It never reads
// the file.
func statFingerprint(st Stat) Hash {
	var b [len(fingerprintTag) + 40]byte
	n := copy(b[:], fingerprintTag)
	for _, v := range []uint64{st.ID.Dev, st.ID.Ino, uint64(st.Size), uint64(st.MtimeNs), uint64(st.CtimeNs)} {
		binary.LittleEndian.PutUint64(b[n:], v)
		n += 8
	}
	return HashBytes(b[:])
}

// fingerprintTag starts every statFingerprint's input.
const fingerprintTag = "rubinofs stat fingerprint\x00"

// Sum returns the content hash of the file behind open, whose stat the caller
// observed as st. A cache hit (same stat identity, not racy) reads nothing,
// nor does a regular file st says is empty (its hash is that of no bytes;
// not with NoReuse, whose stats are not trusted).
// Otherwise it opens the file, hashes it and caches the result under the stat
// of the open descriptor, only if that stat did not change while hashing.
//
// Errors: those of open, read and fstat, unwrapped (an ENOENT of a file removed
// meanwhile reaches the caller as such).
func (c *HashCache) Sum(st Stat, open func() (*os.File, error)) (Hash, error) {
	h, _, _, err := c.sum(st, open, false)
	return h, err
}

// sumAt is Sum for content that must be the one st describes: match is
// false when the file's stat before or after hashing is not st's key (the
// file was changed, or open reached another file), and the hash then
// describes no content of st. n is the number of bytes read (0 on a hit).
func (c *HashCache) sumAt(st Stat, open func() (*os.File, error)) (h Hash, match bool, err error) {
	h, match, _, err = c.sum(st, open, true)
	return h, match, err
}

// sum is Sum and sumAt; strict stops before reading when the stat before
// hashing is not st's key. n is the number of bytes read.
func (c *HashCache) sum(st Stat, open func() (*os.File, error), strict bool) (h Hash, match bool, n int64, err error) {
	want := keyOf(st)
	if h, ok := c.lookup(want); ok {
		c.hits.Add(1)
		return h, true, 0, nil
	}
	if c.overBound(st) {
		// Reading it could take hours in a request (a sparse file of
		// terabytes): its stat stands for its bytes.
		c.fingerprinted.Add(1)
		return statFingerprint(st), true, 0, nil
	}
	if st.Size == 0 && st.Mode&syscall.S_IFMT == syscall.S_IFREG && !c.NoReuse {
		// An empty regular file's content is known from its stat: no
		// byte can be written without the size growing. Nothing is opened
		// (a FLUSH of a file created empty, a truncated one).
		c.hits.Add(1)
		return emptyHash, true, 0, nil
	}
	c.misses.Add(1)
	f, err := open()
	if err != nil {
		return Hash{}, false, 0, err
	}
	defer f.Close()
	var before, after syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &before); err != nil {
		return Hash{}, false, 0, err
	}
	k := keyOf(StatOf(&before))
	if strict && k != want {
		return Hash{}, false, 0, nil
	}
	started := c.now().UnixNano()
	hs := xxh3.New()
	n, err = copyFile(hs, f)
	if err != nil {
		return Hash{}, false, n, fmt.Errorf("hashing: %w", err)
	}
	c.hashedBytes.Add(uint64(n))
	u := hs.Sum128()
	h = Hash{Hi: u.Hi, Lo: u.Lo}
	if err := syscall.Fstat(int(f.Fd()), &after); err != nil {
		return Hash{}, false, n, err
	}
	stable := k == keyOf(StatOf(&after))
	if stable {
		c.store(hashEntry{key: k, hash: h, hashedAt: started})
	}
	return h, stable && k == want, n, nil
}

// Lookup returns the cached hash of the file st describes when the cache
// has one it trusts (same stat identity, not racy), without reading the
// file; ok is false otherwise. It counts no hit or miss (only a racy
// entry, as every lookup does). Safe for concurrent use.
func (c *HashCache) Lookup(st Stat) (h Hash, ok bool) {
	return c.lookup(keyOf(st))
}

// lookup returns a trusted entry for k.
func (c *HashCache) lookup(k hashKey) (Hash, bool) {
	if c.NoReuse {
		return Hash{}, false
	}
	c.mu.Lock()
	e, ok := c.entries[k.id]
	c.mu.Unlock()
	if !ok || e.key != k {
		return Hash{}, false
	}
	// Racy: the file was modified within one timestamp tick of the moment
	// its content was read, so a later write may share this key; not
	// where every change after the key's stat moves the ctime.
	if !c.FineCtime && (k.mtimeNs+int64(c.Granularity) >= e.hashedAt || k.ctimeNs+int64(c.Granularity) >= e.hashedAt) {
		c.racy.Add(1)
		return Hash{}, false
	}
	return e.hash, true
}

// storeWritten caches h, the hash of the bytes a handle wrote as the
// whole file (WriteHash), as the content of the file whose stat after its
// last write is st, so that the next decision need not read back what the
// session just wrote. Only where FineCtime holds: elsewhere the entry
// would be racy, never trusted. Not for a file over the hash bound (its
// stat stands for its bytes) nor with NoReuse.
func (c *HashCache) storeWritten(st Stat, h Hash) {
	if !c.FineCtime || c.NoReuse || c.overBound(st) {
		return
	}
	c.store(hashEntry{key: keyOf(st), hash: h, hashedAt: c.now().UnixNano()})
}

// carry moves the entry under before's key to after's, for a change of
// the file made under its identity lock that sets only its ctime (the
// session's own rename): only with FineCtime, only when the file's
// identity, size and mtime are before's (a write after before's stat
// would have moved the mtime), and only when the entry is before's.
func (c *HashCache) carry(before, after Stat) {
	if !c.FineCtime || c.NoReuse || before.ID != after.ID || before.Size != after.Size || before.MtimeNs != after.MtimeNs {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[before.ID]; ok && e.key == keyOf(before) {
		e.key = keyOf(after)
		c.entries[before.ID] = e
	}
}

func (c *HashCache) store(e hashEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.Max {
		drop := len(c.entries) / 2
		for old := range c.entries {
			if drop == 0 {
				break
			}
			delete(c.entries, old)
			drop--
		}
	}
	c.entries[e.key.id] = e
}

// Invalidate drops every entry of the file identity id (an external change
// reported by the watcher).
func (c *HashCache) Invalidate(id FileID) {
	c.mu.Lock()
	delete(c.entries, id)
	c.mu.Unlock()
}

// Reset drops every entry (lost watcher events).
func (c *HashCache) Reset() {
	c.mu.Lock()
	c.entries = make(map[FileID]hashEntry)
	c.mu.Unlock()
}

// HashStats are the cache's counters for .rubino/status.
type HashStats struct {
	Hits   uint64 `json:"hits"`   // lookups answered without reading
	Misses uint64 `json:"misses"` // lookups that read the file
	Racy   uint64 `json:"racy"`   // entries found but not trusted (racy timestamp)
	// FineCtime: the racy rule is off on this backing filesystem
	// (Config.FineCtime, docs/DESIGN.md#fine-ctime).
	FineCtime   bool   `json:"fine_ctime"`
	HashedBytes uint64 `json:"hashed_bytes"` // bytes read for hashing
	Entries     int    `json:"entries"`
	// ReadBackBytes are the bytes read back to credit own writes
	// (docs/DESIGN.md#own-write-refresh), part of HashedBytes.
	ReadBackBytes uint64 `json:"read_back_bytes"`
	// Streamed counts own writes credited from the bytes hashed as they
	// were written, without reading the file back; StreamedBytes is
	// their size in bytes (docs/DESIGN.md#lazy-hash).
	Streamed      uint64 `json:"streamed"`
	StreamedBytes uint64 `json:"streamed_bytes"`
	// Deferred counts reads registered with their hash deferred, and
	// DeferredLost those whose hash could not be attributed to the read
	// (the file changed first): their records are seen, not fresh
	// (docs/DESIGN.md#lazy-hash).
	Deferred     uint64 `json:"deferred"`
	DeferredLost uint64 `json:"deferred_lost"`
	// Fingerprinted counts hashes of files over the bound that their
	// stat stood for, without reading (docs/DESIGN.md#hash-bound).
	Fingerprinted uint64 `json:"fingerprinted"`
}

// Stats returns the counters.
func (c *HashCache) Stats() HashStats {
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	return HashStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Racy: c.racy.Load(), FineCtime: c.FineCtime,
		HashedBytes: c.hashedBytes.Load(), Entries: n, ReadBackBytes: c.readBackBytes.Load(),
		Streamed: c.streamed.Load(), StreamedBytes: c.streamedBytes.Load(),
		Deferred: c.deferred.Load(), DeferredLost: c.deferredLost.Load(), Fingerprinted: c.fingerprinted.Load()}
}

// hashBufBytes is the size of the buffers hashing reads files with: a
// source file fits one read.
const hashBufBytes = 64 << 10

// hashBufs recycles hashing buffers: io.Copy from an *os.File (through
// its WriteTo) allocates a fresh 32 KiB buffer per call, which on the
// mutation path (a decision hashes the file: docs/DESIGN.md#mutation-path)
// was most of a guarded unlink's garbage.
var hashBufs = sync.Pool{New: func() any { b := AlignedBuf(hashBufBytes); return &b }}

// DirectAlign is the alignment (bytes) of O_DIRECT buffers and offsets:
// the hashing buffer's, so a file opened with O_DIRECT
// (docs/DESIGN.md#uncached-view) can be read into it, and a direct read's
// (internal/crossmount).
const DirectAlign = 4096

// AlignedBuf returns n bytes starting at a multiple of DirectAlign. Safe
// for concurrent use.
func AlignedBuf(n int) []byte {
	b := make([]byte, n+DirectAlign)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (DirectAlign - 1))
	if off != 0 {
		off = DirectAlign - off
	}
	return b[off : off+n : off+n]
}

// readerOnly hides an *os.File's WriteTo, so io.CopyBuffer uses the
// buffer it is given.
type readerOnly struct{ io.Reader }

// copyFile copies f to w to its end through a pooled buffer and returns
// the bytes copied, as io.Copy does.
func copyFile(w io.Writer, f *os.File) (int64, error) {
	bp := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(bp)
	return io.CopyBuffer(w, readerOnly{f}, *bp)
}
