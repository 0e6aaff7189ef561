package tests

import (
	"strings"
	"testing"
)

// TestMixedOpens holds a file open in one process while another process
// opens it in the other direction, for a guarded and for an exempt
// (git-ignored, passthrough-capable) file. The kernel refuses with EIO an
// open whose passthrough mode conflicts with one already held on the inode
// (fs/fuse/iomode.c); rubinofs must choose modes so that never happens, and
// the holder must see the other process's bytes.
func TestMixedOpens(t *testing.T) {
	m := newMount(t, map[string]string{
		".gitignore":  "build/\n",
		"guarded.txt": "v1\n",
		"build/out":   "v1\n",
	}, nil)
	// The holder runs the other command itself between its two reads, so
	// the two processes are ordered by events, never by sleeps.
	const holder = `
import os, subprocess, sys
path, other, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "reader":
    fd = os.open(path, os.O_RDONLY)
    assert os.pread(fd, 100, 0) == b"v1\n"
    subprocess.run(["/bin/sh", "-c", other], check=True)
    got = os.pread(fd, 100, 0)
    assert got == b"v2\n", got
else:
    with open(path, "r") as f: f.read()      # the writer reads first
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"v3\n")
    out = subprocess.run(["/bin/sh", "-c", other], check=True, capture_output=True).stdout
    assert out == b"v3\n", out
    os.write(fd, b"more\n")
    os.close(fd)
print("ok")
`
	for _, f := range []string{"guarded.txt", "build/out"} {
		t.Run(f, func(t *testing.T) {
			out := m.mustSh("python3 -c '" + holder + "' " + f + " 'cat " + f + " >/dev/null && printf \"v2\\n\" > " + f + "' reader")
			if !strings.Contains(out, "ok") {
				t.Fatalf("reader holder: %s", out)
			}
			out = m.mustSh("python3 -c '" + holder + "' " + f + " 'cat " + f + "' writer")
			if !strings.Contains(out, "ok") {
				t.Fatalf("writer holder: %s", out)
			}
			if got := m.readBacking(f); got != "v3\nmore\n" {
				t.Fatalf("backing content %q", got)
			}
		})
	}
}
