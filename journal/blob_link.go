package journal

// Storing a file's pre-image without a copy where it can (SyncWrite): an
// address already stored is reused, and the inode a removal or a
// replacement is about to drop is linked into the store
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
// own inode into the store (PutFile).
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

// PutFile stores the bytes of fd, a regular file of st (fstat'ed by the
// caller). In SyncFsync mode it is PutFromFd, as that mode always was. In
// SyncWrite mode it first learns the file's address without copying:
// known (its xxh3-128 in 32 hex digits, from a hash cache the caller trusts
// for st, or "") or one read of the file. An address already stored is
// returned at once (no copy: a file captured again in a later interval,
// unchanged). Else, with doomed (the caller is about to remove or replace
// the name), when st is the file's only link and the store's directory is
// on its filesystem, the inode itself is linked (linkat of /proc/self/fd)
// at its address: no copy, no new inode. Otherwise, or when the file
// changed meanwhile (size or mtime), the bytes are copied (through an
// O_TMPFILE file, else PutFromFd). A linked blob's name is made durable
// by the flusher, its bytes by the kernel's writeback of the inode, as
// the file's own would have been (docs/DESIGN.md#journal-link-durable).
// Once linked, the
// blob is the file's inode: a change the caller's removal does not make
// (it failed, or a process keeps writing to the unlinked file) changes the
// blob, which Unshare (after a failed removal) and Check (at a rewind)
// deal with (docs/DESIGN.md#journal-sync). A new blob's bytes are
// charged to sh too (nil: no share; past its limit the Blob carries
// UnrecoverableOverBudget: docs/DESIGN.md#journal-share). Errors are the
// filesystem's.
func (b *Blobs) PutFile(fd int, st *unix.Stat_t, known string, doomed bool, sh *Share) (Blob, error) {
	if !b.deferSync || st.Size > b.limit {
		return b.putFromFd(fd, st.Size, sh)
	}
	addr := known
	if !validAddr(addr) {
		h := xxh3.New()
		n, err := io.Copy(h, &fdReader{fd: fd})
		if err != nil {
			return Blob{}, err
		}
		if n != st.Size {
			return b.putFromFd(fd, st.Size, sh) // changing under us: copy it
		}
		addr = hexAddr(h.Sum128().Bytes())
	}
	final := b.Path(addr)
	if fi, err := os.Lstat(final); err == nil && fi.Size() == st.Size {
		return Blob{Addr: addr, Size: st.Size, Dedup: true}, nil // listed for the flusher by its writer
	}
	if !doomed || st.Nlink != 1 || b.noLink.Load() {
		return b.putTmpfile(fd, st.Size, sh)
	}
	return b.linkDoomed(fd, st, addr, sh)
}

// putTmpfile is PutFromFd for SyncWrite mode through an unnamed file
// (O_TMPFILE in blobs/tmp) linked at its address once copied and hashed:
// no temporary name to create and rename away. Where O_TMPFILE is not
// supported it is PutFromFd.
func (b *Blobs) putTmpfile(fd int, size int64, sh *Share) (Blob, error) {
	tfd, err := unix.Open(filepath.Join(b.dir, "tmp"), unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return b.putFromFd(fd, size, sh)
	}
	defer unix.Close(tfd)
	method, n, err := b.copyInto(tfd, fd)
	if err != nil {
		return Blob{}, err
	}
	if n > b.limit {
		return Blob{Unrecoverable: UnrecoverableTooLarge, Size: n}, nil
	}
	h := xxh3.New()
	if _, err := io.Copy(h, &fdReader{fd: tfd}); err != nil {
		return Blob{}, err
	}
	sum := h.Sum128().Bytes()
	addr := hexAddr(sum)
	final := b.Path(addr)
	out := Blob{Addr: addr, Size: n, Method: method}
	if _, err := os.Lstat(final); err == nil {
		out.Dedup = true
		return out, nil
	}
	if !b.reserve(n, sh) {
		return Blob{Unrecoverable: UnrecoverableOverBudget, Size: n}, nil
	}
	sub := filepath.Dir(final)
	err = b.placeAt(func() error {
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(tfd), unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
	}, sub, sum[0])
	if err != nil {
		b.unreserve(n, sh)
		if errors.Is(err, unix.EEXIST) {
			out.Dedup = true // a concurrent writer of the same bytes
			return out, nil
		}
		return Blob{}, err
	}
	b.deferred.add(final, sub)
	b.count(method)
	return out, nil
}

