// Package crossmount is what a rubinofs mount does about other mounts of
// its backing directory: whether it is in shared mode now (forced, or a
// peer mount found on this host: docs/DESIGN.md#peer-mounts), the
// cross-mount lock that makes the guard's check and its mutation one step
// against them (docs/DESIGN.md#cross-mount-lock), the stat each change
// through this mount left, by which another mount's unreported change is
// seen (docs/DESIGN.md#close-to-open), and the write-time view of a backing
// file whose filesystem's clients cache (O_DIRECT, forced stats:
// docs/DESIGN.md#uncached-view).
//
// It is one value per mount, Mode, that the FUSE adapter (package fusefs)
// holds as a named field and asks at each decision; it imports no FUSE
// package and never fusefs. The adapter keeps the backing access: it opens
// the files and stats them again, and hands the lock their descriptors
// (Mode.LockFd) or openers (Mode.LockAll).
package crossmount
