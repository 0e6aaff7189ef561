package journal

// A test driver that makes changes in a plain directory and journals each
// one as the mount does: Record (CaptureAt on the parent descriptor)
// before the change, NoteAfter of the names it touched after it.

import (
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

type driver struct {
	t    testing.TB
	root string
	j    *Journal
	s    string
}

func newDriver(t testing.TB, j *Journal, session string) *driver {
	return &driver{t: t, root: t.TempDir(), j: j, s: session}
}

func (d *driver) on(root string, session string) *driver {
	return &driver{t: d.t, root: root, j: d.j, s: session}
}

func (d *driver) ins() DirInspector { return DirInspector{Root: d.root} }

func (d *driver) applier() DirApplier { return DirApplier{Root: d.root, J: d.j, Session: d.s} }

func (d *driver) abs(p string) string { return filepath.Join(d.root, p) }

// do journals op on p (and p2), runs change, then notes the after-states.
// ref 0 notes like a handle's close.
func (d *driver) do(op, p, p2 string, change func() error) {
	d.t.Helper()
	dirs := map[string]int{}
	open := func(name string) (int, string) {
		fd, leaf, err := OpenParent(d.root, name)
		if err != nil {
			d.t.Fatalf("%s %s: parent: %v", op, name, err)
		}
		dirs[name] = fd
		return fd, leaf
	}
	capture := func(name string) (PreImage, error) {
		fd, leaf := open(name)
		return CaptureAt(d.j.Blobs(), fd, leaf)
	}
	rec, err := d.j.Record(d.s, op, p, p2, capture)
	for _, fd := range dirs {
		unix.Close(fd)
	}
	if err != nil {
		d.t.Fatalf("record %s %s: %v", op, p, err)
	}
	if err := change(); err != nil {
		d.t.Fatalf("%s %s %s: %v", op, p, p2, err)
	}
	var afters []After
	for _, name := range []string{p, p2} {
		if name == "" {
			continue
		}
		a, err := d.ins().Lstat(name)
		if err != nil {
			d.t.Fatal(err)
		}
		afters = append(afters, a)
	}
	if err := d.j.NoteAfter(d.s, rec.Seq, afters); err != nil {
		d.t.Fatal(err)
	}
}

// failedDo journals op on p (and p2) and runs change, which must fail:
// the record is followed by a failure note, as fusefs writes one when the
// backing operation fails.
func (d *driver) failedDo(op, p, p2 string, change func() error) {
	d.t.Helper()
	rec, err := d.j.Record(d.s, op, p, p2, func(name string) (PreImage, error) {
		fd, leaf, err := OpenParent(d.root, name)
		if err != nil {
			return PreImage{}, err
		}
		defer unix.Close(fd)
		return CaptureAt(d.j.Blobs(), fd, leaf)
	})
	if err != nil {
		d.t.Fatalf("record %s %s: %v", op, p, err)
	}
	if err := change(); err == nil {
		d.t.Fatalf("%s %s %s succeeded; the test wants it to fail", op, p, p2)
	}
	if err := d.j.NoteFailed(d.s, rec.Seq); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driver) exists(p string) bool {
	_, err := os.Lstat(d.abs(p))
	return err == nil
}

// write is "echo data > p" (create when missing, then the write).
func (d *driver) write(p, data string) {
	d.t.Helper()
	if !d.exists(p) {
		d.do("create", p, "", func() error { return os.WriteFile(d.abs(p), nil, 0o644) })
	}
	d.do("write", p, "", func() error { return os.WriteFile(d.abs(p), []byte(data), 0o644) })
}

// appendf is "echo data >> p".
func (d *driver) appendf(p, data string) {
	d.t.Helper()
	if !d.exists(p) {
		d.do("create", p, "", func() error { return os.WriteFile(d.abs(p), nil, 0o644) })
	}
	d.do("write", p, "", func() error {
		f, err := os.OpenFile(d.abs(p), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(data)
		return err
	})
}

func (d *driver) rename(a, b string) {
	d.t.Helper()
	d.do("rename", a, b, func() error { return os.Rename(d.abs(a), d.abs(b)) })
}

func (d *driver) exchange(a, b string) {
	d.t.Helper()
	d.do("exchange", a, b, func() error {
		return unix.Renameat2(unix.AT_FDCWD, d.abs(a), unix.AT_FDCWD, d.abs(b), unix.RENAME_EXCHANGE)
	})
}

func (d *driver) unlink(p string) {
	d.t.Helper()
	d.do("unlink", p, "", func() error { return unix.Unlink(d.abs(p)) })
}

func (d *driver) mkdir(p string) {
	d.t.Helper()
	d.do("mkdir", p, "", func() error { return os.Mkdir(d.abs(p), 0o755) })
}

func (d *driver) rmdir(p string) {
	d.t.Helper()
	d.do("rmdir", p, "", func() error { return unix.Rmdir(d.abs(p)) })
}

func (d *driver) chmod(p string, mode os.FileMode) {
	d.t.Helper()
	d.do("chmod", p, "", func() error { return os.Chmod(d.abs(p), mode) })
}

func (d *driver) symlink(target, p string) {
	d.t.Helper()
	d.do("symlink", p, "", func() error { return os.Symlink(target, d.abs(p)) })
}

func (d *driver) link(old, p string) {
	d.t.Helper()
	d.do("link", old, p, func() error { return os.Link(d.abs(old), d.abs(p)) })
}

// sedI is "sed -i": a temporary file in the same directory, renamed over.
func (d *driver) sedI(p, from, to string) {
	d.t.Helper()
	b, err := os.ReadFile(d.abs(p))
	if err != nil {
		d.t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(p), "sedXYZ")
	d.write(tmp, strings.ReplaceAll(string(b), from, to))
	st, _ := os.Stat(d.abs(p))
	d.chmod(tmp, st.Mode().Perm())
	d.rename(tmp, p)
}

// mkdirP is "mkdir -p".
func (d *driver) mkdirP(p string) {
	d.t.Helper()
	parts := strings.Split(p, "/")
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		if !d.exists(q) {
			d.mkdir(q)
		}
	}
}

// rmR is "rm -r": children first.
func (d *driver) rmR(p string) {
	d.t.Helper()
	ents, _ := os.ReadDir(d.abs(p))
	for _, e := range ents {
		c := p + "/" + e.Name()
		if e.IsDir() {
			d.rmR(c)
		} else {
			d.unlink(c)
		}
	}
	d.rmdir(p)
}

// seed writes files without journaling them (the tree before the session).
func (d *driver) seed(files map[string]string) {
	d.t.Helper()
	for p, data := range files {
		os.MkdirAll(filepath.Dir(d.abs(p)), 0o755)
		if err := os.WriteFile(d.abs(p), []byte(data), 0o644); err != nil {
			d.t.Fatal(err)
		}
	}
}

// manifest maps every path under the root to "kind mode hash-or-target".
func (d *driver) manifest() map[string]string {
	d.t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.root, p)
		if rel == "." {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			m[rel] = "symlink " + t
		case e.IsDir():
			m[rel] = fmt.Sprintf("dir %v", info.Mode())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := xxh3.Hash128(b).Bytes()
			m[rel] = fmt.Sprintf("file %v %s", info.Mode(), hex.EncodeToString(sum[:]))
		}
		return nil
	})
	if err != nil {
		d.t.Fatal(err)
	}
	return m
}

func sameManifest(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var diffs []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("missing %s (%s)", p, w))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%s: want %s, got %s", p, w, g))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %s (%s)", p, g))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Fatalf("%s: the tree differs:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// rewind plans and applies a rewind of d's session, failing on step
// errors.
func (d *driver) rewind(to string, opt RewindOptions) (Plan, Result) {
	d.t.Helper()
	plan, err := d.j.PlanRewind(d.s, to, d.ins(), opt)
	if err != nil {
		d.t.Fatal(err)
	}
	res, err := d.j.Rewind(plan, d.applier())
	if err != nil {
		d.t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		d.t.Fatalf("rewind to %s: step errors %v\nplan %+v", to, res.Errors, plan.Steps)
	}
	return plan, res
}
