package gitsafe

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// git runs git in dir and returns its output.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t.invalid"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func write(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// holds asks r about the file at rel in ws, read from disk, and reports
// whether content was asked for.
func holds(t *testing.T, r *Repos, ws, rel string) (held, read bool) {
	t.Helper()
	p := filepath.Join(ws, rel)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	var f *os.File
	held, err = r.Holds(rel, st.Size(), func() (io.Reader, error) {
		read = true
		f, err = os.Open(p)
		return f, err
	})
	if f != nil {
		f.Close()
	}
	if err != nil {
		t.Fatalf("Holds(%s): %v", rel, err)
	}
	return held, read
}

func requireGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (Debian package git)")
	}
}

// TestHolds: committed bytes are held; a dirty change is not; a staged
// change is held through the index, and the HEAD version through HEAD;
// untracked files and files in no repository are not held and not read.
func TestHolds(t *testing.T) {
	requireGit(t)
	ws := t.TempDir()
	repo := filepath.Join(ws, "proj")
	write(t, filepath.Join(repo, "a.txt"), "a\n")
	write(t, filepath.Join(repo, "sub/b.txt"), "b\n")
	write(t, filepath.Join(ws, "outside.txt"), "o\n")
	git(t, repo, "init", "-q")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "c")
	r := New(ws, ws)

	for _, rel := range []string{"proj/a.txt", "proj/sub/b.txt"} {
		if held, _ := holds(t, r, ws, rel); !held {
			t.Errorf("%s: committed bytes not held", rel)
		}
	}
	// Both lookups (and the next one) used one parse of the index.
	parses := func() int { r.mu.Lock(); defer r.mu.Unlock(); return r.repos["proj"].parses }
	if n := parses(); n != 1 {
		t.Errorf("%d index parses for an unchanged index, want 1", n)
	}
	write(t, filepath.Join(repo, "a.txt"), "dirty\n")
	if held, _ := holds(t, r, ws, "proj/a.txt"); held {
		t.Error("a dirty change is held")
	}
	// Staged: the index holds it (HEAD does not).
	git(t, repo, "add", "a.txt")
	if held, _ := holds(t, r, ws, "proj/a.txt"); !held {
		t.Error("a staged change is not held (the index was not reread after git rewrote it)")
	}
	if n := parses(); n != 2 {
		t.Errorf("%d index parses after one rewrite by git, want 2", n)
	}
	// The HEAD version while the index has the staged one.
	write(t, filepath.Join(repo, "a.txt"), "a\n")
	if held, _ := holds(t, r, ws, "proj/a.txt"); !held {
		t.Error("HEAD's bytes are not held while the index differs")
	}
	write(t, filepath.Join(repo, "new.txt"), "n\n")
	if held, read := holds(t, r, ws, "proj/new.txt"); held || read {
		t.Errorf("untracked: held %v, read %v; want neither", held, read)
	}
	if held, read := holds(t, r, ws, "outside.txt"); held || read {
		t.Errorf("outside any repository: held %v, read %v; want neither", held, read)
	}
	// A file that changed size since its stat is not held.
	held, err := r.Holds("proj/sub/b.txt", 1, func() (io.Reader, error) { return strings.NewReader("b\n"), nil })
	if held || err != nil {
		t.Errorf("size mismatch: held %v, err %v", held, err)
	}
}

// TestHoldsWorktree: a linked worktree (a `.git` file with gitdir:) has its
// own index and HEAD.
func TestHoldsWorktree(t *testing.T) {
	requireGit(t)
	ws := t.TempDir()
	main := filepath.Join(ws, "main")
	write(t, filepath.Join(main, "f.txt"), "one\n")
	git(t, main, "init", "-q", "-b", "main")
	git(t, main, "add", "-A")
	git(t, main, "commit", "-qm", "one")
	git(t, main, "branch", "other")
	write(t, filepath.Join(main, "f.txt"), "two\n")
	git(t, main, "commit", "-qam", "two")
	git(t, main, "worktree", "add", "-q", "../wt", "other")
	r := New(ws, ws)
	if held, _ := holds(t, r, ws, "wt/f.txt"); !held {
		t.Error("the worktree's checked-out bytes are not held")
	}
	write(t, filepath.Join(ws, "wt/f.txt"), "two\n") // main's bytes, not the worktree's
	if held, _ := holds(t, r, ws, "wt/f.txt"); held {
		t.Error("another branch's bytes are held by the worktree")
	}
}

// TestHoldsSHA256Skipped: a SHA-256 repository answers false, without
// reading the file.
func TestHoldsSHA256Skipped(t *testing.T) {
	requireGit(t)
	ws := t.TempDir()
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	cmd := exec.Command("git", "init", "-q", "--object-format=sha256")
	cmd.Dir = ws
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("this git cannot make a SHA-256 repository: %v %s", err, out)
	}
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-qm", "c")
	if held, read := holds(t, New(ws, ws), ws, "f.txt"); held || read {
		t.Errorf("SHA-256 repository: held %v, read %v; want neither", held, read)
	}
}

// BenchmarkHoldsCachedIndex: one lookup in a 2000-entry index, parsed once.
func BenchmarkHoldsCachedIndex(b *testing.B) {
	t := b
	ws := b.TempDir()
	for i := 0; i < 2000; i++ {
		write(t, filepath.Join(ws, "d", strings.Repeat("x", i%7+1), "f"+strings.Repeat("y", i%13)+string(rune('a'+i%26))+".txt"), "content\n")
	}
	git(t, ws, "init", "-q")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-qm", "c")
	r := New(ws, ws)
	rel := "d/x/fa.txt"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		held, err := r.Holds(rel, 8, func() (io.Reader, error) { return strings.NewReader("content\n"), nil })
		if !held || err != nil {
			b.Fatalf("held %v err %v", held, err)
		}
	}
}

// TestHoldsStash: bytes saved in the latest stash entry's working tree are
// held (git stash saves them, then a separate git reset --hard replaces
// the file); bytes in no stash, index or HEAD are not.
func TestHoldsStash(t *testing.T) {
	requireGit(t)
	ws := t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "committed\n")
	git(t, ws, "init", "-q")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-qm", "c")
	r := New(ws, ws)
	write(t, filepath.Join(ws, "a.txt"), "dirty work\n")
	if held, _ := holds(t, r, ws, "a.txt"); held {
		t.Fatal("dirty bytes held before the stash")
	}
	git(t, ws, "stash", "-q")
	write(t, filepath.Join(ws, "a.txt"), "dirty work\n") // as before the stash's reset
	if held, _ := holds(t, r, ws, "a.txt"); !held {
		t.Fatal("bytes saved in stash@{0} not held")
	}
	write(t, filepath.Join(ws, "a.txt"), "other work\n")
	if held, _ := holds(t, r, ws, "a.txt"); held {
		t.Fatal("bytes in no stash held")
	}
}
