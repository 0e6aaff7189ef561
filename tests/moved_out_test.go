package tests

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
)

// TestExternalSwapLeavesNoStalePath: a process holds a descriptor of
// directory a through the mount, and outside the mount a and c trade
// names (renameat2 RENAME_EXCHANGE, as a second `mv a b; mv c a` would
// leave them). Natively the descriptor still reaches the directory that
// was a, now at c. Through the mount the daemon reaches a directory by
// the path its inode tree records; before the watcher took the old node
// out of the tree, that path was still "a", so a lookup, a create or a
// mkdir through the descriptor reached the other directory, c's, as the
// daemon (root), with the permission checks done on a's
// (docs/DESIGN.md#moved-out-of-tree). Now they fail (ENOENT, or ESTALE
// before the watcher applied the swap), as they do after a plain external
// move, and c's directory is untouched. With
// the watcher off the tree never learns of the swap: the request checks
// the directory its path led to (docs/DESIGN.md#dir-identity).
func TestExternalSwapLeavesNoStalePath(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch=%v", watch), func(t *testing.T) { externalSwap(t, watch) })
	}
}

func externalSwap(t *testing.T, watch bool) {
	m := newMount(t, map[string]string{"a/in_a.txt": "a\n", "c/in_c.txt": "c\n"}, func(c *daemon.Config) { c.Cache.Watch = watch })
	fd, err := unix.Open(m.path("a"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, "in_a.txt", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatalf("in_a.txt through the descriptor before the swap: %v", err)
	}
	mark := m.appliedMark()
	if err := unix.Renameat2(unix.AT_FDCWD, m.backing("a"), unix.AT_FDCWD, m.backing("c"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if watch {
		m.waitApplied(mark, "a")
	}

	// in_c.txt is in the directory now at a; the descriptor's own
	// directory (now at c) has no such name.
	if err := unix.Fstatat(fd, "in_c.txt", &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		t.Errorf("a lookup of in_c.txt through a's old descriptor found the other directory's file")
	}
	if nfd, err := unix.Openat(fd, "x", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644); err == nil {
		unix.Close(nfd)
	}
	if err := unix.Mkdirat(fd, "sub", 0o755); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESTALE) {
		t.Errorf("mkdir through a's old descriptor: %v, want success, ENOENT or ESTALE", err)
	}
	for _, name := range []string{"x", "sub"} {
		if _, err := os.Lstat(m.backing("a/" + name)); err == nil {
			t.Errorf("%s made through a's old descriptor landed in the other directory (backing a/%s)", name, name)
		}
	}
	// Both directories, by their names now, are as the swap left them.
	if got := m.readBacking("a/in_c.txt") + m.readBacking("c/in_a.txt"); got != "c\na\n" {
		t.Fatalf("after the swap: %q", got)
	}
}

// TestExternalReplaceByPathWatchOff: on a mount with no watcher and hour-long
// kernel caches, a directory and a file replaced outside the mount (mv d
// d.old; mkdir d; a new f renamed over f) are reached by path as natively:
// `touch d/x` makes d/x in the new d, `cat f` reads the new f, although
// the kernel's cached entries still name the old inodes. The daemon answers
// ESTALE for the old inode's path (docs/DESIGN.md#dir-identity), and the
// kernel looks the path up afresh and runs the call again.
func TestExternalReplaceByPathWatchOff(t *testing.T) {
	m := newMount(t, map[string]string{"d/old.txt": "old\n", "f": "old f\n"}, func(c *daemon.Config) { c.Cache.Watch = false })
	m.mustSh("cat d/old.txt f >/dev/null") // cached entries of d, d/old.txt and f
	if err := os.Rename(m.backing("d"), m.backing("d.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m.backing("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	m.writeBacking("f.new", "new f\n")
	if err := os.Rename(m.backing("f.new"), m.backing("f")); err != nil {
		t.Fatal(err)
	}
	if out, err := m.sh("touch d/x && cat f"); err != nil || out != "new f\n" {
		t.Fatalf("touch d/x and cat f after the external replacements: %q, %v; want the new f", out, err)
	}
	if _, err := os.Lstat(m.backing("d/x")); err != nil {
		t.Errorf("d/x is not in the new d: %v", err)
	}
	if _, err := os.Lstat(m.backing("d.old/x")); err == nil {
		t.Errorf("d/x landed in the old d (now d.old)")
	}
}

// TestExternalSwapAsNobody: the attacker's view. uid 65534 owns a and sits
// in it (its working directory, through an allow_other mount with no
// watcher); root's directory c (0755) and a trade names outside the mount.
// Natively nobody's creates would go into its own directory, now at c;
// nobody can never write into root's directory. Through the mount, before
// the checks of the request's directory (docs/DESIGN.md#dir-identity), the
// daemon made nobody's file and directory in root's c, now at a. Now both
// fail with ESTALE and root's directory is untouched.
func TestExternalSwapAsNobody(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	m := newSharedMount(t, map[string]string{"a/mine": "n\n", "c/secret": "root's\n"}, func(c *daemon.Config) {
		c.Cache.Watch = false
		for _, p := range []string{"a", "a/mine"} {
			if err := os.Lchown(filepath.Join(c.Workspace, p), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	})
	cmd := m.nobodyCmd(`cd "$MNT/a" && exec python3 -c '
import os, sys
print("in", flush=True)
sys.stdin.readline()
for what, op in (("create", lambda: os.close(os.open("x", os.O_CREAT | os.O_WRONLY, 0o644))),
                 ("mkdir", lambda: os.mkdir("m"))):
    try:
        op()
        print(what, "ok", flush=True)
    except OSError as e:
        print(what, os.strerror(e.errno), flush=True)
'`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "in\n" {
		t.Fatalf("nobody's worker: %q, %v", line, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, m.backing("a"), unix.AT_FDCWD, m.backing("c"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"create", "mkdir"} {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(line); got != what+" Stale file handle" {
			t.Errorf("nobody's %s in its old directory after the swap: %q, want ESTALE", what, got)
		}
	}
	for _, name := range []string{"x", "m"} {
		if _, err := os.Lstat(m.backing("a/" + name)); err == nil {
			t.Errorf("nobody's %s landed in root's directory (backing a/%s)", name, name)
		}
	}
}

// TestExternalReplaceOfOneLinkWatchOff: a and b are two names of one
// file, both looked up through a mount with no watcher (a last, so the
// file's node takes its path from a); a is replaced outside the mount.
// Natively b still names the first file, and reading it through the mount
// must give it, whichever name the node's path came from.
func TestExternalReplaceOfOneLinkWatchOff(t *testing.T) {
	for _, order := range []string{"ln b a && cat b a", "ln b a && cat a b"} {
		m := newMount(t, map[string]string{"b": "first\n"}, func(c *daemon.Config) { c.Cache.Watch = false })
		m.mustSh(order + " >/dev/null")
		m.writeBacking("a.new", "second\n")
		if err := os.Rename(m.backing("a.new"), m.backing("a")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if out, err := m.sh("cat b"); err != nil || out != "first\n" {
				t.Fatalf("%s; cat b after a was replaced outside the mount (%d): %q, %v; want the first file", order, i, out, err)
			}
		}
	}
}
