package ignore

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// tree is the differential fixture: every rule kind gitignore(5) describes,
// and paths on both sides of each rule.
var tree = map[string]string{
	".git/info/exclude": "# exclude file\n*.bak\nsecret.txt\n",
	".gitignore": `# comment

*.log
!keep.log
build/
/root-only
docs/internal
**/x
a/**/b
m/**/n/o
vendor/**
!vendor/keep/
\#name
\!name
# the next four lines end in spaces on purpose
trail   
esc\ 
esc2\  
bs\\ 
[abc].txt
file?.md
tmp[!0-9]
[[:digit:]]x
[]q]y
[a-]w
dd/foo**
ee/***/f
logs/
!logs/important.log
!important.bak
`,
	"sub/.gitignore":      "*.tmp\n!special.tmp\n/anchored\ndeep/y\ngen/\n!gen/keep.txt\n!debug.log\n",
	"sub/deep/.gitignore": "!*.log\n",
	"only-go/.gitignore":  "*\n!*/\n!*.go\n",
	"crlf/.gitignore":     "\xef\xbb\xbfbommed\r\ncrlfed\r\n",
	// Files and directories the rules are tested on.
	"debug.log": "", "keep.log": "", "dir.log/keep.log": "", "sub/deep/trace.log": "", "sub/debug.log": "",
	"build/out.o": "", "sub/build": "", "sub/build2/out.o": "",
	"root-only": "", "sub/root-only": "",
	"docs/internal/x.md": "", "docs/public.md": "", "sub/docs/internal/y.md": "",
	"x": "", "sub/x/y.txt": "", "x-not/z": "",
	"a/b": "", "a/c/d/b": "", "a/c/b/k.txt": "", "a/bb": "",
	"m/n/o": "", "m/n/q/n/o": "", "m/n/p": "",
	"vendor/lib.go": "", "vendor/keep/k.go": "", "vendor/keep/s/z.go": "",
	"#name": "", "!name": "", "#other": "",
	"trail": "", "trail ": "", "esc ": "", "esc": "", "esc2 ": "", "esc2": "", `bs\`: "", `bs\ `: "",
	"a.txt": "", "b.txt": "", "d.txt": "", "ab.txt": "",
	"file1.md": "", "file12.md": "", "tmpx": "", "tmp1": "",
	"1x": "", "ax": "", "]y": "", "qy": "", "zy": "", "-w": "", "aw": "", "bw": "",
	"dd/foobar": "", "dd/fo": "", "ee/f": "", "ee/g/h/f": "", "ee/g/h/i": "",
	"logs/important.log": "", "logs/other.txt": "",
	"notes.bak": "", "important.bak": "", "secret.txt": "", "sub/secret.txt": "",
	"sub/a.tmp": "", "sub/special.tmp": "", "sub/anchored": "", "sub/deep/anchored": "", "sub/deep/y": "",
	"sub/gen/keep.txt": "", "sub/gen/other": "",
	"only-go/main.go": "", "only-go/README": "", "only-go/pkg/b.go": "", "only-go/pkg/c.txt": "",
	"crlf/bommed": "", "crlf/crlfed": "", "target": "linked\n", "lnk/linked": "",
}

// missing paths are queried as files that do not exist.
var missing = []string{"nope.log", "nope/keep.log", "build/new.o", "sub/gen/new", "newdir/x",
	"zzz", "vendor/keep/new.go", "only-go/new.go", "only-go/new.txt", "a/q/r/b", "c.txt"}

func write(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// git runs git isolated from the system and user config (so no global
// excludesFile), in dir.
func git(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "XDG_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_CONFIG_NOSYSTEM=1", "HOME="+home, "XDG_CONFIG_HOME="+home)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: nothing ignored
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// rawGoGit is go-git used the way its own ReadPatterns does, to log the gaps
// the wrapper fixes.
func rawGoGit(t *testing.T, root string) gitignore.Matcher {
	var ps []gitignore.Pattern
	files := []string{".git/info/exclude"}
	for rel := range tree {
		if strings.HasSuffix(rel, ".gitignore") {
			files = append(files, rel)
		}
	}
	sort.Slice(files[1:], func(i, j int) bool {
		return strings.Count(files[1+i], "/") < strings.Count(files[1+j], "/")
	})
	for _, rel := range files {
		var domain []string
		if d := filepath.Dir(rel); d != "." && rel != ".git/info/exclude" {
			domain = strings.Split(d, "/")
		}
		f, err := os.Open(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if s := sc.Text(); !strings.HasPrefix(s, "#") && strings.TrimSpace(s) != "" {
				ps = append(ps, gitignore.ParsePattern(s, domain))
			}
		}
		f.Close()
	}
	return gitignore.NewMatcher(ps)
}

func TestAgreesWithGitCheckIgnore(t *testing.T) {
	root := t.TempDir()
	git(t, root, "", "init", "-q")
	write(t, root, tree)
	if err := os.Symlink("../target", filepath.Join(root, "lnk/.gitignore")); err != nil {
		t.Fatal(err)
	}
	isDir := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if rel != "." {
			isDir[filepath.ToSlash(rel)] = d.IsDir()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range missing {
		isDir[rel] = false
	}
	var paths []string
	for rel := range isDir {
		paths = append(paths, rel)
	}
	sort.Strings(paths)

	// -v -n prints "source NUL line NUL pattern NUL path NUL" for every path,
	// with an empty pattern when nothing matched; "!" marks a negation.
	want := map[string]bool{}
	f := strings.Split(git(t, root, strings.Join(paths, "\x00")+"\x00",
		"check-ignore", "--stdin", "-z", "-v", "-n", "--no-index"), "\x00")
	for i := 0; i+3 < len(f); i += 4 {
		want[f[i+3]] = f[i+2] != "" && f[i+2][0] != '!'
	}
	if len(want) != len(paths) {
		t.Fatalf("git answered for %d of %d paths", len(want), len(paths))
	}

	m, err := New(root, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	raw := rawGoGit(t, root)
	ignored := 0
	for _, rel := range paths {
		if raw.Match(strings.Split(rel, "/"), isDir[rel]) != want[rel] {
			t.Logf("plain go-git differs from git on %q (git ignored=%v), fixed by the wrapper", rel, want[rel])
		}
		w := want[rel]
		if IsRuleFile(rel) {
			// A rule file is exempt only with its directory, whatever
			// its own rules say (docs/DESIGN.md#exempt-widening).
			w = want[path.Dir(rel)]
		}
		if got := m.Exempt(rel, isDir[rel]); got != w {
			t.Errorf("Exempt(%q, %v) = %v, want %v (git check-ignore says ignored=%v)", rel, isDir[rel], got, w, want[rel])
		}
		if want[rel] {
			ignored++
		}
	}
	t.Logf("%d paths compared with git check-ignore, %d ignored", len(paths), ignored)
}

func newTest(t *testing.T, files map[string]string, extra []string, guardIgnored bool) (*Matcher, string) {
	t.Helper()
	root := t.TempDir()
	write(t, root, files)
	m, err := New(root, extra, guardIgnored)
	if err != nil {
		t.Fatal(err)
	}
	return m, root
}

func check(t *testing.T, m *Matcher, want map[string]bool) {
	t.Helper()
	for rel, w := range want {
		if got := m.Exempt(rel, false); got != w {
			t.Errorf("Exempt(%q) = %v, want %v", rel, got, w)
		}
	}
}

func TestGitDirAlwaysExempt(t *testing.T) {
	for _, guard := range []bool{false, true} {
		m, _ := newTest(t, map[string]string{".gitignore": "!*\n"}, nil, guard)
		check(t, m, map[string]bool{".git": true, ".git/config": true, "sub/.git/HEAD": true,
			"a/.git": true, ".github/x": false, "x.git": false, ".gitignore": false, "": false})
	}
}

func TestExtraGlobs(t *testing.T) {
	m, _ := newTest(t, map[string]string{".gitignore": "*.log\n"}, []string{"gen/**", "*.tmp"}, true)
	check(t, m, map[string]bool{"gen": true, "gen/a/b.go": true, "x.tmp": true,
		"sub/x.tmp": false, "src/gen/a": false, "a.log": false})
}

func TestGuardIgnored(t *testing.T) {
	files := map[string]string{".gitignore": "*.log\n", ".git/info/exclude": "*.bak\n"}
	m, _ := newTest(t, files, nil, false)
	check(t, m, map[string]bool{"a.log": true, "a.bak": true, "a.go": false})
	m, _ = newTest(t, files, nil, true)
	check(t, m, map[string]bool{"a.log": false, "a.bak": false, ".git/info/exclude": false, ".git/info/x": true})
}

func TestInvalidate(t *testing.T) {
	m, root := newTest(t, map[string]string{".gitignore": "a\n", "sub/.gitignore": "c\n"}, nil, false)
	check(t, m, map[string]bool{"a": true, "b": false, "sub/c": true, "sub/d": false, "e": false})
	write(t, root, map[string]string{".gitignore": "b\n", "sub/.gitignore": "d\n", ".git/info/exclude": "e\n"})
	check(t, m, map[string]bool{"a": true, "b": false, "sub/d": false, "e": false}) // cached
	m.Invalidate(".")                                                               // path.Dir(".gitignore"), as the FUSE layer passes it
	check(t, m, map[string]bool{"a": false, "b": true, "sub/c": true, "e": true})
	m.Invalidate("sub")
	check(t, m, map[string]bool{"sub/c": false, "sub/d": true})
	if err := os.Remove(filepath.Join(root, "sub/.gitignore")); err != nil {
		t.Fatal(err)
	}
	write(t, root, map[string]string{".git/info/exclude": "f\n"})
	m.Invalidate("sub")
	m.Invalidate(".git/info")
	check(t, m, map[string]bool{"sub/d": false, "e": false, "f": true})
}

// TestExemptMemoBounded: the answers Exempt keeps stay within memoMax
// and memoMaxBytes however many distinct paths are asked, short or 4 KiB
// long, and stay right.
func TestExemptMemoBounded(t *testing.T) {
	m, _ := newTest(t, map[string]string{".gitignore": "*.log\n"}, nil, false)
	long := strings.Repeat(strings.Repeat("d", 249)+"/", 16) // 4,000 bytes
	for i := range memoMax + 100 {
		dir := "d/"
		if i%8 == 0 {
			dir = long // 4,100 of them would hold 16 MiB
		}
		if m.Exempt(fmt.Sprintf("%s%d.go", dir, i), false) || !m.Exempt(fmt.Sprintf("%s%d.log", dir, i), false) {
			t.Fatalf("wrong answer at %d", i)
		}
		if i%1000 != 0 && i != memoMax+99 {
			continue
		}
		m.memoMu.Lock()
		n, b := len(m.memo), 0
		for k := range m.memo {
			b += len(k.rel)
		}
		counted := m.memoBytes
		m.memoMu.Unlock()
		if n > memoMax || b > memoMaxBytes || b != counted {
			t.Fatalf("after %d paths: %d answers kept by %d bytes of paths (counted %d), want at most %d and %d", 2*(i+1), n, b, counted, memoMax, memoMaxBytes)
		}
	}
}

func TestMalformedGlob(t *testing.T) {
	if _, err := New(t.TempDir(), []string{"ok/**", "bad[x"}, false); err == nil || !strings.Contains(err.Error(), "bad[x") {
		t.Fatalf("New with a malformed glob: err = %v, want one naming it", err)
	}
}

func TestConcurrent(t *testing.T) {
	m, _ := newTest(t, map[string]string{".gitignore": "*.log\n", "a/.gitignore": "!x.log\n"}, nil, false)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if !m.Exempt("b/y.log", false) || m.Exempt("a/x.log", false) {
					t.Error("wrong answer under concurrency")
					return
				}
				if i%20 == 0 {
					m.Invalidate("a")
				}
			}
		}()
	}
	wg.Wait()
}

// TestDeepChainAgreesWithGit: a chain of 240 nested directories with
// .gitignore files at depths 0, 80 and 160 (a negation, a directory
// rule, a glob), asked deepest first, then from the top, then again after
// the middle file changed and was invalidated: every answer is git's. The
// rules are looked up one level below the one before (ruleWalk), from a
// cache that the first questions fill only partly.
func TestDeepChainAgreesWithGit(t *testing.T) {
	root := t.TempDir()
	git(t, root, "", "init", "-q")
	dirAt := func(depth int) string { return strings.TrimSuffix(strings.Repeat("d/", depth), "/") }
	files := map[string]string{
		".gitignore":                  "*.log\n",
		dirAt(80) + "/.gitignore":     "!keep.log\nx/\n",
		dirAt(160) + "/.gitignore":    "*.go\n",
		dirAt(239) + "/placeholder":   "",
		dirAt(120) + "/x/placeholder": "",
	}
	write(t, root, files)
	var paths []string
	isDir := map[string]bool{}
	for depth := 239; depth >= 0; depth -= 13 {
		for _, name := range []string{"a.log", "keep.log", "x", "b.go", "c.txt"} {
			rel := strings.TrimPrefix(dirAt(depth)+"/"+name, "/")
			paths = append(paths, rel)
			isDir[rel] = name == "x"
		}
	}
	oracle := func() map[string]bool {
		want := map[string]bool{}
		var in []string
		for _, rel := range paths {
			if isDir[rel] {
				rel += "/" // as a directory, which git tells by the slash
			}
			in = append(in, rel)
		}
		// Without -v: git 2.39's verbose check-ignore crashes on paths
		// 30 levels deep. It lists the ignored paths.
		out := git(t, root, strings.Join(in, "\x00")+"\x00", "check-ignore", "--stdin", "-z", "--no-index")
		for _, p := range strings.Split(out, "\x00") {
			if p != "" {
				want[strings.TrimSuffix(p, "/")] = true
			}
		}
		return want
	}
	m, err := New(root, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(round string, order []string, want map[string]bool) {
		t.Helper()
		ignored := 0
		for _, rel := range order {
			if got := m.exempt(rel, isDir[rel]); got != want[rel] {
				t.Errorf("%s: exempt(%q) = %v, git says %v", round, rel, got, want[rel])
			}
			if want[rel] {
				ignored++
			}
		}
		if ignored == 0 || ignored == len(order) {
			t.Fatalf("%s: git ignores %d of %d paths: the chain tests nothing", round, ignored, len(order))
		}
	}
	want := oracle()
	ask("deepest first", paths, want)
	top := slices.Clone(paths)
	slices.Reverse(top)
	ask("from the top", top, want)
	write(t, root, map[string]string{dirAt(80) + "/.gitignore": "c.txt\n"})
	m.Invalidate(dirAt(80))
	ask("after the middle file changed", paths, oracle())
}
