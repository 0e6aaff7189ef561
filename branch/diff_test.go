package branch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// tree writes files into root: a name ending in "/" is a directory, a
// content starting with "->" a symlink, else a file of mode 0644.
func tree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		c := files[n]
		if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
			os.Remove(p) // replaced: a symlink is not written through
		}
		var err error
		switch {
		case strings.HasSuffix(n, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(c, "->"):
			err = os.Symlink(c[2:], p)
		default:
			err = os.WriteFile(p, []byte(c), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func whiteout(t *testing.T, p string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
}

func setxattr(t *testing.T, p, name, val string) {
	t.Helper()
	if err := unix.Lsetxattr(p, name, []byte(val), 0); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// gitDiff runs `git diff --no-index` of a against b (args before the two
// directories) and returns its output with the paths made a/P and b/P,
// the index lines dropped and the hunk headers' function context cut, the
// parts this package does not print.
func gitDiff(t *testing.T, a, b string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append(append([]string{"-c", "core.quotepath=false", "diff", "--no-index", "--no-renames", "--no-ext-diff", "--no-color"}, args...), "--", filepath.Base(a), filepath.Base(b))...)
	cmd.Dir = filepath.Dir(a)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		t.Fatalf("git diff: %v", err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(out), "\n") {
		for _, d := range []string{filepath.Base(a), filepath.Base(b)} { // a deletion is a/A/P b/A/P
			l = strings.ReplaceAll(l, "a/"+d+"/", "a/")
			l = strings.ReplaceAll(l, "b/"+d+"/", "b/")
		}
		l = strings.Replace(l, "\t"+filepath.Base(a)+"/", "\t", 1) // --name-status
		l = strings.Replace(l, "\t"+filepath.Base(b)+"/", "\t", 1)
		switch {
		case strings.HasPrefix(l, "index "):
			continue
		case strings.HasPrefix(l, "@@ "):
			if i := strings.Index(l[3:], " @@"); i >= 0 {
				l = l[:3+i+3] + "\n"
			}
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "")
}

func listing(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%c %s %o %o\n", c.Status, c.Path, uint32(c.Old), uint32(c.New))
	}
	return b.String()
}

// TestChangesByHand: an upper directory built by hand as overlayfs
// leaves one (whiteouts as 0/0 devices and as xattr-marked empty files,
// an opaque directory, copy-ups with and without a change, type changes
// both ways) is read as the changes it makes, and rendered as `git diff
// --no-index` renders the workspace against the view the branch shows.
func TestChangesByHand(t *testing.T) {
	base := t.TempDir()
	lower, upper, view := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "view")
	lowerFiles := map[string]string{
		"keep.txt": "keep\n", "edit.txt": "a\nb\nc\nd\ne\nf\ng\nh\n", "copied.txt": "same\n",
		"chmodx.sh": "#!/bin/sh\n", "chmod600.txt": "private\n", "gone.txt": "gone\n",
		"gonedir/a": "a\n", "gonedir/sub/b": "b\n", "opq/x": "x\n", "opq/y": "y\n",
		"link": "->edit.txt", "t2l": "was a file\n", "f2d": "file\n", "d2f/k": "k\n",
		"bin": "\x00\x01\x02old", "xwh": "xattr whiteout\n", "merged/old.txt": "old\n",
		"noeol": "x", "a-b": "a-b\n",
	}
	tree(t, lower, lowerFiles)
	tree(t, view, lowerFiles)
	must(t, os.MkdirAll(upper, 0o755))
	// Both sides: upper gets what overlayfs would write, view the result.
	both := func(files map[string]string) { tree(t, upper, files); tree(t, view, files) }
	both(map[string]string{"edit.txt": "a\nb\nc\nD\ne\nf\ng\nh\n", "copied.txt": "same\n",
		"link": "->keep.txt", "bin": "\x00\x01\x02new", "merged/new.txt": "new\n",
		"noeol": "y", "new/deep/file": "deep\n"})
	for _, f := range []string{"t2l", "f2d", "gone.txt", "xwh"} {
		must(t, os.Remove(filepath.Join(view, f)))
	}
	must(t, os.RemoveAll(filepath.Join(view, "gonedir")))
	must(t, os.RemoveAll(filepath.Join(view, "d2f")))
	must(t, os.RemoveAll(filepath.Join(view, "opq")))
	must(t, os.Remove(filepath.Join(view, "a-b")))
	both(map[string]string{"t2l": "->keep.txt", "f2d/n": "n\n", "d2f": "now a file\n",
		"opq/y": "Y\n", "opq/z": "z\n", "chmodx.sh": "#!/bin/sh\n", "chmod600.txt": "private\n", "a-b/c": "dir now\n"})
	for _, root := range []string{upper, view} {
		must(t, os.Chmod(filepath.Join(root, "chmodx.sh"), 0o755))
		must(t, os.Chmod(filepath.Join(root, "chmod600.txt"), 0o600))
	}
	whiteout(t, filepath.Join(upper, "gone.txt"))
	whiteout(t, filepath.Join(upper, "gonedir"))
	whiteout(t, filepath.Join(upper, "never-in-lower"))
	must(t, os.WriteFile(filepath.Join(upper, "xwh"), nil, 0o644))
	setxattr(t, filepath.Join(upper, "xwh"), xattrWhiteout, "")
	setxattr(t, filepath.Join(upper, "opq"), xattrOpaque, "y")
	setxattr(t, filepath.Join(upper, "f2d"), xattrOpaque, "y")
	setxattr(t, filepath.Join(upper, "merged"), xattrOpaque, "x") // xattr whiteouts inside: not opaque

	cs, err := Changes(upper, lower)
	must(t, err)
	want := `T a-b 644 20000000755
A a-b/c 0 644
M bin 644 644
M chmod600.txt 644 600
M chmodx.sh 644 755
T d2f 20000000755 644
D d2f/k 644 0
M edit.txt 644 644
T f2d 644 20000000755
A f2d/n 0 644
D gone.txt 644 0
D gonedir 20000000755 0
D gonedir/a 644 0
D gonedir/sub 20000000755 0
D gonedir/sub/b 644 0
M link 1000000777 1000000777
A merged/new.txt 0 644
A new 0 20000000755
A new/deep 0 20000000755
A new/deep/file 0 644
M noeol 644 644
D opq/x 644 0
M opq/y 644 644
A opq/z 0 644
T t2l 644 1000000777
D xwh 644 0
`
	// a-b was a file and is now a directory: "a-b" sorts before "a-b/c".
	if got := listing(cs); got != want {
		t.Errorf("Changes:\n%s\nwant:\n%s", got, want)
	}

	var ns bytes.Buffer
	must(t, WriteNameStatus(&ns, cs, nil))
	gitNS := gitDiff(t, lower, view, "--name-status")
	// git's modes do not see chmod 600; the listing does.
	if got := strings.Replace(ns.String(), "M\tchmod600.txt\n", "", 1); got != gitNS {
		t.Errorf("name-status:\n%s\ngit:\n%s", got, gitNS)
	}
	var diff bytes.Buffer
	must(t, WriteDiff(&diff, upper, lower, cs, nil))
	if g := gitDiff(t, lower, view); diff.String() != g {
		t.Errorf("WriteDiff:\n%s\ngit diff --no-index:\n%s", diff.String(), g)
	}

	diff.Reset()
	must(t, WriteDiff(&diff, upper, lower, cs, []string{"opq", "noeol"}))
	if g := gitDiff(t, filepath.Join(lower, "opq"), filepath.Join(view, "opq")); !strings.HasSuffix(diff.String(), strings.ReplaceAll(strings.ReplaceAll(g, "a/", "a/opq/"), "b/", "b/opq/")) || !strings.HasPrefix(diff.String(), "diff --git a/noeol b/noeol\n") {
		t.Errorf("WriteDiff of opq and noeol:\n%s\ngit diff of opq:\n%s", diff.String(), g)
	}
}

// TestChangesUnsupported: an upper directory using redirect_dir or
// metacopy is refused, not misread.
func TestChangesUnsupported(t *testing.T) {
	for _, x := range []string{xattrRedirect, xattrMetacopy} {
		base := t.TempDir()
		lower, upper := filepath.Join(base, "lower"), filepath.Join(base, "upper")
		tree(t, lower, map[string]string{"d/f": "f\n"})
		tree(t, upper, map[string]string{"d/f": ""})
		setxattr(t, filepath.Join(upper, "d/f"), x, "")
		if _, err := Changes(upper, lower); err == nil || !strings.Contains(err.Error(), x) {
			t.Errorf("%s: %v, want an error naming it", x, err)
		}
	}
}

// TestChangesRealOverlay: changes made with real tools through a real
// overlayfs mount (sed -i, rm -rf, mv of a file and of a directory,
// chmod, a copy-up without a change, python, ln -sf, git commit) are read
// from its upper directory after unmount as `git diff --no-index` shows
// the workspace against a copy of the merged view.
func TestChangesRealOverlay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting overlayfs needs root")
	}
	for _, tool := range []string{"sed", "python3", "git", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	base := t.TempDir()
	lower, upper, work, merged, view := filepath.Join(base, "lower"), filepath.Join(base, "upper"),
		filepath.Join(base, "work"), filepath.Join(base, "merged"), filepath.Join(base, "view")
	tree(t, lower, map[string]string{
		"edit.txt": "one\ntwo\nthree\n", "keep.txt": "keep\n", "tomove.txt": "move me\n",
		"script.sh": "#!/bin/sh\necho hi\n", "touched.txt": "touched\n", "appended.txt": "open for append\n",
		"gonedir/a": "a\n", "gonedir/sub/b": "b\n", "movedir/x": "x\n", "movedir/y/z": "z\n",
		"f2d": "file\n", "d2f/k": "k\n", "opq/old": "old\n", "opq/y": "y\n", "link": "->keep.txt",
		"repo/README": "readme\n", "same-mode.txt": "chmod to the same mode\n",
	})
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+base)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(filepath.Join(lower, "repo"), "init", "-q")
	git(filepath.Join(lower, "repo"), "add", ".")
	git(filepath.Join(lower, "repo"), "commit", "-qm", "one")
	must(t, os.MkdirAll(upper, 0o755))
	must(t, os.MkdirAll(work, 0o755))
	must(t, os.MkdirAll(merged, 0o755))
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",redirect_dir=off,metacopy=off,index=off"
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("mount overlayfs: %v", err)
	}
	mounted := true
	unmount := func() {
		if mounted {
			if err := unix.Unmount(merged, 0); err != nil {
				t.Errorf("umount %s: %v", merged, err)
			}
			mounted = false
		}
	}
	t.Cleanup(unmount)
	sh := func(script string) {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = merged
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+base)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh(`sed -i 's/two/TWO/' edit.txt
rm -rf gonedir
mv tomove.txt moved.txt
mv movedir moveddir
chmod +x script.sh
chmod 644 same-mode.txt
touch touched.txt
python3 -c "open('appended.txt', 'a').close(); open('bin.dat', 'wb').write(bytes(range(256)))"
rm f2d && mkdir f2d && echo n > f2d/n
rm -rf d2f && echo now a file > d2f
rm -rf opq && mkdir opq && echo Y > opq/y
ln -sf edit.txt link
echo more >> repo/README
git -C repo -c user.name=t -c user.email=t@t commit -qam two
cp -a . ` + view)
	unmount()
	if _, err := os.Stat(filepath.Join(upper, "movedir")); err != nil {
		t.Fatalf("mv of a lower directory left no whiteout in upper (redirect_dir on?): %v", err)
	}

	cs, err := Changes(upper, lower)
	must(t, err)
	var ns bytes.Buffer
	must(t, WriteNameStatus(&ns, cs, nil))
	if g := gitDiff(t, lower, view, "--name-status"); ns.String() != g {
		t.Errorf("name-status:\n%s\ngit:\n%s", ns.String(), g)
	}
	for _, p := range []string{"touched.txt", "appended.txt", "same-mode.txt", "keep.txt"} {
		if _, err := os.Lstat(filepath.Join(upper, p)); err != nil && p != "keep.txt" {
			t.Errorf("%s was not copied up: %v (the test no longer checks a copy-up without a change)", p, err)
		}
	}
	var diff bytes.Buffer
	must(t, WriteDiff(&diff, upper, lower, cs, nil))
	if g := gitDiff(t, lower, view); diff.String() != g {
		t.Errorf("WriteDiff:\n%s\ngit diff --no-index:\n%s", diff.String(), g)
	}
}

