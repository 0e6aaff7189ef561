// Package gitsafe answers the one question of the guard's git-safe policy
// (docs/DESIGN.md#git-safe): does the content of a workspace file equal the
// blob that its git repository holds for it, in the index, at HEAD or in the
// latest stash entry's working tree? When
// it does, git has those bytes, so a git operation that replaces the file
// loses nothing the session never saw.
//
// Repositories are found on disk in the backing workspace: the repository of
// a file is the nearest directory at or above it, inside the workspace, that
// holds a `.git` directory or a `.git` file naming its git directory
// (`gitdir: ...`, as linked worktrees and submodules have). The index is
// decoded by go-git's plumbing/format/index and cached per repository, keyed
// by the index file's stat and trailing checksum, so a checkout of N files
// parses it once, and an index that git rewrote meanwhile (index.lock renamed
// over it) is parsed again. HEAD is resolved on every lookup that needs it
// and its tree read through go-git's object storage.
//
// Blob ids are SHA-1 (go-git v5 builds with SHA-1 object ids). A repository
// whose extensions.objectformat is sha256 is skipped: Holds answers false,
// and the guard decides as it would without this package.
package gitsafe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// objectCacheBytes bounds go-git's object cache per repository: HEAD lookups
// decode tree objects only, a few KiB each.
const objectCacheBytes = 8 * cache.MiByte

// Repos finds the repositories of a workspace and answers Holds. The zero
// value is not usable: use New. Safe for concurrent use; lookups in one
// repository are serialised (go-git's storage and trees are not safe for
// concurrent use), lookups in different repositories are not.
type Repos struct {
	backing   string
	workspace string

	mu    sync.Mutex
	repos map[string]*repo // by workspace-relative worktree directory ("." = root)
}

// New returns the repositories of the workspace reached at backing.
// workspace is the path the user gave for it (the same as backing, except
// for a mount over the workspace itself, where backing is a descriptor path
// under /proc/self/fd): an absolute `gitdir:` under workspace is read under
// backing instead, so the daemon never reads its own mount.
func New(backing, workspace string) *Repos {
	return &Repos{backing: filepath.Clean(backing), workspace: filepath.Clean(workspace), repos: make(map[string]*repo)}
}

