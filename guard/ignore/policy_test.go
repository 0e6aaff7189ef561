package ignore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ctimeOf is rel's ctime under root in Unix nanoseconds.
func ctimeOf(t *testing.T, root, rel string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(root, rel), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ctim.Nano()
}

// afterTick waits until the file system's clock has moved past the ctime
// of rel (it stamps with a coarse clock), by rewriting a probe file until
// its ctime is later: a file written afterwards is surely newer.
func afterTick(t *testing.T, root, rel string) {
	t.Helper()
	old := ctimeOf(t, root, rel)
	for i := 0; ; i++ {
		write(t, root, map[string]string{".probe": "x"})
		if ctimeOf(t, root, ".probe") > old {
			return
		}
		if i > 1e6 {
			t.Fatal("the file system's clock does not move")
		}
	}
}

// newPolicyTest makes a workspace with files (all written before the
// mount), a Policy over it kept in state, and a matcher using it. The
// mount's span starts after the files' ctimes.
func newPolicyTest(t *testing.T, files map[string]string) (*Matcher, *Policy, string, string) {
	t.Helper()
	root := t.TempDir()
	write(t, root, files)
	afterTick(t, root, ".probe-start")
	state := filepath.Join(t.TempDir(), "policy.json")
	p := openPolicy(t, root, state)
	m, err := New(root, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	m.SetPolicy(p)
	return m, p, root, state
}

func openPolicy(t *testing.T, root, state string) *Policy {
	t.Helper()
	p, err := NewPolicy(root, state)
	if err != nil {
		t.Fatal(err)
	}
	// The span starts after every file written so far: make that certain
	// whatever the clock granularity. A probe written now has a ctime no
	// earlier than any of them (the last probe may be a tick older than a
	// file written since).
	write(t, root, map[string]string{".probe": "y"})
	p.spans[len(p.spans)-1].From = ctimeOf(t, root, ".probe") + 1
	afterTick(t, root, ".probe")
	return p
}

// A rule file changed after the mount's start, without Pin (a change the
// mount could not bracket), exempts nothing until Reload: its old rules
// are gone too (tighter).
func TestPolicyWideningWaitsForReload(t *testing.T) {
	m, p, root, _ := newPolicyTest(t, map[string]string{".gitignore": "build/\n", ".probe-start": ""})
	write(t, root, map[string]string{".gitignore": "build/\n*\n"})
	check(t, m, map[string]bool{"build/x": false, "main.c": false})
	if got := p.Pending(); len(got) != 1 || got[0].Path != ".gitignore" || len(got[0].Added) != 2 {
		t.Fatalf("Pending = %+v, want .gitignore with build/ and * added", got)
	}
	if _, err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	check(t, m, map[string]bool{"build/x": true, "main.c": true})
	if got := p.Pending(); len(got) != 0 {
		t.Fatalf("Pending after Reload = %+v", got)
	}
}

// Pin keeps the accepted rules of the content before the change: adding a
// rule waits, removing one applies at once.
func TestPolicyPinTightensAtOnce(t *testing.T) {
	m, p, root, _ := newPolicyTest(t, map[string]string{".gitignore": "build/\n*.o\n", ".probe-start": ""})
	p.Pin(".gitignore")
	write(t, root, map[string]string{".gitignore": "build/\nsrc/\n"})
	m.Invalidate("")
	check(t, m, map[string]bool{"build/x": true, "a.o": false, "src/main.c": false})
	got := p.Pending()
	if len(got) != 1 || len(got[0].Added) != 1 || got[0].Added[0] != "src/" || len(got[0].Removed) != 1 || got[0].Removed[0] != "*.o" {
		t.Fatalf("Pending = %+v", got)
	}
}

// .git/info/exclude: pinned and changed, it stays held across a remount
// (the state file); a rule file changed while unmounted is the owner's.
func TestPolicyRemountKeepsPending(t *testing.T) {
	m, p, root, state := newPolicyTest(t, map[string]string{".git/info/exclude": "*.bak\n", "sub/.gitignore": "a\n", ".probe-start": ""})
	check(t, m, map[string]bool{"x.bak": true, "sub/a": true})
	p.Pin(".git/info/exclude")
	write(t, root, map[string]string{".git/info/exclude": "*.bak\n*\n"})
	m.Invalidate(".git/info")
	check(t, m, map[string]bool{"x.bak": true, "main.c": false})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	afterTick(t, root, ".git/info/exclude")
	write(t, root, map[string]string{"sub/.gitignore": "a\nb\n"}) // while unmounted

	p2 := openPolicy(t, root, state)
	m2, _ := New(root, nil, false)
	m2.SetPolicy(p2)
	check(t, m2, map[string]bool{"x.bak": true, "main.c": false, "sub/b": false})
	// The span ended at Close (plus a second for coarse clocks): only an
	// edit later than that is the owner's. Pretend it was.
	p2.spans[0].To = ctimeOf(t, root, "sub/.gitignore") - int64(2e9)
	p2.mu.Lock()
	delete(p2.files, "sub/.gitignore")
	p2.gen++ // as every change of the accepted rules does (Matcher.Exempt's memo)
	p2.mu.Unlock()
	check(t, m2, map[string]bool{"sub/b": true})
	if got := p2.Pending(); len(got) != 1 || got[0].Path != ".git/info/exclude" {
		t.Fatalf("Pending after the remount = %+v, want the exclude file", got)
	}
	if _, err := p2.Reload(); err != nil {
		t.Fatal(err)
	}
	check(t, m2, map[string]bool{"main.c": true})
}

// A directory renamed through the mount carries no accepted rules to its
// new name until Reload, though its .gitignore's ctime is old; so does one
// exchanged with a file. The kinds are those the mount passes (a plain
// rename; an exchange whose other name held a regular file): the names
// that may hold a directory are still looked at.
func TestPolicyMovedDirectory(t *testing.T) {
	for _, exchange := range []bool{false, true} {
		m, p, root, _ := newPolicyTest(t, map[string]string{"x/.gitignore": "*\n", "x/f": "", "y": "", ".probe-start": ""})
		check(t, m, map[string]bool{"x/f": true})
		k := MoveKinds{Rename: true}
		if exchange {
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "x"), unix.AT_FDCWD, filepath.Join(root, "y"), unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
			k = MoveKinds{FromFile: true}
		} else {
			if err := os.Remove(filepath.Join(root, "y")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(root, "x"), filepath.Join(root, "y")); err != nil {
				t.Fatal(err)
			}
		}
		p.Moved("x", "y", k)
		m.Invalidate("x")
		m.Invalidate("y")
		check(t, m, map[string]bool{"y/f": false})
		if _, err := p.Reload(); err != nil {
			t.Fatal(err)
		}
		check(t, m, map[string]bool{"y/f": true})
	}
}

