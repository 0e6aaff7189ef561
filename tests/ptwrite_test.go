package tests

import (
	"os"
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

// TestPassthroughMappedStoresSameSession: while another session holds a
// file open read-only (passthrough), one process of a session stores
// through a shared mapping of its read-write handle and keeps the handle
// open (nothing credited yet); another process of the same session then
// opens the file read-write, which is decided at open
// (docs/DESIGN.md#passthrough-mmap-credit): the first process's stores are
// the session's own, so the open passes, and so do its mapped store and a
// write(2) after. A session that read the file before the stores is
// refused the same open: two sessions always make each other stale.
func TestPassthroughMappedStoresSameSession(t *testing.T) {
	const orig = "0123456789\n"
	m := newMount(t, map[string]string{"f": orig}, nil)
	script := m.tmp + "/mapstore.py"
	if err := os.WriteFile(script, []byte(mapStore), 0o644); err != nil {
		t.Fatal(err)
	}
	a, reader, other := m.startAgent("writer"), m.startAgent("reader"), m.startAgent("other")
	a.ok("cat f >/dev/null")
	other.ok("cat f >/dev/null")
	reader.ok("exec 6<f") // held open read-only: a passthrough handle
	p1 := startHolder(t, m, a, "f")
	p1.want("ok ", "open a rw")
	p1.want("ok ", "mstore a XY")
	if got := m.readBacking("f"); got != "XY"+orig[2:] {
		t.Fatalf("backing after the first process's mapped store: %q", got)
	}
	// The second process of the session: open, map, store "M" at 0, then
	// a write(2) of "Z" at 2.
	a.ok("python3 " + shq(script) + " f none && printf Z | dd of=f bs=1 seek=2 conv=notrunc status=none")
	if got := m.readBacking("f"); got != "MYZ"+orig[3:] {
		t.Fatalf("backing after the second process's store and write: %q", got)
	}
	if rc := other.run("python3 " + shq(script) + " f none"); rc != "rc=4 session=other" {
		t.Errorf("read-write open by a session whose read is stale: %s, want it refused (rc=4)", rc)
	}
	p1.want("ok ", "close a")
	for _, d := range m.denials() {
		if d["session"] != "other" {
			t.Errorf("refused in the writing session: %v", d)
		}
	}
}

// TestPassthroughMappedStoresOutsideEvent: a session's stores through a
// shared mapping of its read-write passthrough handle are credited at
// close although the watcher reported an outside change of the file while
// the handle was open (docs/DESIGN.md#passthrough-mmap-credit): a store
// raises no inotify event and moves the file's stat under the event of
// the session's own earlier write, which the watcher then takes for an
// outside one (fsstress: write, a mapped store, then fallocate was refused
// as stale). The outside write here rewrites bytes the file already has,
// so the session has seen every byte it then writes after.
func TestPassthroughMappedStoresOutsideEvent(t *testing.T) {
	const orig = "0123456789\n"
	m := newMount(t, map[string]string{"f": orig}, nil)
	a, reader := m.startAgent("writer"), m.startAgent("reader")
	a.ok("cat f >/dev/null")
	reader.ok("exec 6<f") // held open read-only: a passthrough handle
	p := startHolder(t, m, a, "f")
	p.want("ok ", "open a rw")
	p.want("ok ", "mstore a XY")
	mark := m.appliedMark()
	f, err := os.OpenFile(m.backing("f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(orig[5:7]), 5); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.waitApplied(mark, "f")
	p.want("ok ", "close a")
	a.ok("printf Z | dd of=f bs=1 seek=2 conv=notrunc status=none")
	if got := m.readBacking("f"); got != "XYZ"+orig[3:] {
		t.Errorf("backing after the store, the outside event and the write: %q", got)
	}
	for _, d := range m.denials() {
		t.Errorf("refused in the writing session: %v", d)
	}
}