// Holds reports whether the file at the workspace-relative, slash-separated
// path rel, whose content content returns and whose size the caller
// observed as size bytes, is byte for byte a blob its repository holds for
// rel: in any stage of the index, or in HEAD's tree. content is called at
// most once, and only when the repository has a candidate blob for rel; the
// caller closes what it opened. Content that is not exactly size bytes long
// answers false (the file changed meanwhile).
//
// False, with a nil error, when rel is in no repository in the workspace,
// untracked, in a SHA-256 repository, or different from every candidate.
// Errors are those of reading the content, the index or the objects; the
// caller treats them as false (fail closed).
func (r *Repos) Holds(rel string, size int64, content func() (io.Reader, error)) (bool, error) {
	rp, inRepo, err := r.find(rel)
	if err != nil || rp == nil {
		return false, err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.sha256 {
		// go-git v5 computes and decodes SHA-1 ids only; a SHA-256
		// repository's index would not even decode. Skipped: the guard
		// decides as it would for any other program.
		return false, nil
	}
	var sum plumbing.Hash
	hashed := false
	hash := func() error {
		rd, err := content()
		if err != nil {
			return err
		}
		h := plumbing.NewHasher(plumbing.BlobObject, size)
		// One byte past size tells a file that grew since its stat.
		n, err := io.Copy(h, io.LimitReader(rd, size+1))
		if err != nil {
			return err
		}
		if n != size {
			return errSizeChanged
		}
		sum, hashed = h.Sum(), true
		return nil
	}
	ids, idxErr := rp.indexBlobs(inRepo)
	if len(ids) > 0 {
		if err := hash(); err != nil {
			return false, ignoreSize(err)
		}
		for _, id := range ids {
			if id == sum {
				return true, nil
			}
		}
	}
	head, err := rp.headBlob(inRepo)
	stash, stashErr := rp.stashBlob(inRepo)
	if head.IsZero() && stash.IsZero() {
		for _, e := range []error{err, stashErr, idxErr} {
			if e != nil {
				return false, e
			}
		}
		return false, nil
	}
	if !hashed {
		if err := hash(); err != nil {
			return false, ignoreSize(err)
		}
	}
	return sum == head || sum == stash, nil
}

// stashRef is the reference of the latest stash entry (stash@{0}).
const stashRef = plumbing.ReferenceName("refs/stash")

// stashBlob returns the blob id of p in the working-tree commit of the
// latest stash entry, or the zero id when there is no stash or no blob at
// p there. `git stash` saves the working tree there before it runs `git
// reset --hard` in a separate process, so those bytes are held by git
// when the reset replaces them. Called with rp.mu held.
func (rp *repo) stashBlob(p string) (plumbing.Hash, error) {
	ref, err := storer.ResolveReference(rp.storage, stashRef)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	t, err := commitTree(rp.storage, ref.Hash())
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return treeBlob(t, p)
}

// commitTree returns the tree of the commit id.
func commitTree(s storer.EncodedObjectStorer, id plumbing.Hash) (*object.Tree, error) {
	c, err := object.GetCommit(s, id)
	if err != nil {
		return nil, err
	}
	return c.Tree()
}

// treeBlob returns the blob id at p in t, or the zero id when t holds no
// blob there (no entry, a directory, a submodule).
func treeBlob(t *object.Tree, p string) (plumbing.Hash, error) {
	e, err := t.FindEntry(p)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil || !blobMode(e.Mode) {
		return plumbing.ZeroHash, err
	}
	return e.Hash, nil
}

var errSizeChanged = errors.New("size changed while hashing")

func ignoreSize(err error) error {
	if err == errSizeChanged {
		return nil
	}
	return err
}

// repo is one repository: a worktree directory and its git directories.
type repo struct {
	mu sync.Mutex
	// dotGit identifies the `.git` entry the repo was found by; a repo
	// whose `.git` was replaced (re-init, re-clone) is found again.
	dotGit    fileKey
	gitDir    string // index, HEAD (a linked worktree's own directory)
	commonDir string // objects and refs (gitDir unless a commondir file says otherwise)
	sha256    bool

	idxKey  indexKey
	idxOK   bool                       // idx and idxErr describe the index of idxKey
	idx     map[string][]plumbing.Hash // path -> blob ids, every stage
	idxErr  error
	parses  int // index decodes so far (tests check the cache with it)
	storage *filesystem.Storage
	// tree caches the tree of HEAD's commit headCommit.
	headCommit plumbing.Hash
	tree       *object.Tree
}

type fileKey struct{ dev, ino uint64 }

// find returns the repository holding rel and rel's path inside it, or nil
// when no directory at or above rel, inside the workspace, holds a `.git`.
func (r *Repos) find(rel string) (*repo, string, error) {
	rel = path.Clean(strings.TrimPrefix(rel, "/"))
	for dir := path.Dir(rel); ; dir = path.Dir(dir) {
		var st syscall.Stat_t
		dotGit := filepath.Join(r.backing, filepath.FromSlash(dir), ".git")
		if err := syscall.Lstat(dotGit, &st); err == nil {
			rp, err := r.open(dir, dotGit, &st)
			inRepo := rel
			if dir != "." {
				inRepo = strings.TrimPrefix(rel, dir+"/")
			}
			return rp, inRepo, err
		}
		if dir == "." || dir == "/" {
			return nil, "", nil
		}
	}
}

// open returns the cached repo of the worktree directory dir, whose `.git`
// entry dotGit has the stat st, opening it when new or replaced.
func (r *Repos) open(dir, dotGit string, st *syscall.Stat_t) (*repo, error) {
	key := fileKey{dev: uint64(st.Dev), ino: st.Ino}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rp, ok := r.repos[dir]; ok && rp.dotGit == key {
		return rp, nil
	}
	gitDir := dotGit
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		b, err := os.ReadFile(dotGit)
		if err != nil {
			return nil, err
		}
		line, _, _ := strings.Cut(string(b), "\n")
		target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return nil, fmt.Errorf("%s: no gitdir line", dotGit)
		}
		gitDir = r.local(strings.TrimSpace(target), filepath.Dir(dotGit))
	} else if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, nil // a symlink or anything else: not a repository we read
	}
	commonDir := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		commonDir = r.local(strings.TrimSpace(string(b)), gitDir)
	}
	fs := dotgit.NewRepositoryFilesystem(osfs.New(gitDir), osfs.New(commonDir))
	s := filesystem.NewStorage(fs, cache.NewObjectLRU(objectCacheBytes))
	rp := &repo{dotGit: key, gitDir: gitDir, commonDir: commonDir, storage: s}
	// go-git v5 writes extensions.objectformat but does not read it back
	// into Config.Extensions: ask the raw section.
	if cfg, err := s.Config(); err == nil && cfg.Raw != nil {
		rp.sha256 = strings.EqualFold(cfg.Raw.Section("extensions").Option("objectformat"), "sha256")
	}
	r.repos[dir] = rp
	return rp, nil
}

