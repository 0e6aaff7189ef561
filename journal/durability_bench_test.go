package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkCaptureRemoved is the journal's cost of one removed 4 KiB
// file's pre-image on the request path, by sync mode (docs/DESIGN.md#journal-sync)
// and by how the bytes are kept: a copy (CaptureAt) or a link of the
// doomed inode (CaptureWith, Doomed), followed by its record. The file is
// removed after each capture, as an rm would.
func BenchmarkCaptureRemoved(b *testing.B) {
	data := make([]byte, 4096)
	for _, mode := range []SyncMode{SyncFsync, SyncWrite} {
		for _, link := range []bool{false, true} {
			name := mode.String() + "/copy"
			if link {
				name = mode.String() + "/link"
			}
			b.Run(name, func(b *testing.B) {
				root := b.TempDir()
				j, err := Open(filepath.Join(root, "journal"), Options{Sync: mode})
				if err != nil {
					b.Fatal(err)
				}
				defer j.Close()
				ws := filepath.Join(root, "ws")
				os.Mkdir(ws, 0o700)
				dfd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer unix.Close(dfd)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					f := fmt.Sprintf("f%d", i)
					copy(data, fmt.Sprintf("file %d of a benchmark run", i))
					if err := os.WriteFile(filepath.Join(ws, f), data, 0o600); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					c := func(p string) (PreImage, error) { return CaptureAt(j.Blobs(), dfd, p) }
					if link {
						c = func(p string) (PreImage, error) {
							return CaptureWith(j.Blobs(), dfd, p, CaptureOptions{Doomed: true, MayLink: func(*unix.Stat_t) bool { return true }})
						}
					}
					if _, err := j.Record("s", "unlink", f, "", c); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					os.Remove(filepath.Join(ws, f))
					b.StartTimer()
				}
			})
		}
	}
}
