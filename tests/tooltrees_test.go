package tests

// Tool-owned trees (docs/DESIGN.md#tool-trees): in a workspace without a
// .gitignore, what pip, npm and go made in an earlier session is cleaned
// or upgraded by a new session with no refusal, while ordinary files
// another session made stay guarded, and a marker dropped among existing
// files exempts none of them.

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard/ignore"
)

// withToolTrees recognises the shipped markers (guard.tool_trees'
// default), which newMount's bare config leaves out.
func withToolTrees(c *daemon.Config) { c.ToolTrees = ignore.DefaultToolMarkers }

// refusals is the mount's count of refusals (.rubino/status counts.denials).
func (m *mount) refusals() int {
	m.t.Helper()
	counts, _ := m.status()["counts"].(map[string]any)
	n, ok := counts["denials"].(float64)
	if !ok {
		m.t.Fatalf("status has no counts.denials: %v", m.status())
	}
	return int(n)
}

// toolSession runs script in a new session name and fails the test when
// it fails or when the mount refused anything meanwhile.
func (m *mount) toolSession(name, script string, env ...string) {
	m.t.Helper()
	before := m.refusals()
	if len(env) > 0 {
		script = "export " + strings.Join(env, " ") + "; " + script
	}
	out, err := m.sessionRun(name, script)
	if n := m.refusals() - before; err != nil || n != 0 {
		var lines []string
		for i, d := range m.denials() {
			if i < 5 {
				lines = append(lines, fmt.Sprint(d["path"], " ", d["code"]))
			}
		}
		m.t.Fatalf("session %s: %s: err %v, %d refusals (first: %v)\n%s", name, script, err, n, lines, out)
	}
}

// writeWheel writes a pure-Python wheel of package name at version into
// dir, with files modules besides __init__.py, as pip would build it.
func writeWheel(t *testing.T, dir, name, version string, modules int) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-py3-none-any.whl", name, version)))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	info := fmt.Sprintf("%s-%s.dist-info", name, version)
	files := map[string]string{
		name + "/__init__.py": fmt.Sprintf("VERSION = %q\n", version),
		info + "/METADATA":    fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version),
		info + "/WHEEL":       "Wheel-Version: 1.0\nGenerator: rubinofs-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	for i := 0; i < modules; i++ {
		files[fmt.Sprintf("%s/mod%d.py", name, i)] = fmt.Sprintf("def f():\n    return %d\n", i)
	}
	var record strings.Builder
	for p, c := range files {
		w, err := zw.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(c))
		sum := sha256.Sum256([]byte(c))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(c))
	}
	record.WriteString(info + "/RECORD,,\n")
	w, _ := zw.Create(info + "/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestToolTreesPipVenv: session A makes a venv and installs a local wheel
// into it with pip; a new session B reinstalls it (--force-reinstall) and
// a new session C removes the venv, with no refusal. The venv is made
// without its own copy of pip (ensurepip alone takes a minute on a busy
// 2-core machine): the venv's python runs python3's own pip, which it
// sees through --system-site-packages, and installs into the venv.
func TestToolTreesPipVenv(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	if out, err := exec.Command(python, "-c", "import venv, pip").CombinedOutput(); err != nil {
		t.Skipf("python3 cannot make a venv or has no pip (Debian: python3-venv, python3-pip): %s", out)
	}
	m := newMount(t, map[string]string{"README.md": "project\n"}, withToolTrees)
	wheels := filepath.Join(m.tmp, "wheels")
	os.Mkdir(wheels, 0o755)
	writeWheel(t, wheels, "tinypkg", "1.0", 20)
	pip := "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 v/bin/python -m pip install -q --no-index --find-links " + shq(wheels)
	m.toolSession("A", shq(python)+" -m venv --without-pip --system-site-packages v && "+pip+" tinypkg && test -f v/lib/python3*/site-packages/tinypkg/mod3.py")
	m.toolSession("B", pip+" --force-reinstall tinypkg && v/bin/python -c 'import tinypkg.mod3'")
	m.toolSession("C", "rm -rf v && test ! -e v")
}

// TestToolTreesNpm: session A installs a local tarball with npm; a new
// session B installs another version of it and removes node_modules with
// no refusal.
func TestToolTreesNpm(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not on PATH")
	}
	m := newMount(t, nil, withToolTrees)
	pkgs := filepath.Join(m.tmp, "pkgs")
	for _, v := range []string{"1.0.0", "2.0.0"} {
		src := filepath.Join(m.tmp, "src-"+v)
		os.MkdirAll(filepath.Join(src, "lib"), 0o755)
		os.WriteFile(filepath.Join(src, "package.json"), []byte(`{"name":"tinypkg","version":"`+v+`","main":"index.js"}`), 0o644)
		os.WriteFile(filepath.Join(src, "index.js"), []byte("module.exports = '"+v+"';\n"), 0o644)
		for i := 0; i < 20; i++ {
			os.WriteFile(filepath.Join(src, "lib", fmt.Sprintf("m%d.js", i)), []byte(fmt.Sprintf("module.exports = %d;\n", i)), 0o644)
		}
		cmd := exec.Command(npm, "pack", "--pack-destination", pkgs, "--silent")
		os.MkdirAll(pkgs, 0o755)
		cmd.Dir, cmd.Env = src, testEnv(m.tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm pack: %v\n%s", err, out)
		}
	}
	install := "npm install --offline --no-audit --no-fund --loglevel=error " + shq(pkgs)
	m.toolSession("A", install+"/tinypkg-1.0.0.tgz")
	m.toolSession("B", install+"/tinypkg-2.0.0.tgz && grep -q 2.0.0 node_modules/tinypkg/index.js")
	m.toolSession("C", "rm -rf node_modules && test ! -e node_modules")
}

