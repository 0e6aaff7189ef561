package ignore

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSameBelow: a directory renamed within its directory keeps the
// exemption of what it holds when every rule above is a name rule or an
// anchored one that cannot reach below the new name; an anchored rule
// that can ("logs/*" for logs, "/dist" for x/dist), one with "**", a
// rename to another directory, or an extra glob leave it unknown (the
// caller reads the tree). Rules below the directory the two names share
// do not count.
func TestSameBelow(t *testing.T) {
	root := t.TempDir()
	for rel, content := range map[string]string{".gitignore": "*.o\nbuild/\n/dist\n.vscode/*\n", "x/.gitignore": "/dist\n", "y/.gitignore": "logs/*\n", "z/.gitignore": "*.tmp\n",
		"w/.gitignore": "a/**/x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(root, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, dst string
		want     bool
	}{
		{"a", "b", true},
		{"z/a", "z/b", true},
		{"x/a", "x/b", true},    // "/dist" in x/ matches x/dist only
		{"x/a", "x/dist", true}, // it matches x/dist itself: the caller asks Exempt
		{"y/pkg", "y/logs", false},
		{"y/pkg", "y/pkg2", true}, // "logs/*" cannot reach below y/pkg2
		{"a", ".vscode", false},
		{"w/a", "w/b", false}, // "**": not known
		{"a", "z/a", false},
	} {
		if got := m.SameBelow(c.src, c.dst); got != c.want {
			t.Errorf("SameBelow(%q, %q) = %v, want %v", c.src, c.dst, got, c.want)
		}
	}
	// The accepted rules say "build/"; the rules on disk, written since,
	// say "*" and "!build/": build is not exempt (on disk it is
	// re-included), but build/x.c would be (both sets ignore it).
	p, err := NewPolicy(root, filepath.Join(t.TempDir(), "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	m.SetPolicy(p)
	check(t, m, map[string]bool{"build/x.c": true})
	p.Pin(".gitignore")
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*\n!build/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Invalidate("")
	if m.Exempt("build", true) || !m.Exempt("build/x.c", false) {
		t.Fatalf("build exempt %v, build/x.c exempt %v: want false, true", m.Exempt("build", true), m.Exempt("build/x.c", false))
	}
	if m.SameBelow("src", "build") {
		t.Error(`SameBelow("src", "build") = true with "build/" accepted and "*", "!build/" on disk, want false`)
	}
	g, err := New(root, []string{"**/gen/**"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if g.SameBelow("a", "b") {
		t.Error("SameBelow with an extra glob = true, want false")
	}
}
