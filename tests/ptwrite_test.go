package tests

import (
	"strings"
	"testing"
)

// mappedStore is a python3 program run in the mount: with a read-only
// handle of the file argv[1] held open (a passthrough reader), it opens
// the file read-write (a passthrough handle too: the kernel admits no
// other kind while one is open), stores "ZZZZ" at offset 0 through a
// shared writable mapping and closes everything. The stores reach the
// backing file without a WRITE to the daemon.
const mappedStore = `
import mmap, os, sys
p = sys.argv[1]
r = os.open(p, os.O_RDONLY); os.read(r, 1)
w = os.open(p, os.O_RDWR)
m = mmap.mmap(w, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:4] = b"ZZZZ"
m.close(); os.close(w); os.close(r)
`

// TestPassthroughMappedStoresCredited: stores through a shared mapping of
// a read-write passthrough handle are the session's own change
// (docs/DESIGN.md#passthrough-mmap-credit): the session may write the file
// afterwards, as fsstress's `mwrite` then `write` does; another session
// that had read the file may not, until it reads again.
func TestPassthroughMappedStoresCredited(t *testing.T) {
	m := newMount(t, map[string]string{"shared.txt": strings.Repeat("s", 8192)}, nil)
	m.mustSh("cat shared.txt > /dev/null") // the default session reads it
	store := ` && python3 -c '` + mappedStore + `' `
	script := "cd " + shq(m.mnt) + ` && head -c 8192 /dev/zero | tr "\0" o > own.txt` +
		store + `own.txt && printf appended >> own.txt` +
		` && cat shared.txt > /dev/null` + store + `shared.txt && printf appended >> shared.txt`
	if out, err := cli(t, m.tmp, "run", "--mount", m.mnt, "--", "/bin/sh", "-c", script); err != nil {
		t.Fatalf("a session's writes after its own mapped stores: %v\n%s", err, out)
	}
	if got := m.readBacking("own.txt"); got != "ZZZZ"+strings.Repeat("o", 8188)+"appended" {
		t.Errorf("own.txt = %.20q... (%d bytes)", got, len(got))
	}
	if got := m.readBacking("shared.txt"); got != "ZZZZ"+strings.Repeat("s", 8188)+"appended" {
		t.Errorf("shared.txt = %.20q... (%d bytes)", got, len(got))
	}
	for _, d := range m.denials() {
		t.Errorf("refused in the session: %v", d)
	}
	// The default session read shared.txt before the other session's
	// mapped stores: its record is stale.
	m.mustFail("printf x >> shared.txt")
	if got := m.readBacking("shared.txt"); strings.HasSuffix(got, "x") {
		t.Error("the refused append changed shared.txt")
	}
}
