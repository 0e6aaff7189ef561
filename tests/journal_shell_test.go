package tests

// Helpers of the change-journal tests (journal_rewind_test.go,
// journal_faults_test.go): a git repository as the workspace, a guard
// session whose root is a shell the test sends commands to
// (sessionShell), and a manifest of a tree to compare byte for byte.

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// journalRepo makes tmp/ws a git repository, before any mount sees it:
// committed files (text, a binary, a symlink, a script without its x bit,
// a JSON file, a subdirectory), an ignored directory build/ holding a
// file, and a second branch feature that changes branch.txt, deletes
// feature-gone.txt and adds feature-new.txt and feature-dir/x.txt. main is
// checked out. It returns the workspace.
func journalRepo(t *testing.T, tmp string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (Debian package git)")
	}
	ws := filepath.Join(tmp, "ws")
	script := `set -e
mkdir -p ws && cd ws
git init -q -b main
printf '# demo\n' > README.md
mkdir -p src && printf 'line one\nline two\n' > src/app.txt
printf 'alpha\n' > notes.txt
printf 'delete me\n' > gone.txt
printf 'to be renamed\n' > old.txt
printf 'to be overwritten by cp\n' > target.txt
printf '{"a": 1}\n' > config.json
printf '#!/bin/sh\necho hi\n' > run.sh && chmod 644 run.sh
printf '\000\001\002binary' > blob.bin
ln -s notes.txt link
printf 'main branch\n' > branch.txt
printf 'only on main\n' > feature-gone.txt
printf 'build/\n*.log\n' > .gitignore
git add -A && git commit -qm main
mkdir -p build && printf 'object\000' > build/out.o
git checkout -qb feature
printf 'feature branch\n' > branch.txt
git rm -q feature-gone.txt
printf 'only on feature\n' > feature-new.txt
mkdir -p feature-dir && printf 'x\n' > feature-dir/x.txt
git add -A && git commit -qm feature
git checkout -q main`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = tmp
	cmd.Env = testEnv(tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("making the repository: %v\n%s", err, out)
	}
	return ws
}

// journalMount mounts a fresh journalRepo with the CLI binary (`mount
// --daemon`, the journal on by default) with the extra mount flags.
func journalMount(t *testing.T, extra ...string) *cliMount {
	t.Helper()
	tmp := t.TempDir()
	ws := journalRepo(t, tmp)
	return newCLIMount(t, tmp, ws, filepath.Join(tmp, "state"), extra...)
}

// sessionShell is a guard session registered by `rubinofs run --session
// NAME` whose root is a shell in the mount root that runs the scripts the
// test sends (run), one at a time, each in a subshell with stdin from
// /dev/null. The session lives until close: every script runs in the
// same session, and the test can look at the tree between them.
type sessionShell struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string // the shell's output, a line at a time; closed at EOF
	stderr *lockedBuffer
	closed bool
}

// doneRe is the marker the shell prints after each script, with its exit
// status: it ends the line (a script's output may lack a final newline).
var doneRe = regexp.MustCompile(`__rubinofs_done (\d+)$`)

// startSession starts a session shell named name on m (the rubinofs
// binary's directory first on its PATH); t.Cleanup closes it, before the
// mount's cleanup unmounts.
func (m *cliMount) startSession(name string) *sessionShell {
	m.t.Helper()
	loop := `while IFS= read -r line; do ( eval "$(printf %s "$line" | base64 -d)" ) </dev/null 2>&1; echo "__rubinofs_done $?"; done`
	s := &sessionShell{t: m.t, name: name, lines: make(chan string, 1024), stderr: &lockedBuffer{}}
	s.cmd = exec.Command(rubinofsBin(m.t), "run", "--mount", m.mnt, "--session", name, "--", "/bin/sh", "-c", "cd "+shq(m.mnt)+" && "+loop)
	s.cmd.Dir = m.tmp
	s.cmd.Env = append(testEnv(m.tmp), "PATH="+filepath.Dir(rubinofsBin(m.t))+":"+os.Getenv("PATH"))
	s.cmd.Stderr = s.stderr
	s.cmd.WaitDelay = 10 * time.Second
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		m.t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		m.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		m.t.Fatalf("rubinofs run --session %s: %v", name, err)
	}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	m.t.Cleanup(s.close)
	return s
}

// run runs script with /bin/sh in the session (cd'd into the mount root)
// and returns its output (stdout and stderr) and exit status. It fails the
// test when the shell exited, or when the script has not finished after
// cliFailsafe.
func (s *sessionShell) run(script string) (string, int) {
	s.t.Helper()
	s.send(script)
	return s.result(script)
}

// send starts script in the session without waiting for it; result
// collects its output.
func (s *sessionShell) send(script string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, base64.StdEncoding.EncodeToString([]byte(script))+"\n"); err != nil {
		s.t.Fatalf("session %s: sending %q: %v\n%s", s.name, script, err, s.stderr.String())
	}
}

