package journal

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkPlanRewindLargeInterval is the planning of a dry run over a
// session that made n files (each written) and removed them again, as an
// `npm install` then `rm -rf node_modules` does, and over one that
// replaced n files by a temporary file renamed over each (`sed -i`).
func BenchmarkPlanRewindLargeInterval(b *testing.B) {
	for _, n := range []int{2000, 8000} {
		for _, shape := range []string{"made-removed", "sed-i"} {
			b.Run(fmt.Sprintf("%s/%d", shape, n), func(b *testing.B) {
				j, err := Open(filepath.Join(b.TempDir(), "journal"), Options{Sync: SyncWrite})
				if err != nil {
					b.Fatal(err)
				}
				defer j.Close()
				d := newDriver(b, j, "agent")
				d.mkdir("d")
				if shape == "sed-i" {
					for i := 0; i < n; i++ {
						d.write(fmt.Sprintf("d/f%d", i), "x\n")
					}
				}
				if _, err := j.Checkpoint("agent", "start"); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < n; i++ {
					p := fmt.Sprintf("d/f%d", i)
					if shape == "sed-i" {
						d.sedI(p, "x", "y")
					} else {
						d.write(p, "x\n")
					}
				}
				if shape == "made-removed" {
					for i := 0; i < n; i++ {
						d.unlink(fmt.Sprintf("d/f%d", i))
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := j.PlanRewind("agent", "cp000001", d.ins(), RewindOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