// benchTree is BenchmarkChanges' workspace and upper directory, made
// once for all its rounds and removed by TestMain.
var benchTree struct {
	once         sync.Once
	base         string
	lower, upper string
	err          error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTree.base != "" {
		os.RemoveAll(benchTree.base)
	}
	os.Exit(code)
}

// makeBenchTree: a 100,000-file workspace (100 directories of 1,000
// files) and a branch that edited 10 files and deleted a directory of
// 1,000.
func makeBenchTree() error {
	base, err := os.MkdirTemp("", "branchdiff-bench")
	if err != nil {
		return err
	}
	benchTree.base = base
	lower, upper := filepath.Join(base, "lower"), filepath.Join(base, "upper")
	benchTree.lower, benchTree.upper = lower, upper
	for d := 0; d < 100; d++ {
		dir := filepath.Join(lower, fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for f := 0; f < 1000; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", f)), []byte("line\n"), 0o644); err != nil {
				return err
			}
		}
	}
	for i := 0; i < 10; i++ {
		p := filepath.Join(upper, fmt.Sprintf("d%03d", i*10), "f0001")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("changed\n"), 0o644); err != nil {
			return err
		}
	}
	return unix.Mknod(filepath.Join(upper, "d099"), unix.S_IFCHR, 0)
}

