package journal

import (
	"path/filepath"
	"testing"
)

// BenchmarkAppend measures one record's append to a session log with and
// without its fdatasync (the cost a write, truncate or chmod that saves no
// pre-image no longer pays: docs/DESIGN.md#journal-rewind).
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{true, false} {
		name := "nosync"
		if sync {
			name = "fdatasync"
		}
		b.Run(name, func(b *testing.B) {
			j, err := Open(filepath.Join(b.TempDir(), "journal"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			s, err := j.session("s")
			if err != nil {
				b.Fatal(err)
			}
			defer s.mu.Unlock()
			rec := Record{Op: "write", Path: "src/some/file.go"}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.seq++
				rec.Seq = s.seq
				if err := s.log.write(rec, sync); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecordRepeatWrite is Record of a write to a path already
// captured in the interval (no pre-image, no fdatasync).
func BenchmarkRecordRepeatWrite(b *testing.B) {
	j, err := Open(filepath.Join(b.TempDir(), "journal"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	c := func(string) (PreImage, error) { return PreImage{Kind: KindAbsent}, nil }
	if _, err := j.Record("s", "write", "f", "", c); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := j.Record("s", "write", "f", "", c); err != nil {
			b.Fatal(err)
		}
	}
}