// An edit seen outside the mount is accepted, unless the mount changed the
// file since the last acceptance.
func TestPolicyExternal(t *testing.T) {
	m, p, root, _ := newPolicyTest(t, map[string]string{".gitignore": "a\n", "sub/.gitignore": "", ".probe-start": ""})
	check(t, m, map[string]bool{"a": true, "b": false})
	write(t, root, map[string]string{".gitignore": "a\nb\n"})
	m.Invalidate("")
	p.External(".gitignore")
	check(t, m, map[string]bool{"b": true})

	p.Pin("sub/.gitignore")
	write(t, root, map[string]string{"sub/.gitignore": "c\n"})
	m.Invalidate("sub")
	p.External("sub/.gitignore")
	check(t, m, map[string]bool{"sub/c": false})
}

// Rule files themselves are exempt only with their directory.
func TestRuleFilesNotExempt(t *testing.T) {
	m, _ := newTest(t, map[string]string{".gitignore": "*\n!src/\n", "build/.gitignore": "*\n"}, nil, false)
	check(t, m, map[string]bool{".gitignore": false, ".git/info/exclude": false, ".rubino.toml": false,
		"build/.gitignore": true, "src/.gitignore": false, ".git/config": true})
}

// BenchmarkExemptPolicy: Exempt of an ignored path (both rule sets
// evaluated) and of a guarded one (the rules on disk only), with and
// without a Policy.
func BenchmarkExemptPolicy(b *testing.B) {
	for _, withPolicy := range []bool{false, true} {
		root := b.TempDir()
		write(b, root, map[string]string{".gitignore": "build/\n*.o\nnode_modules/\n", "src/.gitignore": "gen/\n", ".git/info/exclude": "*.bak\n"})
		m, err := New(root, nil, false)
		if err != nil {
			b.Fatal(err)
		}
		if withPolicy {
			p, err := NewPolicy(root, "")
			if err != nil {
				b.Fatal(err)
			}
			m.SetPolicy(p)
		}
		for _, path := range []string{"src/gen/a/b.go", "src/pkg/a/b.go"} {
			name := map[bool]string{false: "plain", true: "policy"}[withPolicy] + "/" + path
			b.Run(name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					m.Exempt(path, false)
				}
			})
		}
	}
}
