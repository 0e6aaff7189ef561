package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
)

// policy is what the mount does with one workspace path, answered in one
// place (policyOf) and once per name of a request
// (docs/DESIGN.md#path-policy).
type policy struct {
	// tracks: the guard keeps state for the path (the guard is not off
	// and the path is not exempt).
	tracks bool
	// journals: a change of the path is journaled (journalhook.Hook.Journals).
	journals bool
	// shared: the mount is in shared mode now (crossmount.Mode.Shared): mutations take
	// the cross-mount lock, opens keep no page cache.
	shared bool
	// cache: the kernel may keep the path's page cache across opens
	// (FOPEN_KEEP_CACHE): keep-cache on, the path watched, not shared.
	cache bool
}

// policyOf answers the policy of rel but cache (what a mutation asks; an
// open adds it: cachesPages) on a mount whose shared mode is shared,
// asked once per request; isDir is for journal ignore patterns ending in
// "/". Safe for concurrent use.
func (f *FS) policyOf(rel string, isDir, shared bool) policy {
	return policy{tracks: f.tracks(rel), journals: f.jh.Journals(rel, isDir), shared: shared}
}

// cachesPages is policy.cache of rel on a mount whose shared mode is
// shared: keep-cache on (a watcher attached), not shared, and rel in a
// subtree the watcher vouches for (invalidate.Invalidation.Short).
func (f *FS) cachesPages(rel string, shared bool) bool {
	return f.keepCache && !shared && !f.inv.Short(rel)
}

// tracks reports whether the guard keeps state for rel at all: the guard is
// not off and rel is not exempt (policy.tracks, for callers that need no
// other flag).
func (f *FS) tracks(rel string) bool {
	return f.guardMode != guard.ModeOff && !f.exempt(rel, false)
}

// cacheFlag is FOPEN_KEEP_CACHE when p lets the kernel keep the page
// cache, else 0.
func (p policy) cacheFlag() uint32 {
	if p.cache {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// pagedRead reports whether a read-only handle of a file of size bytes
// (size < 0: the file open at fd) keeps the page cache instead of
// passthrough: p.cache and size < Config.PagedReadMax
// (docs/DESIGN.md#paged-reads).
func (f *FS) pagedRead(p policy, size int64, fd int) bool {
	var st syscall.Stat_t
	if size < 0 && p.cache && syscall.Fstat(fd, &st) == nil {
		size = st.Size
	}
	return p.cache && size >= 0 && size < f.cfg.PagedReadMax
}
