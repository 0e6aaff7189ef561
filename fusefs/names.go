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

import (
	"sync"
	"syscall"
)

// nameChanges orders operations by node after the name changes in flight:
// UNLINK, RMDIR and RENAME hold it for reading around the bridge call; a
// retry takes it for writing, which returns once those have finished.
type nameChanges struct{ mu sync.RWMutex }

// changing brackets one name-changing request; call the result when the
// bridge has returned.
func (c *nameChanges) changing() func() {
	c.mu.RLock()
	return c.mu.RUnlock
}

// settle waits until every name change in flight has finished. It must not
// be called from inside a name-changing request (it would wait for itself).
func (c *nameChanges) settle() {
	c.mu.Lock()
	c.mu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
}

// staleRetries bounds the retries of one operation by node after ENOENT;
// each waits for the name changes in flight first.
const staleRetries = 4

// byNode runs op with n's workspace path and, while op fails with ENOENT,
// waits for the name changes under way (nameChanges.settle) and runs it
// again with the path the tree gives then, as long as n still has a name
// at all, up to staleRetries times (see the file comment).
func (n *Node) byNode(op func(rel string) syscall.Errno) syscall.Errno {
	rel := n.rel()
	for attempt := 0; ; attempt++ {
		errno := op(rel)
		if errno != syscall.ENOENT || attempt == staleRetries {
			return errno
		}
		n.fs.names.settle()
		if _, parent := n.Parent(); parent == nil && !n.isRoot() {
			return errno // unlinked: no name left to try
		}
		// Even the same path again: the name may have been linked
		// back meanwhile.
		rel = n.rel()
	}
}