// BenchmarkChanges: Changes of makeBenchTree's branch reads the upper
// directory and the lower paths it names, not the tree.
func BenchmarkChanges(b *testing.B) {
	benchTree.once.Do(func() { benchTree.err = makeBenchTree() })
	if benchTree.err != nil {
		b.Fatal(benchTree.err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cs, err := Changes(benchTree.upper, benchTree.lower)
		if err != nil || len(cs) != 10+1001 {
			b.Fatalf("%d changes, %v", len(cs), err)
		}
	}
}

// overlay mounts an overlay of lowers (top first) with upper and a work
// directory under base at merged, unmounted at the test's end (or by the
// returned function, once).
func overlay(t *testing.T, base, merged, upper string, lowers ...string) func() {
	t.Helper()
	work := upper + ".work"
	for _, d := range []string{upper, work, merged} {
		must(t, os.MkdirAll(d, 0o755))
	}
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work + ",redirect_dir=off,metacopy=off,index=off"
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("mount overlayfs: %v", err)
	}
	mounted := true
	unmount := func() {
		if mounted {
			if err := unix.Unmount(merged, 0); err != nil {
				t.Errorf("umount %s: %v", merged, err)
			}
			mounted = false
		}
	}
	t.Cleanup(unmount)
	return unmount
}

