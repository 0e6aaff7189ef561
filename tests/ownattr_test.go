package tests

import (
	"fmt"
	"strings"
	"testing"
)

// TestOwnAttrChangeKeepsDeferredRead: a read of a large file whose hash is
// still deferred survives the session's own change of the file's
// attributes through the mount (docs/DESIGN.md#own-attr-change). Each of
// these sets the ctime, so a hash taken after it is not under the read's
// stat; fsstress (`read` then `chown`, then `fallocate` or `write`) was
// refused as `stale` on its own files that way. The background hasher is
// held off (Guard.PauseDeferred), so every read is still pending when the
// change comes, as it was under fsstress's load.
func TestOwnAttrChangeKeepsDeferredRead(t *testing.T) {
	ops := []struct{ name, script string }{
		{"chmod", "chmod 600 f"},
		{"chown", "chown 1:1 f"},
		{"utimens", "touch f"},
		{"setxattr", `python3 -c 'import os; os.setxattr("f", "user.x", b"1")'`},
		{"link", "ln f f.link"},
		{"rename", "mv f g && mv g f"},
		{"unlink-other-name", "ln f f.2 && rm f.2"},
	}
	big := bigContent(2 << 20)
	files := map[string]string{}
	for _, op := range ops {
		files[op.name+"/f"] = big
	}
	files["xl/a"], files["xl/b"] = big, "small\n"
	files["xm/d1/f"], files["xn/d1/f"] = big, big
	m := newMount(t, files, nil)
	for _, op := range ops {
		waitNotRacy(t, m, op.name+"/f")
	}
	waitNotRacy(t, m, "xl/a")
	waitNotRacy(t, m, "xm/d1/f")
	waitNotRacy(t, m, "xn/d1/f")
	resume := m.d.Guard.PauseDeferred()
	defer resume()
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			before := m.d.Guard.Counts().Hash
			m.mustSh(fmt.Sprintf("cd %s && head -c 1 f > /dev/null", op.name))
			if d := m.d.Guard.Counts().Hash.Deferred - before.Deferred; d != 1 {
				t.Fatalf("%d reads deferred their hash, want 1", d)
			}
			m.mustSh(fmt.Sprintf("cd %s && %s", op.name, op.script))
			if out, err := m.sh(fmt.Sprintf("cd %s && printf 'appended\\n' >> f", op.name)); err != nil {
				t.Fatalf("append after the session's own %s: %v %s, want allowed", op.name, err, out)
			}
			if got := m.readBacking(op.name + "/f"); !strings.HasSuffix(got, "appended\n") || len(got) != len(big)+len("appended\n") {
				t.Fatalf("%s/f has %d bytes after the append", op.name, len(got))
			}
			if c := m.d.Guard.Counts().Hash; c.DeferredLost != before.DeferredLost {
				t.Errorf("%d deferred hashes lost, want none", c.DeferredLost-before.DeferredLost)
			}
		})
	}
	// A hard-linked file whose node was first known by a name that an
	// exchange has given to another file since: the change through its
	// other name must settle the read all the same (fsstress: clonerange
	// from one name, setfattr and rename of the other, writev).
	t.Run("hardlink-after-exchange", func(t *testing.T) {
		const exchange = `import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); ` +
			`r = libc.syscall(316, -100, b"a", -100, b"b", 2); assert r == 0, os.strerror(ctypes.get_errno())`
		m.mustSh("cd xl && cat a b > /dev/null && python3 -c '" + exchange + "' && ln b c")
		// The link moved the file's ctime: a read within the hash cache's
		// granularity of it is hashed at once, not deferred.
		waitNotRacy(t, m, "xl/c")
		before := m.d.Guard.Counts().Hash
		m.mustSh("cd xl && head -c 1 c > /dev/null")
		if d := m.d.Guard.Counts().Hash.Deferred - before.Deferred; d != 1 {
			t.Fatalf("%d reads deferred their hash, want 1", d)
		}
		m.mustSh(`cd xl && python3 -c 'import os; os.setxattr("b", "user.x", b"1")'`)
		if out, err := m.sh("cd xl && printf 'appended\\n' >> c"); err != nil {
			t.Fatalf("append after the session's own setxattr through the other name: %v %s, want allowed", err, out)
		}
	})
	// The read's own name leads to another file by the time the change
	// comes (its directory renamed and the name made again), so the
	// change must settle the read through its own file, by the node's
	// path (fsstress: a read, a rename of a directory above, a chown, a
	// link or a setfattr through the new name, a write).
	for _, tc := range []struct{ dir, change, write string }{
		{"xm", "chmod 600 d2/f", "d2/f"},
		{"xn", `ln d2/f g && python3 -c 'import os; os.setxattr("g", "user.x", b"1")'`, "g"},
	} {
		t.Run("read-name-elsewhere-"+tc.dir, func(t *testing.T) {
			before := m.d.Guard.Counts().Hash
			m.mustSh(fmt.Sprintf("cd %s && head -c 1 d1/f > /dev/null", tc.dir))
			if d := m.d.Guard.Counts().Hash.Deferred - before.Deferred; d != 1 {
				t.Fatalf("%d reads deferred their hash, want 1", d)
			}
			m.mustSh(fmt.Sprintf("cd %s && mv d1 d2 && mkdir d1 && echo another > d1/f && %s", tc.dir, tc.change))
			if out, err := m.sh(fmt.Sprintf("cd %s && printf 'appended\\n' >> %s", tc.dir, tc.write)); err != nil {
				t.Fatalf("append after the session's own change through %s: %v %s, want allowed", tc.write, err, out)
			}
			if c := m.d.Guard.Counts().Hash; c.DeferredLost != before.DeferredLost {
				t.Errorf("%d deferred hashes lost, want none", c.DeferredLost-before.DeferredLost)
			}
		})
	}
	m.assertUntouched(t, "")
}
