// Package peers finds other rubinofs mounts of the same backing directory
// on this host (docs/DESIGN.md#peer-mounts).
//
// Every mount registers its backing root in a host-wide registry
// directory (Dir): one empty key file per directory identity, named
// DEV-INO after the directory's stat, never anything inside the
// workspace. A mount holds an OFD read lock on byte 0 of its root's key
// ("rooted here") and on byte 1 of each ancestor's key ("rooted
// beneath"). Another mount is a peer when an OFD write lock would
// conflict on byte 0 or 1 of this root's key (a mount at the same root,
// or one inside it) or on byte 0 of an ancestor's key (a mount above it).
// The locks belong to the open file descriptions, so they vanish with the
// process that held them: a crashed daemon leaves only empty key files,
// and a registration that ends removes the key files nobody else holds.
package peers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Lock bytes of a key file.
const (
	// rootedHere is the byte a mount whose backing root is the key's
	// directory holds a read lock on.
	rootedHere = 0
	// rootedBeneath is the byte a mount whose backing root is below the
	// key's directory holds a read lock on.
	rootedBeneath = 1
	// hostKey is the name of the key file every registration of the
	// registry directory holds a read lock on byte 0 of.
	hostKey = "host"
)

// Dir returns the registry directory for the calling user:
// /run/rubinofs/backing for root, else $XDG_RUNTIME_DIR/rubinofs/backing,
// else os.TempDir()/rubinofs-UID/backing. Mounts see each other here only
// when they use the same directory, that is when one user (or root) runs
// them; other users' mounts are found in the mount table (MountTable).
func Dir() string {
	if os.Geteuid() == 0 {
		return "/run/rubinofs/backing"
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "rubinofs", "backing")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("rubinofs-%d", os.Geteuid()), "backing")
}

// Registry is one mount's registration of its backing root: the key files
// it holds open, with their read locks. Concurrency: Peer is safe for
// concurrent use; Close must not race with it.
type Registry struct {
	// host is the registry's host key (hostKey), read lock on byte 0: any
	// other registration on the host conflicts with a write lock there, so
	// a lone mount answers Peer with one fcntl.
	host key
	// root is the root's key file (read lock on rootedHere); fd -1 once
	// closed.
	root key
	// ancestors are the key files of the root's ancestors up to /,
	// nearest first (read lock on rootedBeneath each).
	ancestors []key
}

// key is one held key file: its descriptor and path.
type key struct {
	fd   int
	name string
}

// holdTries bounds how often holdFile starts over when the key file it
// opened was removed meanwhile by a registration that ended (Close), one
// millisecond apart.
const holdTries = 1000