// result waits for the script sent last (send) to finish and returns its
// output and exit status (run).
func (s *sessionShell) result(script string) (string, int) {
	s.t.Helper()
	var out strings.Builder
	deadline := time.After(cliFailsafe) // a failsafe, not a timing assertion
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("session %s exited during %q; output:\n%s\nstderr:\n%s", s.name, script, out.String(), s.stderr.String())
			}
			if m := doneRe.FindStringSubmatchIndex(line); m != nil {
				out.WriteString(line[:m[0]])
				code, _ := strconv.Atoi(line[m[2]:m[3]])
				return out.String(), code
			}
			out.WriteString(line + "\n")
		case <-deadline:
			s.t.Fatalf("session %s: %q still running after %v; output so far:\n%s", s.name, script, cliFailsafe, out.String())
		}
	}
}

// must runs script (run) and fails the test unless it exits 0.
func (s *sessionShell) must(script string) string {
	s.t.Helper()
	out, code := s.run(script)
	if code != 0 {
		s.t.Fatalf("session %s: %q: exit %d\n%s", s.name, script, code, out)
	}
	return out
}

// close ends the session: the shell reads EOF and exits, and is waited
// for (killed after cliFailsafe). Idempotent.
func (s *sessionShell) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.in.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(cliFailsafe): // a failsafe, not a timing assertion
		s.cmd.Process.Kill()
		<-done
		s.t.Errorf("session %s did not exit after its stdin closed; killed", s.name)
	}
	for range s.lines { // drain: the reader goroutine ends at EOF
	}
}

// manifest lists every path under root but .git and the paths skip names
// (and everything below them), sorted, one a line: the path, its type,
// its permission bits in octal, and the sha256 of a file's bytes or the
// target of a symlink. Two trees with the same manifest are byte for byte
// the same, modes included.
func manifest(t *testing.T, root string, skip ...string) string {
	t.Helper()
	skipped := map[string]bool{".git": true, ".rubino": true}
	for _, s := range skip {
		skipped[s] = true
	}
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if skipped[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		perm := fmt.Sprintf("%04o", fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			lines = append(lines, fmt.Sprintf("%s file %s %s", rel, perm, hex.EncodeToString(sum[:8])))
		case fi.IsDir():
			lines = append(lines, fmt.Sprintf("%s dir %s", rel, perm))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s symlink -> %s", rel, target))
		default:
			lines = append(lines, fmt.Sprintf("%s %v", rel, fi.Mode().Type()))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("manifest of %s: %v", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// sameManifest fails the test, naming the lines that differ, unless got
// equals want.
func sameManifest(t *testing.T, what, want, got string) {
	t.Helper()
	if got == want {
		return
	}
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var diff []string
	for l := range w {
		if !g[l] {
			diff = append(diff, "- "+l)
		}
	}
	for l := range g {
		if !w[l] {
			diff = append(diff, "+ "+l)
		}
	}
	sort.Strings(diff)
	t.Errorf("%s: the tree differs from the one expected (- expected, + found):\n%s", what, strings.Join(diff, "\n"))
}

// changeLines parses the text of `rubinofs changes` into path -> status
// letter; a rename's line is also found under its old name, as "R<".
func changeLines(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "  ")
		if len(f) < 3 {
			t.Fatalf("a line of rubinofs changes is not STATUS  PATH  BEFORE..AFTER: %q", line)
		}
		status, name := strings.TrimSpace(f[0]), f[1]
		if from, to, ok := strings.Cut(name, " -> "); ok {
			got[from] = status + "<"
			name = to
		}
		got[name] = status
	}
	return got
}

// checkpointIDs lists the ids in a checkpoints file's JSON lines, oldest
// first, with their labels.
func checkpointIDs(t *testing.T, b string) (ids, labels []string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(b), "\n") {
		if line == "" {
			continue
		}
		var cp struct {
			ID    string `json:"id"`
			Label string `json:"label"`
		}
		if err := json.Unmarshal([]byte(line), &cp); err != nil {
			t.Fatalf("a checkpoints line is not JSON: %v: %q", err, line)
		}
		ids, labels = append(ids, cp.ID), append(labels, cp.Label)
	}
	return ids, labels
}

// undoRe finds the automatic checkpoint in a rewind's output.
var undoRe = regexp.MustCompile(`(?m)^undo with: rubinofs rewind .*--to (cp[0-9]+)$`)

// countsRe finds a rewind's counts line, its last.
var countsRe = regexp.MustCompile(`(?m)^restored (\d+), removed (\d+), conflicts (\d+), unrecoverable (\d+)$`)

// rewindCounts returns the four figures of a rewind's output, failing the
// test when it has no counts line.
func rewindCounts(t *testing.T, out string) (restored, removed, conflicts, unrecoverable int) {
	t.Helper()
	m := countsRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no counts line in the rewind's output:\n%s", out)
	}
	n := make([]int, 4)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	return n[0], n[1], n[2], n[3]
}
