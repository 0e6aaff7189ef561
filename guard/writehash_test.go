package guard

import (
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// writeOp is one write of a pattern: len bytes at off.
type writeOp struct{ off, n int64 }

// TestWriteHashMatchesReadBack writes files in many patterns, feeding
// each write to a WriteHash with the stat after it, and checks that Sum
// holds exactly when the writes are the whole file in order from 0, and
// is then bit-identical to hashing the file by reading it back.
func TestWriteHashMatchesReadBack(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	seq := func(sizes ...int64) []writeOp {
		var out []writeOp
		var off int64
		for _, n := range sizes {
			out = append(out, writeOp{off, n})
			off += n
		}
		return out
	}
	randomSeq := func(total int64) []writeOp {
		var sizes []int64
		for total > 0 {
			n := min(total, rng.Int63n(200_000))
			sizes = append(sizes, n)
			total -= n
		}
		return seq(sizes...)
	}
	cases := []struct {
		name   string
		prior  int64 // bytes the file holds before the handle writes
		writes []writeOp
		want   bool
	}{
		{"one write", 0, seq(1000), true},
		{"one byte", 0, seq(1), true},
		{"stripe sizes", 0, seq(16, 48, 64, 128, 191, 256, 1024, 4096), true},
		{"4 KiB blocks", 0, seq(4096, 4096, 4096, 4096, 100), true},
		{"zero-length writes", 0, seq(0, 10, 0, 20, 0), true},
		{"large random chunks", 0, randomSeq(3 << 20), true},
		{"many small", 0, randomSeq(50_000), true},
		{"overwrites a shorter file", 50, seq(60, 60), true},
		{"a longer file shortened later", 100, seq(60, 60), false},
		{"gap", 0, []writeOp{{0, 10}, {20, 10}}, false},
		{"rewrite of the start", 0, []writeOp{{0, 10}, {0, 10}}, false},
		{"starts past 0", 0, []writeOp{{5, 10}}, false},
		{"backwards", 0, []writeOp{{10, 10}, {0, 10}}, false},
		{"longer file left behind", 1000, seq(10, 10), false},
		{"nothing written", 0, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, make([]byte, tc.prior), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var w WriteHash
			for _, op := range tc.writes {
				b := make([]byte, op.n)
				rng.Read(b)
				if _, err := f.WriteAt(b, op.off); err != nil {
					t.Fatal(err)
				}
				w.Wrote(op.off, b, fstatOf(t, f))
				if tc.want { // Sum in between does not disturb the stream
					mid, ok := w.Sum(fstatOf(t, f))
					if !ok || mid != readBack(t, p) {
						t.Fatalf("after write at %d: Sum %v, ok %v; read back %v", op.off, mid, ok, readBack(t, p))
					}
				}
			}
			got, ok := w.Sum(fstatOf(t, f))
			if ok != tc.want {
				t.Fatalf("Sum ok = %v, want %v", ok, tc.want)
			}
			if ok && got != readBack(t, p) {
				t.Fatalf("Sum %v, read back %v", got, readBack(t, p))
			}
		})
	}
}

// TestWriteHashStatMustMatch checks that a change after the handle's last
// write (another stat) or a break makes Sum refuse.
func TestWriteHashStatMustMatch(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w WriteHash
	b := []byte("hello, world\n")
	f.WriteAt(b, 0)
	w.Wrote(0, b, fstatOf(t, f))
	st := fstatOf(t, f)
	if _, ok := w.Sum(st); !ok {
		t.Fatal("Sum refused the stat its write left")
	}
	other := st
	other.CtimeNs++
	if _, ok := w.Sum(other); ok {
		t.Fatal("Sum accepted another ctime")
	}
	w.Interleaved()
	if _, ok := w.Sum(st); ok {
		t.Fatal("Sum held after an interleaved change")
	}
	var fresh WriteHash
	fresh.Interleaved() // before the first write: nothing to give up
	fresh.Wrote(0, b, st)
	if _, ok := fresh.Sum(st); !ok {
		t.Fatal("Interleaved before the first write broke the hash")
	}
}

func fstatOf(t *testing.T, f *os.File) Stat {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return StatOf(&st)
}

func readBack(t *testing.T, p string) Hash {
	t.Helper()
	c := NewHashCache(0, 0, nil)
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	h, err := c.Sum(StatOf(&st), func() (*os.File, error) { return os.Open(p) })
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); HashBytes(b) != h {
		t.Fatal("streamed and one-shot xxh3-128 differ")
	}
	return h
}

// TestSumEmptyFileOpensNothing: the hash of a regular file whose stat says
// it is empty is known without opening it; with NoReuse (untrusted stats)
// it is read; a non-empty one is read.
func TestSumEmptyFileOpensNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	opens := 0
	open := func() (*os.File, error) { opens++; return os.Open(p) }
	c := NewHashCache(0, 0, nil)
	if h, err := c.Sum(StatOf(&st), open); err != nil || h != HashBytes(nil) || opens != 0 {
		t.Fatalf("empty file: %v %v, %d opens; want the empty hash and none", h, err, opens)
	}
	c.NoReuse = true
	if h, err := c.Sum(StatOf(&st), open); err != nil || h != HashBytes(nil) || opens != 1 {
		t.Fatalf("empty file with NoReuse: %v %v, %d opens; want the empty hash read once", h, err, opens)
	}
	c.NoReuse = false
	os.WriteFile(p, []byte("x"), 0o644)
	syscall.Stat(p, &st)
	if h, err := c.Sum(StatOf(&st), open); err != nil || h != HashBytes([]byte("x")) || opens != 2 {
		t.Fatalf("non-empty file: %v %v, %d opens", h, err, opens)
	}
}