// local resolves a path found in a `.git` or commondir file (relative to
// base) and maps one under the workspace to the backing directory.
func (r *Repos) local(p, base string) string {
	if !filepath.IsAbs(p) {
		return filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	if r.workspace != r.backing {
		if p == r.workspace {
			return r.backing
		}
		if rest, ok := strings.CutPrefix(p, r.workspace+"/"); ok {
			return filepath.Join(r.backing, rest)
		}
	}
	return p
}

// indexKey identifies one version of an index file: its stat, and the
// checksum git writes at its end (all zero with index.skipHash, when the
// stat alone has to tell versions apart).
type indexKey struct {
	dev, ino, size   uint64
	mtimeNs, ctimeNs int64
	sum              [20]byte
}

// indexBlobs returns the blob ids of the index entries for p (every
// stage; gitlinks and directories excluded). No index file: none. Called
// with rp.mu held.
func (rp *repo) indexBlobs(p string) ([]plumbing.Hash, error) {
	f, err := os.Open(filepath.Join(rp.gitDir, "index"))
	if errors.Is(err, os.ErrNotExist) {
		rp.idx, rp.idxErr, rp.idxOK = nil, nil, false
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	k := indexKey{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano()}
	if st.Size >= int64(len(k.sum)) {
		if _, err := f.ReadAt(k.sum[:], st.Size-int64(len(k.sum))); err != nil {
			return nil, err
		}
	}
	if !rp.idxOK || k != rp.idxKey {
		rp.idx, rp.idxErr = decodeIndex(f)
		rp.parses++
		rp.idxKey, rp.idxOK = k, true
	}
	return rp.idx[p], rp.idxErr
}

// decodeIndex reads the index from f's start into path -> blob ids. An
// index go-git cannot decode (a split index, a sparse index's directory
// entries) is an error: the caller falls back to HEAD.
func decodeIndex(f *os.File) (map[string][]plumbing.Hash, error) {
	var idx index.Index
	if err := index.NewDecoder(bufio.NewReader(io.NewSectionReader(f, 0, 1<<62))).Decode(&idx); err != nil {
		return nil, fmt.Errorf("decoding the git index: %w", err)
	}
	out := make(map[string][]plumbing.Hash, len(idx.Entries))
	for _, e := range idx.Entries {
		if !blobMode(e.Mode) {
			continue
		}
		out[e.Name] = append(out[e.Name], e.Hash)
	}
	return out, nil
}

// blobMode reports whether a tree or index mode names a blob: a regular or
// executable file, or a symlink (whose blob is its target, the content of
// the file git writes when core.symlinks is false).
func blobMode(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated || m == filemode.Symlink
}

// headBlob returns the blob id of p in HEAD's tree, or the zero id when
// HEAD is unborn or has no blob at p. A lookup that fails on a missing
// object is retried once with fresh storage (git may have repacked since
// the packs were listed). Called with rp.mu held.
func (rp *repo) headBlob(p string) (plumbing.Hash, error) {
	id, err := rp.lookupHead(p)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		rp.storage = filesystem.NewStorage(rp.storage.Filesystem(), cache.NewObjectLRU(objectCacheBytes))
		rp.tree, rp.headCommit = nil, plumbing.ZeroHash
		id, err = rp.lookupHead(p)
	}
	return id, err
}

func (rp *repo) lookupHead(p string) (plumbing.Hash, error) {
	ref, err := storer.ResolveReference(rp.storage, plumbing.HEAD)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil // unborn branch: no commit yet
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if rp.tree == nil || rp.headCommit != ref.Hash() {
		t, err := commitTree(rp.storage, ref.Hash())
		if err != nil {
			return plumbing.ZeroHash, err
		}
		rp.tree, rp.headCommit = t, ref.Hash()
	}
	return treeBlob(rp.tree, p)
}
