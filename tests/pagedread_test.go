package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
)

// TestPagedReadKeepsCache: a read-only open of a small watched file keeps
// the kernel's page cache instead of kernel passthrough (the shipped
// cache.paged_read_max). A second cat of every file sends no READ, and a
// stat after it no GETATTR: a page-cache hit leaves the attributes valid,
// where every passthrough read marks the inode's atime stale and the
// next stat asks the daemon. The guard still sees every open (a writer
// that did not read is refused), and a session's write through the mount
// reaches a reader holding the file open (the kernel drops the pages a
// direct-I/O write covers). docs/DESIGN.md#paged-reads
func TestPagedReadKeepsCache(t *testing.T) {
	const n = 200
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("d/f%03d", i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), 100)
	}
	m := newMount(t, files, func(c *daemon.Config) { c.Cache.PagedReadMax = config.DefaultPagedReadMax })
	a, b := m.startAgent("a"), m.startAgent("b")
	a.ok("cat d/* | wc -c >/dev/null && stat d/* >/dev/null") // fills the pages; the stat takes the attributes afresh
	before := scrapeMetrics(t, m)
	a.ok("cat d/* | wc -c >/dev/null && stat d/* >/dev/null")
	after := scrapeMetrics(t, m)
	delta := func(op string) float64 {
		x, _ := metricValue(after, "rubinofs_fuse_ops_total", "op", op)
		y, _ := metricValue(before, "rubinofs_fuse_ops_total", "op", op)
		return x - y
	}
	attrs := delta("getattr") + delta("statx") // stat(1) asks with statx
	t.Logf("second cat and stat of %d files: OPEN %v, READ %v, GETATTR+STATX %v", n, delta("open"), delta("read"), attrs)
	if d := delta("open"); d < n {
		t.Errorf("OPEN moved by %v, want >= %d: the guard must see every open", d, n)
	}
	// The scrapes of .rubino/metrics read through the daemon: a handful.
	if d := delta("read"); d >= n/10 {
		t.Errorf("READ moved by %v for %d files: the page cache was not kept", d, n)
	}
	if d := attrs; d >= n/10 {
		t.Errorf("GETATTR+STATX moved by %v for %d files: reads marked the attributes stale", d, n)
	}
	b.refused("printf x >> d/f002")
	// The reader holds d/f001 open with its pages cached while session a
	// rewrites and extends it through the mount; a fresh open must not
	// see the old pages.
	out := filepath.Join(m.tmp, "out")
	a.ok(fmt.Sprintf(`exec 3<d/f001; head -c 4 <&3 >/dev/null; printf 'new\n' > d/f001; cat d/f001 > %[1]s; printf 'more\n' >> d/f001; cat d/f001 >> %[1]s; exec 3<&-`, shq(out)))
	if got, want := readFile(t, out), "new\nnew\nmore\n"; got != want {
		t.Fatalf("reads after writes through the mount: %q, want %q", got, want)
	}
	if got := m.readBacking("d/f002"); got != files["d/f002"] {
		t.Fatalf("refused append changed d/f002: %q", got)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
