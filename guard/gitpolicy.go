package guard

import (
	"io"
	"os"

	"github.com/zeebo/xxh3"
)

// GitBlobs is what the git-safe policy (docs/DESIGN.md#git-safe) asks of
// the workspace's git repositories; guard/gitsafe implements it with go-git.
//
// Holds reports whether the file at the workspace-relative path rel, whose
// size the caller observed as size bytes, is byte for byte a blob that its
// repository holds for rel (in the index or in HEAD's tree). It calls
// content at most once to read the file, reads it to the end when it does,
// and answers false when the bytes read are not exactly size long. Errors
// mean "cannot tell" and are treated as false. Safe for concurrent use.
type GitBlobs interface {
	Holds(rel string, size int64, content func() (io.Reader, error)) (bool, error)
}

// IsGit reports whether a process name (the caller's comm, at most 15
// bytes) is git, for the git-safe policy.
//
// Exactly "git": every git command that rewrites the working tree
// (checkout, switch, restore, reset, merge, rebase, cherry-pick, revert,
// stash, am, apply, read-tree -u, checkout-index, and pull through the
// git merge or git rebase it runs) runs as the git binary, and its parallel
// checkout workers are git processes too. The separate git-* programs
// (remote, credential and http helpers, git-lfs) do not replace tracked
// files, and the shell-script helpers that do (git-merge-one-file) mutate
// through rm, mv and cat, whose names are not git, so widening the match
// to "git-*" would only widen whom the policy trusts.
//
// This is no security boundary: the guard protects agents from accidents,
// and a process named git that replaces a file git holds loses nothing.
func IsGit(comm string) bool { return comm == "git" }

// vouchGit applies the git-safe policy to a refused mutation of t by the
// session of tr: when t's current bytes are a blob git holds for t.Path,
// git has them, so nothing unseen is lost; they are registered as read by
// the session (one pass over the file hashes it for git and for the
// tracker, so the record is exactly the bytes git was found to hold) and
// true is returned for the caller to decide again. A change of the file
// after that pass leaves the record stale, and the second decision refuses.
func (g *Guard) vouchGit(tr *Tracker, t Target) bool {
	if g.hashes.overBound(t.Stat) {
		return false // its record could not hold the bytes' hash (docs/DESIGN.md#hash-bound)
	}
	base := g.LastMutation(t.Stat.ID).Seq
	var f *os.File
	hs := xxh3.New()
	held, err := g.git.Holds(t.Path, t.Stat.Size, func() (io.Reader, error) {
		var err error
		if f, err = t.Open(); err != nil {
			return nil, err
		}
		return io.TeeReader(f, hs), nil
	})
	if f != nil {
		f.Close()
	}
	if err != nil || !held {
		return false
	}
	u := hs.Sum128()
	g.reads.Add(1)
	tr.mu.Lock()
	tr.put(t.Stat.ID, &record{path: t.Path, mtimeNs: t.Stat.MtimeNs, size: t.Stat.Size, hash: Hash{Hi: u.Hi, Lo: u.Lo}, at: tr.now()}, base)
	tr.mu.Unlock()
	return true
}