// TestChangesOverBase: a branch over a base layer (itself an overlay's
// upper directory over the workspace, with whiteouts, an opaque
// directory and restored files) reads its changes against the merged
// base and workspace: none right after, then what real tools changed,
// as `git diff --no-index` shows the branch point against the view.
func TestChangesOverBase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting overlayfs needs root")
	}
	base := t.TempDir()
	ws, bl, up := filepath.Join(base, "ws"), filepath.Join(base, "baselayer"), filepath.Join(base, "upper")
	point, view, m := filepath.Join(base, "point"), filepath.Join(base, "view"), filepath.Join(base, "m")
	tree(t, ws, map[string]string{"keep.txt": "keep\n", "edit.txt": "now\n", "new-since.txt": "created after\n",
		"d/a": "a\n", "d/b": "b\n", "opq/late": "late\n", "f2d/x": "x\n", "link": "->keep.txt"})
	sh := func(dir, script string) {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	// The base: the workspace as it was (edit.txt's old bytes, no
	// new-since.txt, d without b but with c, opq as it was, f2d a file).
	done := overlay(t, base, m, bl, ws)
	sh(m, `echo then > edit.txt; rm new-since.txt d/b; echo c > d/c
rm -rf opq; mkdir opq; echo early > opq/early; rm -rf f2d; echo file > f2d`)
	sh(base, `cp -a m point`)
	done()
	cs, err := Changes(must2(t, os.MkdirAll(up, 0o755), up), bl, ws)
	must(t, err)
	if len(cs) != 0 {
		t.Fatalf("an empty upper over the base: %s", listing(cs))
	}
	done = overlay(t, base, m, up, bl, ws)
	sh(m, `echo edited >> edit.txt; echo again > new-since.txt; rm d/c; echo kk > keep.txt
rm -rf opq; echo o > opq; rm f2d; mkdir f2d; echo y > f2d/y; ln -sf edit.txt link; echo n > d/n`)
	sh(base, `cp -a m view`)
	done()
	if cs, err = Changes(up, bl, ws); err != nil {
		t.Fatal(err)
	}
	var ns bytes.Buffer
	must(t, WriteNameStatus(&ns, cs, nil))
	if g := gitDiff(t, point, view, "--name-status"); ns.String() != g {
		t.Errorf("name-status over the base:\n%s\ngit:\n%s\nchanges:\n%s", ns.String(), g, listing(cs))
	}
	var diff bytes.Buffer
	must(t, WriteDiffLayers(&diff, up, []string{bl, ws}, cs, nil))
	if g := gitDiff(t, point, view); diff.String() != g {
		t.Errorf("WriteDiffLayers:\n%s\ngit diff --no-index:\n%s", diff.String(), g)
	}
}

// must2 fails the test on err and returns v.
func must2[T any](t *testing.T, err error, v T) T {
	t.Helper()
	must(t, err)
	return v
}
