package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Hashing without reading back, and never in front of the first byte
// (docs/DESIGN.md#lazy-hash).

// bigContent is n bytes of varied content (not one repeated byte).
func bigContent(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %08d of the big file\n", i)
	}
	return b.String()[:n]
}

// TestOwnWriteCopyNoReadBack: `cp -r` into the mount writes every file in
// order from offset 0, so each own write is credited from the bytes hashed
// as they passed: nothing is read back, and the session may overwrite every
// file it wrote.
func TestOwnWriteCopyNoReadBack(t *testing.T) {
	m := newMount(t, nil, nil)
	src := filepath.Join(m.tmp, "src")
	files := map[string]string{
		"a.txt":          "alpha\n",
		"dir/b.txt":      "beta\n",
		"dir/sub/c.bin":  bigContent(3<<20 + 17),
		"dir/sub/d.txt":  bigContent(70_000),
		"dir/empty.txt":  "",
		"dir/sub/e.json": `{"k": 1}` + "\n",
	}
	for rel, c := range files {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := m.d.Guard.Counts().Hash
	m.mustSh("cp -r " + shq(src) + " copy")
	after := m.d.Guard.Counts().Hash
	if d := after.ReadBackBytes - before.ReadBackBytes; d != 0 {
		t.Errorf("cp -r read back %d bytes to credit its writes, want 0", d)
	}
	if d := after.Streamed - before.Streamed; d < uint64(len(files)-1) {
		t.Errorf("%d writes credited as they passed, want >= %d (every non-empty file)", d, len(files)-1)
	}
	if d := after.HashedBytes - before.HashedBytes; d != 0 {
		t.Errorf("cp -r hashed %d bytes by reading, want 0", d)
	}
	for rel := range files {
		m.mustSh("printf 'overwritten\\n' > " + shq("copy/"+rel))
		if got := m.readBacking("copy/" + rel); got != "overwritten\n" {
			t.Errorf("copy/%s = %q after the overwrite", rel, got)
		}
	}
}

// TestOwnWriteStreamedThenReadHashesNothing: a file the session wrote in
// order and then reads back through the mount costs no hash at all (the
// read adds nothing to the own write's record), and the session may
// overwrite it; after another session's change, it may not.
func TestOwnWriteStreamedThenReadHashesNothing(t *testing.T) {
	m := newMount(t, nil, nil)
	big := bigContent(2 << 20)
	src := filepath.Join(m.tmp, "big.src")
	if err := os.WriteFile(src, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	before := m.d.Guard.Counts().Hash
	m.mustSh("cp " + shq(src) + " big.bin && cat big.bin > /dev/null")
	if d := m.d.Guard.Counts().Hash.HashedBytes - before.HashedBytes; d != 0 {
		t.Errorf("writing and reading back the file hashed %d bytes by reading, want 0", d)
	}
	m.mustSh("printf 'x' >> big.bin")
	m.writeBacking("big.bin", "changed outside\n")
	mark := m.appliedMark()
	m.waitApplied(mark, "big.bin")
	m.mustFail("printf 'y' > big.bin")
}

// waitNotRacy returns once the backing file rel's mtime and ctime lie more
// than the guard's timestamp granularity (10 ms on the local file systems
// tests run on) in the past: the rule under test is a rule about the
// clock, so the test waits for the clock, not for another process.
func waitNotRacy(t *testing.T, m *mount, rel string) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(m.backing(rel), &st); err != nil {
		t.Fatal(err)
	}
	newest := time.Unix(0, max(st.Mtim.Nano(), st.Ctim.Nano()))
	if d := time.Until(newest.Add(50 * time.Millisecond)); d > 0 {
		time.Sleep(d)
	}
}

// TestLazyHashLargeRead: the first read of a large file registers at once
// and defers its hash; a later overwrite by the same session is allowed,
// and an overwrite after an outside change is refused as stale.
func TestLazyHashLargeRead(t *testing.T) {
	big := bigContent(8 << 20)
	m := newMount(t, map[string]string{"big.txt": big, "big2.txt": big}, nil)
	waitNotRacy(t, m, "big.txt")
	waitNotRacy(t, m, "big2.txt")

	before := m.d.Guard.Counts().Hash
	m.mustSh("head -c 1 big.txt > /dev/null && head -c 1 big2.txt > /dev/null")
	if d := m.d.Guard.Counts().Hash.Deferred - before.Deferred; d != 2 {
		t.Fatalf("%d reads deferred their hash, want 2", d)
	}

	// Read, then overwrite by the same session: allowed.
	m.mustSh("printf 'new\\n' > big.txt")
	if got := m.readBacking("big.txt"); got != "new\n" {
		t.Fatalf("big.txt = %q after the overwrite", got)
	}

	// Read, outside change, overwrite: refused as stale.
	mark := m.appliedMark()
	m.writeBacking("big2.txt", big[:len(big)-1]+"!")
	m.waitApplied(mark, "big2.txt")
	out := m.mustFail("printf 'new\\n' > big2.txt")
	if !strings.Contains(out, "ermission denied") {
		t.Errorf("overwrite after an outside change: %s, want EACCES", out)
	}
	if got := m.readBacking("big2.txt"); got != big[:len(big)-1]+"!" {
		t.Error("the refused overwrite changed big2.txt")
	}
	if c := m.d.Guard.Counts().Hash; c.DeferredLost-before.DeferredLost > 1 {
		t.Errorf("%d deferred hashes lost, want at most the changed file's", c.DeferredLost-before.DeferredLost)
	}
}

// TestGitCloneOwnWrites: a `git clone` into the mount leaves the session
// able to overwrite every file it checked out (own-write credit), and the
// checkout's files are credited without reading them back.
func TestGitCloneOwnWrites(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (Debian package git)")
	}
	m := newMount(t, nil, nil)
	origin := filepath.Join(m.tmp, "origin")
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, testEnv(m.tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(origin, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"README.md", "pkg/a.go", "pkg/b.go", "pkg/data.bin"}
	for i, n := range names {
		c := bigContent(1000 * (i + 1))
		if n == "pkg/data.bin" {
			c = bigContent(1 << 20)
		}
		if err := os.WriteFile(filepath.Join(origin, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(origin, "init", "-q", "-b", "main")
	run(origin, "add", "-A")
	run(origin, "commit", "-qm", "init")

	before := m.d.Guard.Counts().Hash
	m.mustSh("git clone -q " + shq(origin) + " clone")
	after := m.d.Guard.Counts().Hash
	t.Logf("clone: %d writes credited as they passed (%d bytes), %d bytes read back",
		after.Streamed-before.Streamed, after.StreamedBytes-before.StreamedBytes, after.ReadBackBytes-before.ReadBackBytes)
	if d := after.Streamed - before.Streamed; d < uint64(len(names)) {
		t.Errorf("%d writes credited as they passed, want >= %d (the checked-out files)", d, len(names))
	}
	var checkedOut uint64
	for _, n := range names {
		fi, err := os.Stat(m.backing("clone/" + n))
		if err != nil {
			t.Fatal(err)
		}
		checkedOut += uint64(fi.Size())
	}
	if d := after.ReadBackBytes - before.ReadBackBytes; d >= checkedOut {
		t.Errorf("clone read back %d bytes, the checked-out files alone are %d", d, checkedOut)
	}
	for _, n := range names {
		m.mustSh("printf 'edited\\n' > " + shq("clone/"+n))
	}
	if out := m.mustSh("cd clone && git status --porcelain"); !bytes.Contains([]byte(out), []byte("M pkg/a.go")) {
		t.Errorf("git status after the edits: %q", out)
	}
}
