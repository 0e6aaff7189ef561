package tests

// xfstests' fsstress through the enforcing mount
// (docs/DESIGN.md#fsstress-findings): four processes of one session do
// random namespace and data operations on files they created themselves,
// so the guard must refuse nothing, and the tree they leave must be the one
// the same seed leaves on a plain directory.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// fsstressOff are the operations switched off: FUSE answers EOPNOTSUPP
// for them on every mount (fallocate collapse, insert and unshare ranges;
// RWF_DONTCACHE reads and writes), so a run through any FUSE mount
// differs from a native one there, whatever the guard does.
var fsstressOff = []string{"collapse", "insert", "unshare", "write_dontcache", "read_dontcache"}

// xfstestsTool returns the path of one prebuilt xfstests tool (fsstress,
// fsx), from the directory $RUBINOFS_XFSTESTS when it is set (and only
// there), else ../shared/tools/xfstests beside the repository (or beside
// the directory holding it, for a git worktree under it). A missing tool
// skips the test, naming what to set; with RUBINOFS_REQUIRE_XFSTESTS=1
// (.ci/run sets it when it found the tools) it fails it.
func xfstestsTool(t *testing.T, name string) string {
	t.Helper()
	cands := []string{filepath.Join("..", "..", "shared", "tools", "xfstests"),
		filepath.Join("..", "..", "..", "shared", "tools", "xfstests")}
	if d := os.Getenv("RUBINOFS_XFSTESTS"); d != "" {
		cands = []string{d}
	}
	for _, d := range cands {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() {
			abs, err := filepath.Abs(filepath.Join(d, name))
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	msg := fmt.Sprintf("xfstests %s not found in %s: set RUBINOFS_XFSTESTS to the directory of the xfstests builds",
		name, strings.Join(cands, " or "))
	if os.Getenv("RUBINOFS_REQUIRE_XFSTESTS") == "1" {
		t.Fatal("RUBINOFS_REQUIRE_XFSTESTS=1 but " + msg)
	}
	t.Skip(msg)
	return ""
}

// fsstressRuns returns how many seeds TestFsstress runs and how many
// operations each process does: by default one seed of 300 (about 30 s
// under -race on two cores, where a run of 2000 takes two minutes);
// RUBINOFS_FSSTRESS_SEEDS=N runs seeds 1..N of 2000 operations each (20
// for the full check).
func fsstressRuns(t *testing.T) (seeds, ops int) {
	s := os.Getenv("RUBINOFS_FSSTRESS_SEEDS")
	if s == "" {
		return 1, 300
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("RUBINOFS_FSSTRESS_SEEDS=%q: want a count of seeds, 1 or more", s)
	}
	return v, 2000
}

// fsstressArgs are fsstress's arguments for one run of seed into dir,
// ops operations per process.
func fsstressArgs(seed, ops int, dir string) []string {
	args := []string{"-p", "4", "-n", strconv.Itoa(ops), "-s", strconv.Itoa(seed), "-d", dir, "-v"}
	for _, op := range fsstressOff {
		args = append(args, "-f", op+"=0")
	}
	return args
}

// TestFsstress runs fsstress for several seeds natively and in one session
// of an enforcing mount, and asserts 0 refusals and the same tree
// (content, type, mode, owner, link count, size, symlink target, xattrs).
func TestFsstress(t *testing.T) {
	bin := xfstestsTool(t, "fsstress")
	m := newMount(t, nil, nil)
	t.Cleanup(func() { clearInodeFlags(m.ws) })
	native := t.TempDir()
	seeds, ops := fsstressRuns(t)
	for seed := 1; seed <= seeds; seed++ {
		name := fmt.Sprintf("s%d", seed)
		ctx, cancel := context.WithTimeout(context.Background(), tortureHang)
		nout, err := runTortureTool(ctx, t, bin, fsstressArgs(seed, ops, filepath.Join(native, name))...)
		cancel()
		if err != nil {
			t.Skipf("fsstress seed %d fails on a plain directory (%v), so not the mount's:\n%s", seed, err, tail(nout, 20))
		}
		var mout string
		for try := 0; try < 3; try++ {
			// A loaded machine can make registering the session answer
			// EAGAIN (a /proc read of the caller not done in time,
			// docs/DESIGN.md#no-wait-on-caller): nothing ran, try again.
			ctx, cancel = context.WithTimeout(context.Background(), tortureHang)
			mout, err = runTortureTool(ctx, t, rubinofsBin(t), append([]string{"run", "--mount", m.mnt, "--", bin},
				fsstressArgs(seed, ops, m.path(name))...)...)
			cancel()
			if err == nil || !strings.Contains(mout, "registering the session") {
				break
			}
		}
		if err != nil {
			t.Errorf("fsstress seed %d through the mount: %v\n%s", seed, err, tail(mout, 20))
		}
		if refused := fsstressRefused(mout); len(refused) > 0 {
			t.Errorf("seed %d: %d operations got EACCES through the mount:\n%s", seed, len(refused), strings.Join(refused, "\n"))
		}
		if d := diffTrees(filepath.Join(native, name), m.backing(name)); d != "" {
			t.Errorf("seed %d: the tree through the mount differs from the native one:\n%s", seed, d)
		}
	}
	m.mappedStores = true // fsstress's mwrite
	m.assertUntouched(t, "")
}

// fsstressRefused returns fsstress's -v lines of operations that failed
// with EACCES (13), the guard's refusal.
func fsstressRefused(out string) []string {
	var refused []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, " 13") && strings.Count(l, "/") > 0 && !strings.Contains(l, "value length 13") {
			refused = append(refused, l)
		}
	}
	return refused
}

