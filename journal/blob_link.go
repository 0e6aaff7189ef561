package journal

// Pre-images of doomed files by link(2): the inode a removal or a
// replacement is about to drop is linked into the store instead of copied
// (docs/DESIGN.md#journal-sync).

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// MethodLink is the Method of a blob stored by linking the doomed file's
// own inode into the store (PutDoomed).
const MethodLink Method = "link"

// fdReader reads a descriptor with pread(2), from offset 0, without
// moving its offset.
type fdReader struct {
	fd  int
	off int64
}

func (r *fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Pread(r.fd, p, r.off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.EOF
		}
		r.off += int64(n)
		return n, nil
	}
}

// PutDoomed stores the bytes of fd, a regular file of st (fstat'ed by the
// caller) whose name the caller is about to remove or replace: in
// SyncWrite mode (SyncFsync keeps the copy it always made), when it is
// the file's only link (st.Nlink 1), the store's directory is on the
// file's filesystem and it is under the limit, the inode itself is linked
// (linkat of /proc/self/fd) at its address, the xxh3-128 of its bytes read
// once, with no copy and no new inode. Otherwise, or when the file changed
// while it was hashed (size or mtime), it is PutFromFd. Durability is as
// PutFromFd's in SyncWrite mode. Once linked, the blob is the
// file's inode: a change the caller's removal does not make (it failed,
// or a process keeps writing to the unlinked file) changes the blob, which
// Unshare (after a failed removal) and Check (at a rewind) deal with.
// Errors are the filesystem's.
func (b *Blobs) PutDoomed(fd int, st *unix.Stat_t) (Blob, error) {
	if !b.deferSync || st.Nlink != 1 || st.Size > b.limit || b.noLink.Load() {
		return b.PutFromFd(fd, st.Size)
	}
	h := xxh3.New()
	n, err := io.Copy(h, &fdReader{fd: fd})
	if err != nil {
		return Blob{}, err
	}
	if n != st.Size {
		return b.PutFromFd(fd, st.Size) // changing under us: copy it
	}
	sum := h.Sum128().Bytes()
	addr := hexAddr(sum)
	final := b.Path(addr)
	out := Blob{Addr: addr, Size: n, Method: MethodLink}
	if _, err := os.Lstat(final); err == nil {
		out.Dedup = true
		return out, b.syncDedup(final)
	}
	if !b.reserve(n) {
		return Blob{Unrecoverable: UnrecoverableOverBudget, Size: n}, nil
	}
	sub := filepath.Dir(final)
	err = b.placeAt(func() error {
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
	}, sub, sum[0])
	if err != nil {
		b.used.Add(-n)
		if errors.Is(err, unix.EEXIST) {
			out.Dedup = true // a concurrent writer of the same bytes
			return out, b.syncDedup(final)
		}
		if errors.Is(err, unix.EXDEV) {
			b.noLink.Store(true) // another filesystem: never again
		}
		return b.PutFromFd(fd, st.Size)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil || after.Size != st.Size || after.Mtim != st.Mtim {
		// Written while hashed: the address may not be its bytes.
		os.Remove(final)
		b.used.Add(-n)
		return b.PutFromFd(fd, st.Size)
	}
	b.deferred.add(final, sub) // SyncWrite only: the flusher syncs it
	b.links.Add(1)
	return out, nil
}

// Unshare gives the blob addr an inode of its own when it still shares
// one with another name (a PutDoomed whose removal then failed, so the
// file lives on in the workspace and its next change would change the
// blob): its bytes are copied to a new file renamed over it. A blob with
// one link, or missing, is left alone. Errors are the filesystem's.
func (b *Blobs) Unshare(addr string) error {
	if !validAddr(addr) {
		return nil
	}
	final := b.Path(addr)
	f, err := os.Open(final)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Nlink < 2 {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "unshare-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, _, err := b.copyInto(int(tmp.Fd()), int(f.Fd())); err != nil {
		return err
	}
	if !b.deferSync {
		if err := tmp.Sync(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return err
	}
	if b.deferSync {
		b.deferred.add(final, filepath.Dir(final))
		return nil
	}
	return syncDir(filepath.Dir(final))
}

// Unshare gives every blob rec's pre-images name an inode of its own
// (Blobs.Unshare): the caller's removal or replacement of a name captured
// with CaptureDoomedAt failed, so its file lives on and must not share its
// inode with the blob. The error is the first Unshare's.
func (j *Journal) Unshare(rec Record) error {
	var first error
	for _, p := range rec.Pre {
		if p.Blob == "" {
			continue
		}
		if err := j.blobs.Unshare(p.Blob); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// linkState is the blob store's state of PutDoomed: noLink once a link
// failed with EXDEV (the store is on another filesystem), links counts
// the blobs stored by link.
type linkState struct {
	noLink atomic.Bool
	links  atomic.Int64
}