// TestToolTreesGoCache: session A builds a module with GOCACHE in the
// workspace; a new session B cleans that cache with no refusal.
func TestToolTreesGoCache(t *testing.T) {
	m := newMount(t, map[string]string{
		"go.mod":   "module example.com/tiny\n\ngo 1.21\n",
		"a/a.go":   "package a\n\nfunc A() int { return 1 }\n",
		"b/b.go":   "package b\n\nfunc B() int { return 2 }\n",
		"c/c.go":   "package c\n\nfunc C() int { return 3 }\n",
		".keep.md": "no .gitignore here\n",
	}, withToolTrees)
	env := []string{"GOCACHE=$PWD/gocache", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod"}
	m.toolSession("A", "go build ./... && test -f gocache/README", env...)
	m.toolSession("B", "go clean -cache", env...)
	m.toolSession("C", "rm -rf gocache")
}

// TestToolTreesMarkerDoesNotExemptExisting: rm -rf of ordinary files
// another session made is refused; a pyvenv.cfg and CACHEDIR.TAGs that
// session B drops among them exempt none of them, only files made after
// the markers (removed by another session without a refusal).
func TestToolTreesMarkerDoesNotExemptExisting(t *testing.T) {
	m := newMount(t, nil, withToolTrees)
	m.toolSession("A", "mkdir -p lib/sub && echo a > lib/a.txt && echo b > lib/sub/b.txt")
	refused := func(session, script string) {
		t.Helper()
		before := m.refusals()
		if out, err := m.sessionRun(session, script); err == nil {
			t.Fatalf("%s passed: files another session made before any marker were not guarded\n%s", script, out)
		}
		if n := m.refusals() - before; n != 2 {
			t.Errorf("%s: %d refusals, want 2 (lib/a.txt, lib/sub/b.txt): %v", script, n, m.denials())
		}
		for _, f := range []string{"lib/a.txt", "lib/sub/b.txt"} {
			if _, err := os.Stat(m.backing(f)); err != nil {
				t.Errorf("%s: %v (must stay guarded)", f, err)
			}
		}
	}
	refused("C", "rm -rf lib")
	m.toolSession("B", "touch lib/pyvenv.cfg && echo '"+ignore.CacheDirSignature+"' | tee lib/CACHEDIR.TAG > lib/sub/CACHEDIR.TAG")
	refused("D", "rm lib/a.txt lib/sub/b.txt")
	// Made after the markers, by the same uid: free for a new session.
	m.toolSession("B", "mkdir -p lib/sub/out && echo new > lib/sub/out/new.o && echo new > lib/new.o")
	m.toolSession("E", "rm lib/sub/out/new.o lib/new.o")
}

// TestToolTreesOtherUid: a marker exempts only its own uid's files for
// its own uid's callers. Under root's tagged cache, a file uid 65534
// made stays guarded for root's sessions, and root's files for uid
// 65534; root's files made after the tag are free for a new root session.
func TestToolTreesOtherUid(t *testing.T) {
	m := newSharedMount(t, nil, withToolTrees)
	m.toolSession("A", "mkdir cache && chmod 0777 cache && echo '"+ignore.CacheDirSignature+"' > cache/CACHEDIR.TAG && echo r > cache/root.o")
	if out, err := m.nobody(`cd "$MNT" && echo n > cache/nobody.o`); err != nil {
		t.Fatalf("uid 65534 creating in the cache: %v\n%s", err, out)
	}
	before := m.refusals()
	if out, err := m.sessionRun("B", "rm cache/nobody.o"); err == nil {
		t.Errorf("root's session removed uid 65534's unread file under root's tag\n%s", out)
	}
	if out, err := m.nobody(`cd "$MNT" && rm -f cache/root.o`); err == nil {
		t.Errorf("uid 65534 removed root's unread file under root's tag\n%s", out)
	}
	if n := m.refusals() - before; n != 2 {
		t.Errorf("%d refusals, want 2: %v", n, m.denials())
	}
	m.toolSession("C", "rm cache/root.o cache/CACHEDIR.TAG")
}

// TestToolTreesAtMount: trees whose markers were there before the mount
// are exempt whole, like build outputs under an accepted ignore rule: a
// session removes files in them that nobody read.
func TestToolTreesAtMount(t *testing.T) {
	m := newMount(t, map[string]string{
		"node_modules/dep/index.js":                   "module.exports = 1;\n",
		"v/pyvenv.cfg":                                "home = /usr/bin\n",
		"v/lib/python3/site-packages/dep/__init__.py": "",
		"target/CACHEDIR.TAG":                         ignore.CacheDirSignature + "\n",
		"target/debug/app":                            "binary\n",
		"src/main.rs":                                 "fn main() {}\n",
	}, withToolTrees)
	m.toolSession("A", "rm -rf node_modules v target && test ! -e v")
	before := m.refusals()
	if out, err := m.sessionRun("B", "rm src/main.rs"); err == nil || m.refusals() != before+1 {
		t.Errorf("rm of an unread source file passed or was not counted: %v\n%s", err, out)
	}
}

// TestToolTreesRenameAndLink: no rename or link through the mount gives
// guarded content a tool tree's exemption. A session that read nothing
// may not free files that predate the mount by:
//   - renaming their directory to node_modules, or into a tree whose
//     marker predates the mount (rename(2): EXDEV);
//   - moving a file into such a tree (refused as an overwrite: it passes
//     once read);
//   - linking a file there (EXDEV).
//
// Old files made markers pass, and free nothing older than the change: a
// file renamed to pyvenv.cfg, an ignored build output moved to one, a
// README rewritten to the Go cache's (a file marker counts from its
// ctime); the clobber of a sibling is refused. A link of an ignored file
// at a guarded name is refused (EXDEV): writes through the ignored name
// would change it unguarded. A rename inside a tree stays free.
func TestToolTreesRenameAndLink(t *testing.T) {
	files := map[string]string{"src/main.c": mainC, "src/d/x.c": "int x;\n", "o2/a.c": "int a;\n", "o2/b.c": "int b;\n",
		"o3/c.c": "int c;\n", "o4/e.c": "int e;\n", "r/README": "hello\n", "r/b.c": "int b;\n",
		"t/node_modules/pkg/index.js": "module.exports = 1;\n"}
	all := map[string]string{".gitignore": "build/\n", "build/out.o": "obj\n"}
	maps.Copy(all, files)
	m := newMount(t, all, withToolTrees)
	intact := func(when string, except ...string) {
		t.Helper()
		for rel, want := range files {
			if slices.Contains(except, rel) {
				continue
			}
			if got := m.readBacking(rel); got != want {
				t.Fatalf("%s: %s = %q, want %q", when, rel, got, want)
			}
		}
	}
	for i, c := range []struct{ script, want string }{
		{`python3 -c 'import os; os.rename("src", "node_modules")'`, "[Errno 18] Invalid cross-device link"},
		{`python3 -c 'import os; os.rename("src/d", "t/node_modules/d")'`, "[Errno 18] Invalid cross-device link"},
		{`mv o3/c.c t/node_modules/pkg/`, "Permission denied"},
		{`ln o4/e.c t/node_modules/pkg/e.c`, "Invalid cross-device link"},
		{`ln build/out.o o4/f.c`, "Invalid cross-device link"},
	} {
		out, err := m.sessionRun(fmt.Sprint("agent", i), c.script) // a name's refusals last until it is registered again
		if err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("%s: %v, want %q\n%s", c.script, err, c.want, out)
		}
		intact("after " + c.script)
	}
	out, err := cli(t, m.tmp, "denials", "--mount", m.mnt, "--all")
	if err != nil {
		t.Fatalf("rubinofs denials: %v\n%s", err, out)
	}
	for _, want := range []string{
		"move-exempt exempt-name: refusing to move out of the guard src: at node_modules it would be a tool-owned tree's marker",
		"move-exempt exempt-name: refusing to move out of the guard src/d: at t/node_modules/d",
		"move-exempt unread: refusing to move out of the guard o3/c.c: read it first",
		"link-exempt exempt-name: refusing to link o4/e.c at t/node_modules/pkg/e.c",
		"link-exempt exempt-name: refusing to give an exempt name to o4/f.c: build/out.o is exempt",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rubinofs denials lacks %q:\n%s", want, out)
		}
	}
	m.toolSession("marker", `python3 -c 'import os; os.rename("o2/a.c", "o2/pyvenv.cfg")' && mv build/out.o o4/pyvenv.cfg && `+
		`cat r/README >/dev/null && echo "This directory holds cached build artifacts from the Go build system." > r/README`)
	for _, f := range []string{"o2/b.c", "o4/e.c", "r/b.c", "o2/pyvenv.cfg"} { // the old file made a marker too
		if out, err := m.sessionRun("clobber", "echo clobber > "+f); err == nil || !strings.Contains(out, "Permission denied") {
			t.Fatalf("the clobber of %s passed after an old file was made a marker beside it: %v\n%s", f, err, out)
		}
	}
	intact("after the markers", "o2/a.c", "r/README")
	m.toolSession("reader", "cat o3/c.c >/dev/null && mv o3/c.c t/node_modules/pkg/ && mv t/node_modules/pkg t/node_modules/pkg2")
}