// linkDoomed links fd's inode (st) at addr, its content's address; see
// PutFile.
func (b *Blobs) linkDoomed(fd int, st *unix.Stat_t, addr string, sh *Share) (Blob, error) {
	n := st.Size
	final := b.Path(addr)
	out := Blob{Addr: addr, Size: n, Method: MethodLink}
	if !b.reserve(n, sh) {
		return Blob{Unrecoverable: UnrecoverableOverBudget, Size: n}, nil
	}
	sub := filepath.Dir(final)
	first, _ := strconv.ParseUint(addr[:2], 16, 8)
	err := b.placeAt(func() error {
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
	}, sub, byte(first))
	if err != nil {
		b.unreserve(n, sh)
		if errors.Is(err, unix.EEXIST) {
			out.Dedup = true // a concurrent writer of the same bytes
			return out, nil
		}
		if errors.Is(err, unix.EXDEV) {
			b.noLink.Store(true) // another filesystem: never again
		}
		return b.putFromFd(fd, st.Size, sh)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil || after.Size != st.Size || after.Mtim != st.Mtim {
		// Written since st: the address may not be its bytes.
		os.Remove(final)
		b.unreserve(n, sh)
		return b.putFromFd(fd, st.Size, sh)
	}
	b.deferred.add("", sub) // the name only: docs/DESIGN.md#journal-link-durable
	b.count(MethodLink)
	return out, nil
}

// linkNamed is PutFile's link of a doomed file for a capture that needs
// no descriptor (docs/DESIGN.md#journal-link-named): st is name's lstat in
// dirfd, a regular file; when the store defers its syncs (SyncWrite), st
// is the inode's only link, opt.MayLink allows it and opt.KnownHash knows
// its address, name itself is linked (linkat(2) of dirfd and name, no
// open, no read) at that address, then the blob's lstat must show st's
// inode with st's size and mtime (else it is taken away: the file changed
// or was replaced since st). An address already stored is reused
// (EEXIST: same bytes). ok false: nothing was stored and the caller
// captures by descriptor, as before (no link possible, another
// filesystem, a failed check); a spent budget is ok with
// UnrecoverableOverBudget, as linkDoomed answers.
func (b *Blobs) linkNamed(dirfd int, name string, st *unix.Stat_t, opt *CaptureOptions) (Blob, bool) {
	if !b.deferSync || st.Nlink != 1 || b.noLink.Load() || !opt.MayLink(st) {
		return Blob{}, false
	}
	addr := opt.KnownHash(st)
	if !validAddr(addr) {
		return Blob{}, false
	}
	n := st.Size
	out := Blob{Addr: addr, Size: n, Method: MethodLink}
	if !b.reserve(n, opt.Share) {
		return Blob{Unrecoverable: UnrecoverableOverBudget, Size: n}, true
	}
	final := b.Path(addr)
	sub := filepath.Dir(final)
	first, _ := strconv.ParseUint(addr[:2], 16, 8)
	err := b.placeAt(func() error {
		return unix.Linkat(dirfd, name, unix.AT_FDCWD, final, 0)
	}, sub, byte(first))
	if err != nil {
		b.unreserve(n, opt.Share)
		if errors.Is(err, unix.EEXIST) {
			out.Dedup = true // stored before (same address, same bytes)
			return out, true
		}
		if errors.Is(err, unix.EXDEV) {
			b.noLink.Store(true) // another filesystem: never again
		}
		return Blob{}, false
	}
	var after unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, final, &after, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
		after.Dev != st.Dev || after.Ino != st.Ino || after.Size != st.Size || after.Mtim != st.Mtim {
		// Replaced or written since st: the address may not be its bytes.
		os.Remove(final)
		b.unreserve(n, opt.Share)
		return Blob{}, false
	}
	b.deferred.add("", sub) // the name only: docs/DESIGN.md#journal-link-durable
	b.count(MethodLink)
	b.named.Add(1)
	return out, true
}

// Unshare gives the blob addr an inode of its own when it still shares
// one with another name (a PutFile link whose removal then failed, so the
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
// as doomed (CaptureOptions) failed, so its file lives on and must not share its
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

// linkState is the blob store's state of PutFile: noLink once a link
// failed with EXDEV (the store is on another filesystem), links counts
// the blobs stored by linking a doomed inode, named those of them linked
// by name (linkNamed: the file never opened), opens the files a capture
// opened to read or copy them.
type linkState struct {
	noLink atomic.Bool
	links  atomic.Int64
	named  atomic.Int64
	opens  atomic.Int64
}
