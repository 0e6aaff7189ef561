package tests

// Odd names through the mount: every operation on a file
// with a newline, tab, spaces, a leading dash, valid and invalid UTF-8, a
// 255-byte name or a 256-byte one, and on a path 100 directories deep,
// gives through the mount exactly the result (errno and content) it gives
// on a native directory of the same file system.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// oddNames are the names tried; the comments say what each probes.
var oddNames = []string{
	"new\nline",                     // newline
	"tab\there",                     // tab
	"a\rb",                          // carriage return
	"with space",                    // inner space
	" leading space",                // leading space
	"trailing space ",               // trailing space
	"-leading-dash",                 // parsed as an option by careless tools
	"--",                            // ditto
	"...",                           // dots that are not . or ..
	".rubino-not",                   // near the control tree's name
	"back\\slash",                   // backslash
	"quote'\"`$(x)",                 // shell metacharacters
	"star*?[a]",                     // glob characters
	"é-ünïcödé",                     // valid UTF-8, two-byte
	"日本語のファイル",                      // valid UTF-8, three-byte
	"emoji-😀",                       // valid UTF-8, four-byte
	"\xff\xfe-invalid",              // invalid UTF-8: bytes never valid
	"\xc3\x28-bad-seq",              // invalid UTF-8: a bad continuation byte
	"\xed\xa0\x80-surr",             // invalid UTF-8: an encoded surrogate
	strings.Repeat("a", 255),        // NAME_MAX: allowed
	strings.Repeat("é", 127) + "a",  // NAME_MAX in multi-byte UTF-8
	strings.Repeat("b", 256),        // NAME_MAX + 1: ENAMETOOLONG
	strings.Repeat("\xff", 256),     // ditto, invalid UTF-8
	strings.Repeat("c", 300) + "\n", // well past NAME_MAX
}

// errnoText renders an error as its errno name ("ok" for nil), the part of
// a result that must match.
func errnoText(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// nameOps runs create, write, read, readdir, rename (away, to a name one
// byte longer, and back) and unlink on name in dir, and returns one line
// per step: its errno and, for reads and listings, what it saw.
func nameOps(dir, name string) []string {
	p := filepath.Join(dir, name)
	var out []string
	add := func(step string, err error, extra ...string) {
		out = append(out, fmt.Sprintf("%s: %s %s", step, errnoText(err), strings.Join(extra, " ")))
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	add("create", err)
	if err == nil {
		_, err = f.Write([]byte("content of " + name))
		add("write", err)
		add("close", f.Close())
	}
	b, err := os.ReadFile(p)
	add("read", err, fmt.Sprintf("%q", b))
	_, err = os.Lstat(p)
	add("lstat", err)
	ents, err := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, fmt.Sprintf("%q", e.Name()))
	}
	sort.Strings(names)
	add("readdir", err, names...)
	add("rename-longer", os.Rename(p, p+"x"))
	add("rename-longer-back", os.Rename(p+"x", p))
	add("rename-away", os.Rename(p, filepath.Join(dir, "short")))
	add("rename-back", os.Rename(filepath.Join(dir, "short"), p))
	b, err = os.ReadFile(p)
	add("read-after-rename", err, fmt.Sprintf("%q", b))
	add("unlink", os.Remove(p))
	_, err = os.Lstat(p)
	add("lstat-after-unlink", err)
	add("mkdir", os.Mkdir(p, 0o755))
	add("rmdir", os.Remove(p))
	ents, _ = os.ReadDir(dir)
	add("left", nil, fmt.Sprint(len(ents)))
	return out
}

// compareOps fails the test where the mount's results differ from the
// native directory's.
func compareOps(t *testing.T, what string, native, mounted []string) {
	t.Helper()
	if len(native) != len(mounted) {
		t.Errorf("%s: %d steps natively, %d through the mount", what, len(native), len(mounted))
		return
	}
	for i := range native {
		if native[i] != mounted[i] {
			t.Errorf("%s:\n  native: %.300s\n  mount:  %.300s", what, native[i], mounted[i])
		}
	}
}

