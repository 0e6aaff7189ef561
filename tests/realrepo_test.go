package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealRepository is the main job on real input: a real Go module (the
// fsnotify module rubinofs itself depends on, from the module cache) is
// copied into a workspace, then through the mount it is put under git,
// built and vetted, read, edited and diffed, with no false denial.
func TestRealRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for the real-repository test (Debian package git)")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/fsnotify/fsnotify").Output()
	if err != nil {
		t.Fatalf("locating fsnotify in the module cache: %v", err)
	}
	src := strings.TrimSpace(string(out))
	m := newMount(t, nil, nil)
	// The copy itself goes through the mount: it creates every file.
	m.mustSh("cp -r " + shq(src) + "/. repo && chmod -R u+w repo")
	steps := []string{
		"cd repo && git init -q && git add -A && git commit -qm 'import fsnotify'",
		"cd repo && go build ./... && go vet ./...",
		"cd repo && git status --porcelain",
		"cd repo && cat fsnotify.go >/dev/null && sed -i 's/^package fsnotify$/package fsnotify \\/\\/ edited through rubinofs/' fsnotify.go",
		"cd repo && go build ./...",
		"cd repo && git diff --stat",
		"cd repo && git add -A && git commit -qm edit && git log --oneline | wc -l",
		"cd repo && git checkout -q HEAD~1 -- fsnotify.go && git status --porcelain",
		"cd repo && go test -count=1 -run XXX_none ./... >/dev/null",
	}
	for _, s := range steps {
		out, err := m.sh(s, "GOFLAGS=-mod=mod")
		if err != nil {
			t.Fatalf("%s: %v\n%s\ndenials: %v", s, err, out, m.denials())
		}
	}
	if diff := m.mustSh("cd repo && git diff HEAD --stat"); !strings.Contains(diff, "fsnotify.go") {
		t.Errorf("git checkout of the old version shows no diff: %q", diff)
	}
	if ds := m.denials(); len(ds) != 0 {
		t.Fatalf("false denials on a real repository: %v", ds)
	}
	if !strings.Contains(m.readBacking(filepath.Join("repo", ".git", "HEAD")), "ref:") {
		t.Fatal("the repository was not written to the backing directory")
	}
}
