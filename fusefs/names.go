package fusefs

// Name changes and operations by node.
//
// A request on an existing node (OPEN, GETATTR, STATX) names no path: the
// daemon reaches the backing file by the path go-fuse's inode tree records
// for the node (Node.rel), which for a file with several hard links is the
// name linked or looked up last. The bridge updates that tree only after
// an UNLINK, RMDIR or RENAME handler has returned, so for a moment the
// tree still names an entry that is gone from the backing directory. An
// open of another name of the same file ("b", which exists all along,
// while "a" is unlinked) then reached the vanished "a" and failed with
// ENOENT, which natively cannot happen; fsstress hit it with three names of
// one file, and a few processes linking, unlinking and renaming names of
// a file while others open it by a name they never touch hit it within a
// few hundred opens (tests/links_race_test.go).
//
// So the name-changing requests are bracketed (rawHooks takes nameChanges
// for reading around the whole bridge call, tree update included), and an
// operation by node that fails with ENOENT waits until the changes under
// way have finished and tries again once with each new path the tree
// gives. It waits only on other requests' handlers, never on a caller, and
// only after a failure; a genuine ENOENT (no name left, or the retries
// spent) is returned as before.
//
// A request by parent directory and name (RENAME, UNLINK, RMDIR, MKDIR,
// CREATE, MKNOD, SYMLINK, LINK) reaches the backing directory the same
// way, by the directory node's path, which a rename of the directory (or
// of one above it) that has just finished leaves stale for the same
// moment: natively a rename, unlink, mkdir or create through a descriptor
// of a directory being renamed always succeeds, and through the mount
// some failed with ENOENT, or with EIO where the journal could not open
// the old path to take a pre-image (tests/dir_rename_race_test.go); a
// LOOKUP's ENOENT became a negative entry the kernel kept, so the file
// seemed gone. Such a request that fails with ENOENT is run again
// (nameChanges.retry; Node.byDir for LOOKUP and OPENDIR) once the name
// changes under way have finished, when one was under way or has
// finished since it began; with none, its ENOENT was genuine and is
// returned at once.

import (
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// nameChanges orders operations by node after the name changes in flight:
// UNLINK, RMDIR and RENAME hold it for reading around the bridge call; a
// retry takes it for writing, which returns once those have finished.
type nameChanges struct {
	mu sync.RWMutex
	// inFlight counts the name changes under way; done those that
	// succeeded, each counted after the bridge updated its tree and
	// before its bracket ends.
	inFlight atomic.Int64
	done     atomic.Uint64
}

// changing brackets one name-changing request; call the result when the
// bridge has returned, with whether the change succeeded.
func (c *nameChanges) changing() func(ok bool) {
	c.inFlight.Add(1)
	c.mu.RLock()
	return func(ok bool) {
		if ok {
			c.done.Add(1)
		}
		c.inFlight.Add(-1)
		c.mu.RUnlock()
	}
}

// mayBeStale reports whether a path read from the tree after done was
// before may have been stale: a name change was under way when it was
// read (its tree update still to come) or has finished since. When
// neither, an ENOENT through that path is genuine and costs no wait.
func (c *nameChanges) mayBeStale(before uint64) bool {
	return c.inFlight.Load() > 0 || c.done.Load() != before
}

// retry runs op, a request by parent directory and name, and, while it
// fails with ENOENT or ESTALE (staleErrno) and some name change was
// under way or has succeeded since the attempt began (so the directory's
// path op used may have been stale), waits for the name changes under
// way and runs it again, up to staleRetries times (see the file comment).
// bracket: op is itself a name change (UNLINK, RMDIR, RENAME), bracketed
// by changing for each attempt and counted when it succeeds; the bracket
// is never held while it waits. An op that fails so has changed nothing,
// so running it again is safe.
func (c *nameChanges) retry(bracket bool, op func() fuse.Status) fuse.Status {
	for attempt := 0; ; attempt++ {
		before := c.done.Load()
		var st fuse.Status
		if bracket {
			end := c.changing()
			st = op()
			end(st.Ok())
		} else {
			st = op()
		}
		if !staleErrno(syscall.Errno(st)) || attempt == staleRetries || !c.mayBeStale(before) {
			return st
		}
		c.settle()
		if c.done.Load() == before {
			return st // nothing was renamed or removed meanwhile: genuine
		}
	}
}

// settle waits until every name change in flight has finished. It must not
// be called from inside a name-changing request (it would wait for itself).
func (c *nameChanges) settle() {
	c.mu.Lock()
	c.mu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
}

// staleErrno reports whether errno is what a stale path gives: ENOENT
// (nothing there by now) or ESTALE (another directory or file there by
// now: Node.isDirAt, Node.isFileAt, Node.setattrAt). Either changed
// nothing.
func staleErrno(errno syscall.Errno) bool { return errno == syscall.ENOENT || errno == syscall.ESTALE }

// staleRetries bounds the retries of one operation by node after ENOENT;
// each waits for the name changes in flight first.
const staleRetries = 4

// byNode runs op with n's workspace path and, while op fails with ENOENT,
// waits for the name changes under way (nameChanges.settle) and runs it
// again with the path the tree gives then, as long as n still has a name
// at all, up to staleRetries times (see the file comment).
func (n *Node) byNode(op func(rel string) syscall.Errno) syscall.Errno {
	before := n.fs.names.done.Load()
	rel := n.rel()
	for attempt := 0; ; attempt++ {
		errno := op(rel)
		if !staleErrno(errno) || attempt == staleRetries || !n.fs.names.mayBeStale(before) {
			return errno
		}
		n.fs.names.settle()
		if _, parent := n.Parent(); parent == nil && !n.isRoot() {
			return errno // unlinked: no name left to try
		}
		// Even the same path again: the name may have been linked
		// back meanwhile.
		before = n.fs.names.done.Load()
		rel = n.rel()
	}
}

// byDir runs op with the directory n's workspace path and, while op fails
// with ENOENT and the path may have been stale (nameChanges.mayBeStale),
// waits for the name changes under way and runs it again as long as the
// tree then gives n another path (a rename of n or of a directory above
// it had made the first stale), up to staleRetries times. For requests
// in a directory that no rename keeps a stale answer of: LOOKUP, whose
// ENOENT the kernel caches as a negative entry for the mount's negative
// timeout, and OPENDIR.
func (n *Node) byDir(op func(rel string) syscall.Errno) syscall.Errno {
	for attempt := 0; ; attempt++ {
		before := n.fs.names.done.Load()
		rel := n.rel()
		errno := op(rel)
		if !staleErrno(errno) || attempt == staleRetries || !n.fs.names.mayBeStale(before) {
			return errno
		}
		n.fs.names.settle()
		if n.rel() == rel {
			return errno // the same path: genuine
		}
	}
}
