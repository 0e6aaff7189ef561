package tests

import "testing"

// TestScannerReadOfOwnWriteHashesNothing: grep (a scanner) reading a file
// its session has just written through the mount takes the session's
// hash: the hash cache is not asked, the file is not read back
// (docs/DESIGN.md#scanner-known-hash). A file written outside the mount
// is hashed at grep's read, as before.
func TestScannerReadOfOwnWriteHashesNothing(t *testing.T) {
	m := newMount(t, map[string]string{"outside.txt": "from outside\n"}, nil)
	m.mustSh("printf 'mine\\n' > own.txt")
	misses := func() float64 {
		v, ok := metricValue(scrapeMetrics(t, m), "rubinofs_hash_cache_misses_total")
		if !ok {
			t.Fatal("no rubinofs_hash_cache_misses_total sample")
		}
		return v
	}
	before := misses()
	m.mustSh("grep -q mine own.txt")
	if d := misses() - before; d != 0 {
		t.Fatalf("grep's read of the session's own write hashed the file (%v misses)", d)
	}
	before = misses()
	m.mustSh("grep -q outside outside.txt")
	if d := misses() - before; d != 1 {
		t.Fatalf("grep's read of a file written outside: %v misses, want 1", d)
	}
}
