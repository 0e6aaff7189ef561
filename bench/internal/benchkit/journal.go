package benchkit

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
)

// Checkpoint marks a checkpoint labelled label in the change journal of
// the caller's session (this process: the mount's default session)
// through .rubino/self/journal, as `rubinofs checkpoint` does. A mount
// with the journal off refuses it (EOPNOTSUPP), which is returned.
func Checkpoint(mnt, label string) error {
	f, err := os.OpenFile(filepath.Join(mnt, ctltree.DirName, "self", "journal"), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write([]byte("checkpoint " + label + "\n"))
	return err
}

// StoreSize is what a journal store holds: Disk bytes allocated
// (st_blocks, as du counts them), Bytes apparent, and the number of blobs
// and session logs.
type StoreSize struct {
	Disk, Bytes int64
	Blobs, Logs int
}

// JournalStore measures the change journal's store of a rubinofs target
// (STATE/journal).
func JournalStore(t *Target) (StoreSize, error) {
	var s StoreSize
	root := filepath.Join(t.State, "journal")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			s.Disk += st.Blocks * 512
		}
		if d.Type().IsRegular() {
			s.Bytes += fi.Size()
			rel, _ := filepath.Rel(root, p)
			switch {
			case strings.HasPrefix(rel, "blobs/") && !strings.HasPrefix(rel, "blobs/tmp/"):
				s.Blobs++
			case strings.HasPrefix(rel, "sessions/"):
				s.Logs++
			}
		}
		return nil
	})
	return s, err
}

// String is the store size as the benchmarks print it.
func (s StoreSize) String() string {
	return fmt.Sprintf("%.1f MiB on disk (%.1f MiB apparent), %d blobs, %d session logs",
		float64(s.Disk)/(1<<20), float64(s.Bytes)/(1<<20), s.Blobs, s.Logs)
}
