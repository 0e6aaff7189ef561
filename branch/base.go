package branch

// A branch's bases: what the branch saw of each path before its first
// change there, read from the branch daemon's journal
// (docs/DESIGN.md#branch-merge).

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rubinofs/rubinofs/journal"
)

// Base is what the branch saw of one path before its first change there:
// the journal pre-image of that change. Kind is journal.KindAbsent,
// KindFile, KindDir or KindSymlink. A file has Hash, the xxh3-128 of its
// bytes as 32 hex digits (the guard's and the blob store's form), empty
// when its bytes were not kept (too large, over budget), and Blob, the
// path of the stored bytes ("" likewise). Mode is the full st_mode of a
// file or directory; Target a symlink's.
type Base struct {
	Kind   string
	Mode   uint32
	Hash   string
	Blob   string
	Target string
}

// Bases returns, for every path the branch daemon's journal
// (b.State()/journal) holds a pre-image of, the earliest one over all of
// its sessions (by record time; the first in a session's log within it):
// what the branch's first change of the path replaced, which is the
// workspace's state the branch had seen, since a file the branch has not
// changed shows the workspace's bytes. Paths are slash-separated and
// relative to the workspace root, as Changes gives them. A branch whose
// daemon kept no journal (--journal=false) has none. Memory grows with
// the number of paths changed; each log is streamed. The error is a
// session log's read or parse error. Reads as the caller's credentials
// allow (root: the state directory is 0700).
func (b *Branch) Bases() (map[string]Base, error) {
	dir := filepath.Join(b.State(), "journal")
	ents, err := os.ReadDir(filepath.Join(dir, "sessions"))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Base{}, nil
	}
	if err != nil {
		return nil, err
	}
	type seen struct {
		at  int64 // record time, ns
		pre journal.PreImage
	}
	first := map[string]seen{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".jsonl") || !e.Type().IsRegular() {
			continue
		}
		local := map[string]bool{} // paths this log already gave
		_, err := journal.ScanLog(filepath.Join(dir, "sessions", e.Name()), func(r journal.Record) error {
			at := r.Time.UnixNano()
			for _, p := range r.Pre {
				if p.Path == "" || local[p.Path] {
					continue
				}
				local[p.Path] = true
				if s, ok := first[p.Path]; !ok || at < s.at {
					first[p.Path] = seen{at, p}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make(map[string]Base, len(first))
	blobs := filepath.Join(dir, "blobs")
	for path, s := range first {
		p := s.pre
		bs := Base{Kind: p.Kind, Mode: p.Mode, Target: p.Target}
		if p.Kind == journal.KindFile && p.Blob != "" && p.Unrecoverable == "" {
			bs.Hash, bs.Blob = p.Blob, journal.BlobPath(blobs, p.Blob)
		}
		out[path] = bs
	}
	return out, nil
}