// TestOddNames compares every operation on every odd name through the
// mount with the same on a native directory beside the workspace.
func TestOddNames(t *testing.T) {
	m := newMount(t, nil, nil)
	native := filepath.Join(m.tmp, "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m.path("names"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range oddNames {
		want := nameOps(native, name)
		got := nameOps(m.path("names"), name)
		compareOps(t, fmt.Sprintf("%.40q (%d bytes)", name, len(name)), want, got)
	}
	// The expectations themselves: 255 bytes work, 256 do not.
	for _, c := range []struct {
		name string
		want string
	}{
		{strings.Repeat("a", 255), "create: ok "},
		{strings.Repeat("b", 256), "create: " + syscall.ENAMETOOLONG.Error() + " "},
	} {
		if got := nameOps(m.path("names"), c.name)[0]; got != c.want {
			t.Errorf("%d-byte name through the mount: %q, want %q", len(c.name), got, c.want)
		}
	}
	// The backing directory holds nothing either.
	if ents, err := os.ReadDir(m.backing("names")); err != nil || len(ents) != 0 {
		t.Errorf("backing names/: %v %v", ents, err)
	}
}

// TestDeepPath: a path 100 directories deep (about 3 KiB, under PATH_MAX)
// is made, written, read, renamed and removed through the mount with the
// results of a native directory.
func TestDeepPath(t *testing.T) {
	m := newMount(t, nil, nil)
	native := filepath.Join(m.tmp, "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	comp := "dir-" + strings.Repeat("d", 26) // 30 bytes
	run := func(root string) []string {
		var out []string
		p := root
		var errs []string
		for i := 0; i < 100; i++ {
			p = filepath.Join(p, comp)
			if err := os.Mkdir(p, 0o755); err != nil {
				errs = append(errs, fmt.Sprintf("mkdir %d: %s", i, errnoText(err)))
			}
		}
		out = append(out, fmt.Sprintf("mkdir: %v", errs))
		out = append(out, nameOps(p, "leaf\nwith newline")...)
		out = append(out, nameOps(p, strings.Repeat("z", 255))...)
		err := os.Rename(filepath.Join(root, comp), filepath.Join(root, "moved"))
		out = append(out, "rename-top: "+errnoText(err))
		p = filepath.Join(root, "moved")
		for i := 1; i < 100; i++ {
			p = filepath.Join(p, comp)
		}
		err = os.WriteFile(filepath.Join(p, "f"), []byte("deep"), 0o644)
		out = append(out, "write-moved: "+errnoText(err))
		b, err := os.ReadFile(filepath.Join(p, "f"))
		out = append(out, fmt.Sprintf("read-moved: %s %q", errnoText(err), b))
		out = append(out, "removeall: "+errnoText(os.RemoveAll(filepath.Join(root, "moved"))))
		return out
	}
	compareOps(t, "depth 100", run(native), run(m.path("")))
	if got := run(m.path(""))[0]; got != "mkdir: []" {
		t.Errorf("mount: %s", got)
	}
}

// TestOddNamesInControlTree: odd names in .rubino are refused cleanly:
// looking them up is ENOENT (ENAMETOOLONG past NAME_MAX, as on the backing
// file system), and a session cannot be given one.
func TestOddNamesInControlTree(t *testing.T) {
	m := newMount(t, nil, nil)
	for _, name := range oddNames {
		for _, dir := range []string{".rubino", ".rubino/sessions", ".rubino/agents", ".rubino/compact/sessions"} {
			_, err := os.Lstat(m.path(dir + "/" + name))
			want := syscall.ENOENT
			if len(name) > 255 {
				want = syscall.ENAMETOOLONG
			}
			if !errors.Is(err, want) {
				t.Errorf("lstat %s/%.40q: %v, want %v", dir, name, err, want)
			}
		}
		if len(name) > 255 {
			continue
		}
		errno, got := m.ctlWrite(".rubino/sessions/clone", []byte("name="+name))
		if errno == 0 || !strings.HasPrefix(got, "error: ") || strings.Count(got, "\n") != 1 {
			t.Errorf("session named %.40q: errno %v, read %q", name, errno, got)
		}
	}
	if got := m.mustSh("ls .rubino/sessions"); got != "clone\nctl\ndefault\n" {
		t.Errorf("sessions: %q", got)
	}
}