// Register registers root, a backing directory, in the registry
// directory dir ("" is Dir()), creating dir (mode 0755 for root, else
// 0700) and the key files as needed; dir and its parent must be
// directories of the effective user that no one else may write. root is resolved to its real path
// first, and its ancestors are walked by that path up to /. The locks
// hold until Close or the end of the process. Errors: a registry
// directory another user could write; the os and fcntl(2) errors of
// creating the directory, stat'ing root or an ancestor, opening
// a key file or locking it (EINVAL or ENOLCK where the registry's
// filesystem has no OFD locks).
func Register(dir, root string) (r *Registry, err error) {
	if dir == "" {
		dir = Dir()
	}
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o755
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return nil, fmt.Errorf("peer registry: %w", err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := private(d); err != nil {
			return nil, err
		}
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("peer registry: %w", err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, fmt.Errorf("peer registry: %w", err)
	}
	r = &Registry{host: key{fd: -1}, root: key{fd: -1}}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.host, err = holdFile(filepath.Join(dir, hostKey), rootedHere); err != nil {
		return nil, err
	}
	if r.root, err = holdKey(dir, real, rootedHere); err != nil {
		return nil, err
	}
	for p := real; p != "/"; {
		p = filepath.Dir(p)
		k, err := holdKey(dir, p, rootedBeneath)
		if err != nil {
			return nil, err
		}
		r.ancestors = append(r.ancestors, k)
	}
	return r, nil
}

// private checks that d is a directory (not a symlink) owned by the
// effective user and writable by no one else, so no other user can plant
// or swap the key files (in a shared temporary directory, say).
func private(d string) error {
	var st unix.Stat_t
	if err := unix.Lstat(d, &st); err != nil {
		return fmt.Errorf("peer registry: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("peer registry: %s is not a directory of uid %d that only it may write", d, os.Geteuid())
	}
	return nil
}

// holdKey holds the key file of directory p in dir, read-locking byte b
// (holdFile).
func holdKey(dir, p string, b int64) (key, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return key{fd: -1}, fmt.Errorf("peer registry: stat %s: %w", p, err)
	}
	return holdFile(filepath.Join(dir, fmt.Sprintf("%d-%d", st.Dev, st.Ino)), b)
}

// holdFile opens (creating it, empty, mode 0644) the file name and takes
// an OFD read lock on byte b of it. A registration that ends removes a
// key file nobody else holds, under a write lock (Close): when the lock
// is refused by that write lock, or the file locked is no longer the one
// at name, holdFile starts over (at most holdTries times).
func holdFile(name string, b int64) (key, error) {
	for try := 0; ; try++ {
		fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return key{fd: -1}, fmt.Errorf("peer registry: %s: %w", name, err)
		}
		lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: b, Len: 1}
		err = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		if err == nil && !sameFile(fd, name) {
			err = unix.ESTALE // removed (and maybe created anew) since the open
		}
		if err == nil {
			return key{fd: fd, name: name}, nil
		}
		unix.Close(fd)
		retry := err == unix.EAGAIN || err == unix.EACCES || err == unix.EINTR || err == unix.ESTALE
		if !retry || try >= holdTries {
			return key{fd: -1}, fmt.Errorf("peer registry: locking %s: %w", name, err)
		}
		time.Sleep(time.Millisecond) // a Close is removing it: microseconds
	}
}

// sameFile reports whether name is still the file fd has open.
func sameFile(fd int, name string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Stat(name, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// Peer reports whether another mount shares this one's backing files:
// another open file description holds a lock on byte 0 or 1 of the root's
// key (a mount of the same root, or of a directory inside it) or on byte
// 0 of an ancestor's key (a mount of a directory above it). It costs one
// F_OFD_GETLK when no other registration exists on the host (the host
// key), else one more per key file (1 + the depth of the root); no
// allocation; this registration's own locks never conflict with its own
// query (the kernel compares OFD lock owners by open file description). A
// failed query counts as a peer (safe: shared mode costs speed, never an
// update).
func (r *Registry) Peer() bool {
	if r == nil || r.root.fd < 0 {
		return false
	}
	if !held(r.host.fd, rootedHere, 1) {
		return false // no other mount on the host
	}
	if held(r.root.fd, rootedHere, 2) {
		return true
	}
	for _, k := range r.ancestors {
		if held(k.fd, rootedHere, 1) {
			return true
		}
	}
	return false
}

// held reports whether another open file description holds a lock
// meeting [start, start+n) of fd's file: F_OFD_GETLK for a write lock
// finds a conflict. An error other than EINTR (retried) counts as held.
func held(fd int, start, n int64) bool {
	for {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: start, Len: n}
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err != nil || lk.Type != unix.F_UNLCK
	}
}

// Close drops the registration: each key file that no other registration
// holds (a write lock over the whole file is granted) is removed under
// that lock, and every key file is closed, which releases its locks. The
// host key stays. Safe on nil and after a failed Register.
func (r *Registry) Close() error {
	if r == nil {
		return nil
	}
	var first error
	for _, k := range append([]key{r.host, r.root}, r.ancestors...) {
		if k.fd < 0 {
			continue
		}
		if k.name != r.host.name {
			lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
			if unix.FcntlFlock(uintptr(k.fd), unix.F_OFD_SETLK, &lk) == nil && sameFile(k.fd, k.name) {
				unix.Unlink(k.name) // nobody holds it; a newcomer starts over (holdFile)
			}
		}
		if err := unix.Close(k.fd); err != nil && first == nil {
			first = err
		}
	}
	r.host, r.root, r.ancestors = key{fd: -1}, key{fd: -1}, nil
	return first
}
