package tests

import (
	"os"
	"testing"
)

// mapStore is a python3 script: it opens argv[1] read-write, optionally
// reads it first (argv[2] == "read"), maps it MAP_SHARED, stores b"M" at
// offset 0 and msyncs. It exits 4 when open(2) is refused with EACCES,
// 3 when mmap(2) itself is refused, and 0 when the store and msync
// returned; a store the kernel answers with SIGBUS kills it (exit status
// -7 to Go, 135 in the shell).
const mapStore = `
import errno, mmap, os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDWR)
except OSError as e:
    print("open-failed", e.errno)
    sys.exit(4 if e.errno == errno.EACCES else 5)
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

// TestMmapStorePassthroughRefused is TestMmapStoreUnreadRefused while
// another session holds the file open for reading, a kernel passthrough
// handle: every open of the inode is then a passthrough one, and a shared
// mapping of it maps the backing file itself, so no page-in READ reaches
// the daemon to refuse. The read-write open of a session whose view of
// the file is missing (never read) or stale (changed by another session
// since) is refused instead, with EACCES, and the file stays as it was;
// a session that read the file, and a session's own file, keep their
// mapped stores, and their next write(2) passes.
// docs/DESIGN.md#passthrough-mmap-credit, docs/DESIGN.md#mmap-page-in
func TestMmapStorePassthroughRefused(t *testing.T) {
	const orig = "0123456789abcdef\n"
	m := newMount(t, map[string]string{"unread": orig, "stale": orig, "fresh": orig}, nil)
	script := m.tmp + "/mapstore.py"
	if err := os.WriteFile(script, []byte(mapStore), 0o644); err != nil {
		t.Fatal(err)
	}
	a, reader, other := m.startAgent("mapper"), m.startAgent("reader"), m.startAgent("other")
	a.ok("cat stale fresh >/dev/null && printf 'own file\\n' > own")
	other.ok("cat stale >/dev/null && printf Y | dd of=stale conv=notrunc status=none")
	// The reader holds every file open read-only (passthrough handles) in
	// its shell until the test ends.
	reader.ok("exec 6<unread 7<stale 8<fresh 9<own")

	for _, c := range []struct{ name, want string }{{"unread", orig}, {"stale", "Y" + orig[1:]}} {
		if rc := a.run("python3 " + shq(script) + " " + c.name + " none"); rc != "rc=4 session=mapper" {
			t.Errorf("mapped store into the %s file held by a passthrough reader: %s, want the open refused (rc=4)", c.name, rc)
		}
		if got := m.readBacking(c.name); got != c.want {
			t.Errorf("%s file changed by a mapped store: %q, want %q", c.name, got, c.want)
		}
	}
	// Still unread and stale: the refused opens registered nothing.
	a.refused("printf X | dd of=unread conv=notrunc status=none")
	a.refused("printf X | dd of=stale conv=notrunc status=none")

	// A file the session read, and its own file, are its own to map.
	for _, name := range []string{"fresh", "own"} {
		a.ok("python3 " + shq(script) + " " + name + " none && printf Z | dd of=" + name + " bs=1 seek=1 conv=notrunc status=none")
	}
	if got := m.readBacking("fresh"); got != "MZ"+orig[2:] {
		t.Errorf("fresh file after the mapped store and write: %q", got)
	}
	if got := m.readBacking("own"); got != "MZn file\n" {
		t.Errorf("own file after the mapped store and write: %q", got)
	}
}