// tail returns the last n lines of out.
func tail(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// treeOf describes every entry under root by its path: type, permission
// bits, owner, link count, and for a regular file its size and content
// hash, for a symlink its target, for a device its number; then its
// extended attributes, sorted. Directory sizes and timestamps are left
// out: they differ between file systems and runs.
func treeOf(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %o %d:%d", typeName(st.Mode), st.Mode&07777, st.Uid, st.Gid)
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			fmt.Fprintf(&b, " nlink=%d", st.Nlink)
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " size=%d xxh3=%016x", len(data), xxh3.Hash(data))
		case syscall.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %q", target)
		case syscall.S_IFCHR, syscall.S_IFBLK:
			fmt.Fprintf(&b, " rdev=%d", st.Rdev)
		}
		b.WriteString(xattrsOf(p))
		out[rel] = b.String()
		return nil
	})
	return out, err
}

// xattrsOf lists p's extended attributes (not following a symlink) as
// " name=value" in name order.
func xattrsOf(p string) string {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n == 0 {
		return ""
	}
	names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		v := make([]byte, 64<<10)
		vn, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			fmt.Fprintf(&b, " %s:%v", name, err)
			continue
		}
		fmt.Fprintf(&b, " %s=%016x", name, xxh3.Hash(v[:vn]))
	}
	return b.String()
}

// diffTrees compares the trees under want and got (treeOf) and returns
// their differences, at most 20 lines, or "" when they are the same.
func diffTrees(want, got string) string {
	w, err := treeOf(want)
	if err != nil {
		return "native tree: " + err.Error()
	}
	g, err := treeOf(got)
	if err != nil {
		return "tree through the mount: " + err.Error()
	}
	var paths []string
	for p := range w {
		paths = append(paths, p)
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var d bytes.Buffer
	n := 0
	for _, p := range paths {
		if w[p] == g[p] {
			continue
		}
		if n++; n <= 20 {
			fmt.Fprintf(&d, "%s:\n  native: %s\n  mount:  %s\n", p, orNone(w[p]), orNone(g[p]))
		}
	}
	if n > 20 {
		fmt.Fprintf(&d, "... %d differences in all (%d entries natively, %d through the mount)\n", n, len(w), len(g))
	}
	return d.String()
}

// orNone is s, or "(none)" when empty.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
