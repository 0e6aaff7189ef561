package tests

import (
	"os"
	"testing"
)

// mapStore is a python3 script: it opens argv[1] read-write, optionally
// reads it first (argv[2] == "read"), maps it MAP_SHARED, stores b"M" at
// offset 0 and msyncs. It prints "mmap-failed ERRNO" when mmap(2) itself
// is refused and "stored" when the store and msync returned; a store the
// kernel answers with SIGBUS kills it (exit status -7 to Go).
const mapStore = `
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
if sys.argv[2] == "read":
    os.read(fd, 1 << 20)
try:
    mm = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
except OSError as e:
    print("mmap-failed", e.errno)
    sys.exit(3)
mm[0:1] = b"M"
mm.flush()
mm.close()
os.close(fd)
print("stored")
`

// TestMmapStoreUnreadRefused: a store through a shared writable mapping of
// a file the session never read (or read before another session changed
// it) is refused, as dd conv=notrunc is: the
// page-in READ the store causes is not the session's read, and it is
// answered with EACCES, so the store gets SIGBUS and the file stays byte
// for byte as it was. After reading the file the same store passes, and a
// file the session created itself stays its own when written through a
// mapping: its next write(2) is not refused. docs/DESIGN.md#mmap-page-in
func TestMmapStoreUnreadRefused(t *testing.T) {
	const orig = "0123456789abcdef\n"
	m := newMount(t, map[string]string{"unread": orig, "readfirst": orig, "stale": orig}, nil)
	script := m.tmp + "/mapstore.py"
	if err := os.WriteFile(script, []byte(mapStore), 0o644); err != nil {
		t.Fatal(err)
	}
	a := m.startAgent("mapper")

	// The guard's verdict on the same blind overwrite by write(2).
	a.refused("printf X | dd of=unread conv=notrunc status=none")
	// SIGBUS: the shell reports 128+7.
	if rc := a.run("python3 " + shq(script) + " unread none"); rc != "rc=135 session=mapper" {
		t.Fatalf("mapped store into an unread file: %s, want SIGBUS (rc=135)", rc)
	}
	if got := m.readBacking("unread"); got != orig {
		t.Fatalf("unread file changed by a refused mapped store: %q", got)
	}
	if got, err := os.ReadFile(m.path("unread")); err != nil || string(got) != orig {
		t.Fatalf("unread file through the mount after the refused store: %q, %v", got, err)
	}
	// Still unread: the page-in of the refused store did not count.
	a.refused("printf X | dd of=unread conv=notrunc status=none")

	// Read first (another handle), then map and store: allowed.
	a.ok("cat readfirst >/dev/null && python3 " + shq(script) + " readfirst none")
	if got := m.readBacking("readfirst"); got != "M"+orig[1:] {
		t.Fatalf("read file after the mapped store: %q", got)
	}
	// Read through the mapped handle itself: allowed too.
	a.ok("python3 " + shq(script) + " unread read")
	if got := m.readBacking("unread"); got != "M"+orig[1:] {
		t.Fatalf("file read through its handle, after the mapped store: %q", got)
	}

	// Read, then changed by another session: stale, refused alike.
	b := m.startAgent("other")
	a.ok("cat stale >/dev/null")
	b.ok("cat stale >/dev/null && printf Y | dd of=stale conv=notrunc status=none")
	if rc := a.run("python3 " + shq(script) + " stale none"); rc != "rc=135 session=mapper" {
		t.Fatalf("mapped store into a stale file: %s, want SIGBUS (rc=135)", rc)
	}
	if got := m.readBacking("stale"); got != "Y"+orig[1:] {
		t.Fatalf("stale file after the refused mapped store: %q", got)
	}

	// The session's own file, written through a mapping, stays its own.
	a.ok("printf 'own file\\n' > own && python3 " + shq(script) + " own none && printf Z | dd of=own conv=notrunc status=none")
	if got := m.readBacking("own"); got != "Zwn file\n" {
		t.Fatalf("own file after the mapped store and write: %q", got)
	}
}