// TestToolTreesRenameRace: two renames through the mount at once, an
// empty old directory to node_modules and an unread old file into that
// directory, never leave the file below the new marker: each rename's
// tool-tree check and change run with no other such rename between
// (before, each check passed on the state before the other, and the file
// landed in the tree in about one round of five). Each of 150 rounds
// starts both renames together from two threads.
func TestToolTreesRenameRace(t *testing.T) {
	const rounds = 150
	files := map[string]string{}
	for i := range rounds {
		files[fmt.Sprintf("src/f%d", i)] = "int f;\n"
		files[fmt.Sprintf("p%d/e/.keep", i)] = ""
	}
	m := newMount(t, files, withToolTrees)
	for i := range rounds { // an empty directory: nothing covered below it
		if err := os.Remove(m.backing(fmt.Sprintf("p%d/e/.keep", i))); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf(`
import os, threading
for i in range(%d):
    bar = threading.Barrier(2)
    def a():
        bar.wait()
        try: os.rename("p%%d/e" %% i, "p%%d/node_modules" %% i)
        except OSError: pass
    def b():
        bar.wait()
        try: os.rename("src/f%%d" %% i, "p%%d/e/f" %% i)
        except OSError: pass
    ts = [threading.Thread(target=a), threading.Thread(target=b)]
    for th in ts: th.start()
    for th in ts: th.join()
`, rounds)
	if out, err := m.sessionRun("racer", "python3 -c "+shq(script)); err != nil {
		t.Fatalf("the racing renames: %v\n%s", err, out)
	}
	var landed []string
	for i := range rounds {
		if _, err := os.Lstat(m.backing(fmt.Sprintf("p%d/node_modules/f", i))); err == nil {
			landed = append(landed, fmt.Sprint(i))
		}
	}
	if len(landed) > 0 {
		t.Fatalf("an unread file landed below a node_modules made from an old directory in rounds %v of %d", landed, rounds)
	}
}

// TestRewindForcedNoWidening: a rewind applied over another session's
// conflict (`rubinofs rewind --force`) does not give what that session
// put in a directory an exempt name or a tool tree's exemption. Session A
// renames t/node_modules to t/nm and git-ignored gen/d to lib/d; session
// B moves old unread files into both; A's forced rewind refuses both
// renames back (EXDEV, in its errors and A's denials), so no session may
// clobber the old files unread; the plain rewind of a rename from gen/
// with nothing added below it still applies.
func TestRewindForcedNoWidening(t *testing.T) {
	m := newMount(t, map[string]string{"t/node_modules/pkg/i.js": "x\n", "gen/.gitignore": "*\n",
		"gen/d/a.o": "o\n", "gen/e/b.o": "o\n", "src/old.c": "int old;\n", "src/old2.c": "int old2;\n"}, withToolTrees)
	if out, err := m.sessionRun("A", `mv t/node_modules t/nm && mv gen/d lib_d && mv gen/e lib_e`); err != nil {
		t.Fatalf("session A: %v\n%s", err, out)
	}
	if out, err := m.sessionRun("B", `mv src/old.c t/nm/ && mv src/old2.c lib_d/`); err != nil {
		t.Fatalf("session B: %v\n%s", err, out)
	}
	out, err := cli(t, m.tmp, "rewind", "--mount", m.mnt, "--session", "A", "--to", "cp000000", "--force")
	if err == nil || strings.Count(out, "invalid cross-device link") != 2 {
		t.Fatalf("forced rewind: %v, want two renames refused with EXDEV\n%s", err, out)
	}
	for rel, want := range map[string]string{"t/nm/old.c": "int old;\n", "lib_d/old2.c": "int old2;\n", "gen/e/b.o": "o\n"} {
		if got := m.readBacking(rel); got != want {
			t.Fatalf("after the forced rewind: %s = %q, want %q\n%s", rel, got, want, out)
		}
	}
	denials, err := cli(t, m.tmp, "denials", "--mount", m.mnt, "--session", "A")
	if err != nil || !strings.Contains(denials, "refusing to move out of the guard t/nm: at t/node_modules") ||
		!strings.Contains(denials, "refusing to move out of the guard lib_d: gen/d is exempt") {
		t.Fatalf("rubinofs denials --session A: %v\n%s", err, denials)
	}
}
