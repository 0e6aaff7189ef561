package tests

// No write through the mount widens what is exempt from the guard
// (docs/DESIGN.md#exempt-widening): a .gitignore or .git/info/exclude a
// session writes is guarded and journaled like any file, and the rules it
// adds exempt nothing until the mount's owner runs `rubinofs policy
// reload` from outside every session; a remount does not accept them.
// Rules that were there at the mount keep build outputs free.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// sessionRun runs script with bash in the mount root inside a session
// named name (`rubinofs run --session NAME`), which ends with it, and
// returns the output and error.
func (m *mount) sessionRun(name, script string) (string, error) {
	m.t.Helper()
	cmd := exec.Command(rubinofsBin(m.t), "run", "--mount", m.mnt, "--session", name, "--",
		"bash", "-c", "cd "+shq(m.mnt)+" && "+script)
	cmd.Dir = m.tmp
	cmd.Env = append(testEnv(m.tmp), "PATH="+filepath.Dir(rubinofsBin(m.t))+":"+os.Getenv("PATH"))
	return runCombined(m.t, cmd)
}

// policyPending returns the pending rule files .rubino/status lists.
func (m *mount) policyPending() []string {
	m.t.Helper()
	pol, _ := m.status()["policy"].(map[string]any)
	if pol == nil {
		m.t.Fatalf("no policy key in .rubino/status: %v", m.status())
	}
	var out []string
	for _, p := range pol["pending"].([]any) {
		out = append(out, p.(string))
	}
	return out
}

// remount unmounts m and mounts the same workspace again with cfg (the
// same state directory): m.d is the new daemon.
func (m *mount) remount(cfg daemon.Config) {
	m.t.Helper()
	if err := m.d.Close(); err != nil {
		m.t.Fatal(err)
	}
	<-m.d.Done()
	d, err := daemon.Start(cfg)
	if err != nil {
		m.t.Fatalf("remount: %v", err)
	}
	m.d = d
	m.t.Cleanup(func() {
		if err := d.Close(); err != nil {
			m.t.Errorf("unmount: %v", err)
		}
		<-d.Done()
	})
}

const mainC = "int main(void) { return 0; }\n"

// TestExemptWideningGitignore: `echo "*" > .gitignore; echo clobber >
// main.c` in a session is refused at main.c (the new rule exempts
// nothing yet), the created .gitignore is journaled (`rubinofs changes`
// lists it, `rewind` removes it), and status and `rubinofs policy` name
// it as waiting for `rubinofs policy reload`.
func TestExemptWideningGitignore(t *testing.T) {
	m := newMount(t, map[string]string{"main.c": mainC}, nil)
	out, err := m.sessionRun("agent", `echo "*" > .gitignore; echo clobber > main.c`)
	if err == nil {
		t.Fatalf("the clobber of main.c passed after the session wrote * into .gitignore\n%s", out)
	}
	if got := m.readBacking("main.c"); got != mainC {
		t.Fatalf("main.c = %q after the refused clobber", got)
	}
	if got := m.readBacking(".gitignore"); got != "*\n" {
		t.Fatalf(".gitignore = %q: the session's create should pass", got)
	}
	if got := m.policyPending(); len(got) != 1 || got[0] != ".gitignore" {
		t.Errorf(".rubino/status policy.pending = %v, want [.gitignore]", got)
	}
	out, err = cli(t, m.tmp, "policy", "--mount", m.mnt)
	if err != nil || !strings.Contains(out, "+ *") || !strings.Contains(out, "rubinofs policy reload") {
		t.Errorf("rubinofs policy: %v\n%s", err, out)
	}

	out, err = cli(t, m.tmp, "changes", "--mount", m.mnt, "--session", "agent")
	if err != nil {
		t.Fatalf("rubinofs changes: %v\n%s", err, out)
	}
	if got := changeLines(t, out); got[".gitignore"] != "A" {
		t.Fatalf("rubinofs changes does not list the created .gitignore:\n%s", out)
	}
	out, err = cli(t, m.tmp, "rewind", "--mount", m.mnt, "--session", "agent", "--to", "cp000000")
	if err != nil {
		t.Fatalf("rubinofs rewind: %v\n%s", err, out)
	}
	if _, err := os.Lstat(m.backing(".gitignore")); !os.IsNotExist(err) {
		t.Fatalf("the rewind left .gitignore (%v)\n%s", err, out)
	}
	if got := m.policyPending(); len(got) != 0 {
		t.Errorf("pending after the rewind: %v", got)
	}
}

// TestExemptWideningExcludeRemount: a session appends "*" to
// .git/info/exclude (guarded: read first; journaled), and its clobber of
// main.c is refused, in this mount and after a remount on the same state
// directory. `rubinofs policy` and `policy reload` by uid 65534 are
// refused, and so is a reload inside a session; by the owner, outside
// every session, it accepts the rule, and main.c is exempt.
func TestExemptWideningExcludeRemount(t *testing.T) {
	var cfg daemon.Config
	m := newMount(t, map[string]string{"main.c": mainC, ".git/info/exclude": "# git ls-files --others --exclude-from=.git/info/exclude\n"},
		func(c *daemon.Config) {
			c.Options = append(c.Options, "allow_other")
			cfg = *c
		})
	for _, d := range []string{m.tmp, filepath.Dir(m.tmp)} { // uid 65534 reaches the mount
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.mustFail(`echo "*" >> .git/info/exclude`) // guarded like any file: unread

	out, err := m.sessionRun("agent", `cat .git/info/exclude >/dev/null && echo "*" >> .git/info/exclude && echo clobber > main.c`)
	if err == nil || m.readBacking("main.c") != mainC {
		t.Fatalf("the clobber of main.c passed after the session added * to .git/info/exclude\n%s", out)
	}
	if !strings.HasSuffix(m.readBacking(".git/info/exclude"), "*\n") {
		t.Fatalf("the session's append to the exclude file did not pass\n%s", out)
	}
	out, err = cli(t, m.tmp, "changes", "--mount", m.mnt, "--session", "agent")
	if got := changeLines(t, out); err != nil || got[".git/info/exclude"] != "M" {
		t.Fatalf("rubinofs changes does not list .git/info/exclude as modified: %v\n%s", err, out)
	}

	m.remount(cfg)
	if out, err := m.sessionRun("agent2", `echo clobber > main.c`); err == nil || m.readBacking("main.c") != mainC {
		t.Fatalf("after a remount the session's exclude rule exempts main.c\n%s", out)
	}
	if got := m.policyPending(); len(got) != 1 || got[0] != ".git/info/exclude" {
		t.Fatalf("pending after the remount = %v, want [.git/info/exclude]", got)
	}

	bin := rubinofsBin(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	nb := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "policy", "reload", "--mount", m.mnt)
	nb.Dir = "/"
	out, err = runCombined(t, nb)
	if err == nil || !strings.Contains(out, "only the mount owner") {
		t.Fatalf("policy reload as uid 65534: %v, want a refusal naming the owner\n%s", err, out)
	}
	nb = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "policy", "--mount", m.mnt)
	nb.Dir = "/"
	if out, err := runCombined(t, nb); err == nil || !strings.Contains(out, "only the mount owner") {
		t.Fatalf("rubinofs policy as uid 65534: %v, want a refusal naming the owner\n%s", err, out)
	}
	if out, err := m.sessionRun("agent3", `rubinofs policy reload`); err == nil || !strings.Contains(out, "outside every session") {
		t.Fatalf("policy reload inside a session: %v, want a refusal\n%s", err, out)
	}
	if got := m.policyPending(); len(got) != 1 {
		t.Fatalf("a refused reload accepted the rule: pending %v", got)
	}

	if out, err := cli(t, m.tmp, "policy", "reload", "--mount", m.mnt); err != nil {
		t.Fatalf("policy reload by the owner: %v\n%s", err, out)
	}
	if got := m.policyPending(); len(got) != 0 {
		t.Fatalf("pending after the reload: %v", got)
	}
	if out, err := m.sessionRun("agent4", `echo accepted > main.c`); err != nil || m.readBacking("main.c") != "accepted\n" {
		t.Fatalf("after the owner's reload main.c is not exempt: %v\n%s", err, out)
	}
	var doc struct {
		Accepted map[string][]string `json:"accepted"`
	}
	out, err = cli(t, m.tmp, "policy", "--mount", m.mnt, "--json")
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Accepted[".git/info/exclude"]) != 1 {
		t.Fatalf("rubinofs policy --json after the reload: %v\n%s", err, out)
	}
}

// TestExemptWideningBuildOutputsFree: bin/ ignored when the mount started
// stays exempt: a session's `go build -o bin/x` replaces a bin/x another
// session built and it never read, and nothing under bin/ is journaled.
func TestExemptWideningBuildOutputsFree(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	m := newMount(t, map[string]string{
		".gitignore": "bin/\n",
		"go.mod":     "module example.com/x\n\ngo 1.21\n",
		"main.go":    "package main\n\nfunc main() {}\n",
		"bin/y":      "an old output nobody read\n",
	}, nil)
	m.mustSh("go build -o bin/x .")
	before := m.readBacking("bin/x")
	if out, err := m.sessionRun("builder", `cat main.go >/dev/null && echo '// v2' >> main.go && go build -o bin/x . && echo rebuilt > bin/y`); err != nil {
		t.Fatalf("a build under a rule that predates the session was refused: %v\n%s", err, out)
	}
	if got := m.readBacking("bin/x"); got == before || !strings.HasPrefix(got, "\x7fELF") {
		t.Fatalf("bin/x was not rebuilt: %.20q", got)
	}
	out, err := cli(t, m.tmp, "changes", "--mount", m.mnt, "--session", "builder")
	if err != nil || strings.Contains(out, "bin/") {
		t.Fatalf("rubinofs changes lists ignored build outputs: %v\n%s", err, out)
	}
	if got := m.policyPending(); len(got) != 0 {
		t.Fatalf("pending = %v, want none", got)
	}
}

// TestExemptWideningOutsideEdit: a rule the owner writes outside the mount
// (in the backing directory, seen by the watcher) applies at once, as
// before; the same owner's rule written through the mount, by a shell in
// no session, waits for `rubinofs policy reload` like a session's.
func TestExemptWideningOutsideEdit(t *testing.T) {
	m := newMount(t, map[string]string{"main.c": mainC, "notes.txt": "notes\n"}, nil)
	mark := m.appliedMark()
	m.writeBacking(".gitignore", "notes.txt\n")
	m.waitApplied(mark, ".gitignore")
	if out, err := m.sessionRun("agent", `echo scribble > notes.txt`); err != nil {
		t.Fatalf("a rule written outside the mount does not exempt notes.txt: %v\n%s", err, out)
	}
	if got := m.policyPending(); len(got) != 0 {
		t.Fatalf("pending after an edit outside the mount: %v", got)
	}

	m.mustSh(`cat .gitignore >/dev/null && echo main.c >> .gitignore`)
	if out, err := m.sessionRun("agent2", `echo clobber > main.c`); err == nil || m.readBacking("main.c") != mainC {
		t.Fatalf("a rule written through the mount outside every session exempts main.c at once\n%s", out)
	}
	if got := m.policyPending(); len(got) != 1 || got[0] != ".gitignore" {
		t.Fatalf("pending = %v, want [.gitignore]", got)
	}
	if out, err := m.sessionRun("agent3", `echo again > notes.txt`); err != nil {
		t.Fatalf("the accepted rule stopped exempting notes.txt after a widening edit: %v\n%s", err, out)
	}
}

// TestExemptWideningMoveAndLink: no rename or hard link through the mount
// gives guarded content an exempt name (gen/ is git-ignored, and so is
// what logs/ holds, not logs). As real tools do it, in one session:
//   - `mv` of a directory and of a file the session never read into gen/
//     is refused (mv(1) gets EXDEV for the directory and moves its files
//     one by one, each refused as unread), and so is rename(2) of a
//     directory to logs (EXDEV); every file stays where it was, byte for
//     byte;
//   - `ln` of a guarded file into gen/ fails with EXDEV, also after a
//     read: a write through that name would change the guarded file
//     unguarded and unjournaled;
//   - the refusals are in `rubinofs denials`, with their reasons;
//   - once the session read the files, `mv` moves them, and the moves are
//     journaled: a rewind puts them back.
func TestExemptWideningMoveAndLink(t *testing.T) {
	files := map[string]string{"src/main.c": mainC, "src/x.c": "int x;\n", "lib/y.c": "int y;\n", "pkg/z.c": "int z;\n"}
	m := newMount(t, map[string]string{"gen/.gitignore": "*\n", ".gitignore": "logs/*\n",
		"src/main.c": mainC, "src/x.c": "int x;\n", "lib/y.c": "int y;\n", "pkg/z.c": "int z;\n"}, nil)
	intact := func(when string) {
		t.Helper()
		for rel, want := range files {
			if got := m.readBacking(rel); got != want {
				t.Fatalf("%s: %s = %q, want %q", when, rel, got, want)
			}
		}
	}
	// logs/* exempts what logs holds, not logs: pkg renamed to logs would
	// take z.c out of the guard (rename(2) itself: mv(1) meets the EXDEV
	// by copying, which reads the file, and removing).
	out, err := m.sessionRun("agent", `mv src gen/; mv lib/y.c gen/; python3 -c 'import os; os.rename("pkg", "logs")'`)
	if err == nil || !strings.Contains(out, "[Errno 18] Invalid cross-device link") {
		t.Fatalf("mv of unread files into the git-ignored gen/, or rename(2) of pkg to logs, passed: %v\n%s", err, out)
	}
	intact("after the refused mv")
	// A session's refusals are listed until its name is registered again.
	denied := func(wants ...string) {
		t.Helper()
		out, err := cli(t, m.tmp, "denials", "--mount", m.mnt, "--session", "agent")
		if err != nil {
			t.Fatalf("rubinofs denials: %v\n%s", err, out)
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("rubinofs denials lacks %q:\n%s", want, out)
			}
		}
	}
	denied("move-exempt exempt-name: refusing to move out of the guard src: gen/src is exempt",
		"move-exempt unread: refusing to move out of the guard src/main.c: read it first",
		"move-exempt unread: refusing to move out of the guard lib/y.c: read it first",
		"move-exempt exempt-name: refusing to move out of the guard pkg: logs is exempt")
	for _, script := range []string{`ln lib/y.c gen/y.c`, `cat lib/y.c >/dev/null && ln lib/y.c gen/y.c`} {
		out, err = m.sessionRun("agent", script)
		if err == nil || !strings.Contains(out, "cross-device") {
			t.Fatalf("%s: %v, want EXDEV\n%s", script, err, out)
		}
		denied("link-exempt exempt-name: refusing to give an exempt name to lib/y.c: gen/y.c is exempt")
	}
	if _, err := os.Lstat(m.backing("gen/y.c")); !os.IsNotExist(err) {
		t.Fatalf("gen/y.c exists after the refused links (%v)", err)
	}
	intact("after the refused links")

	out, err = m.sessionRun("agent", `cat src/*.c lib/y.c >/dev/null && mv src gen/ && mv lib/y.c gen/`)
	if err != nil {
		t.Fatalf("mv after reading the files: %v\n%s", err, out)
	}
	for rel, want := range map[string]string{"gen/src/main.c": mainC, "gen/src/x.c": "int x;\n", "gen/y.c": "int y;\n"} {
		if got := m.readBacking(rel); got != want {
			t.Fatalf("after the mv: %s = %q, want %q", rel, got, want)
		}
	}
	out, err = cli(t, m.tmp, "rewind", "--mount", m.mnt, "--session", "agent", "--to", "cp000000")
	if err != nil {
		t.Fatalf("rubinofs rewind: %v\n%s", err, out)
	}
	intact("after the rewind")
}

// TestExemptWideningAliases: a move or link that would leave a guarded
// file and an exempt name on one inode is refused (EXDEV), even after a
// read, so a write through the exempt name never changes a guarded file:
//   - a guarded file with a second guarded name, read, moved by that name
//     into gen/ (`ln w.c .w; mv .w gen/w`: mv(1) copies after the EXDEV);
//   - an exempt file with a second exempt name moved over a guarded file
//     the session read (`mv gen/a v.c`: mv(1) copies);
//   - an open file whose looked-up name was removed, linked into gen/ by
//     its descriptor while its other (guarded) name lives on.
//
// After each, a write through the exempt names leaves the guarded file as
// it was.
func TestExemptWideningAliases(t *testing.T) {
	m := newMount(t, map[string]string{"gen/.gitignore": "*\n", "src/w.c": "int w;\n", "src/v.c": "int v;\n",
		"gen/a": "int a;\n", "src/t.c": "int t;\n"}, nil)
	if err := os.Link(m.backing("src/t.c"), m.backing("src/t2.c")); err != nil {
		t.Fatal(err)
	}
	out, err := m.sessionRun("agent", `ln src/w.c src/.w && cat src/w.c >/dev/null && mv src/.w gen/w && echo clobber > gen/w &&
ln gen/a gen/b && cat src/v.c >/dev/null && mv gen/a src/v.c && echo clobber > gen/b &&
python3 -c '
import errno, os
os.open("src/t.c", os.O_RDONLY)
fd = os.open("src/t.c", os.O_RDWR)  # after a read: allowed; a handle the mount keeps
os.read(fd, 100)
os.unlink("src/t.c")
try:
    os.link("/proc/self/fd/%d" % fd, "gen/t", follow_symlinks=True)
except OSError as e:
    assert e.errno == errno.EXDEV, e
    print("link by descriptor: EXDEV")
else:
    raise SystemExit("the link by descriptor passed")
'`)
	if err != nil || !strings.Contains(out, "link by descriptor: EXDEV") {
		t.Fatalf("%v\n%s", err, out)
	}
	for rel, want := range map[string]string{"src/w.c": "int w;\n", "src/v.c": "int a;\n", "src/t2.c": "int t;\n"} {
		if got := m.readBacking(rel); got != want {
			t.Errorf("%s = %q, want %q: a write through an exempt name reached it", rel, got, want)
		}
	}
	if _, err := os.Lstat(m.backing("gen/t")); !os.IsNotExist(err) {
		t.Errorf("gen/t exists after the refused link (%v)", err)
	}
	// mv(1) copied: the exempt gen/b is not the guarded src/v.c's inode.
	var v, b syscall.Stat_t
	if err := syscall.Lstat(m.backing("src/v.c"), &v); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(m.backing("gen/b"), &b); err != nil {
		t.Fatal(err)
	}
	if v.Ino == b.Ino {
		t.Errorf("src/v.c and the exempt gen/b are one inode (%d)", v.Ino)
	}
}

// TestExemptRenameRace: a rename of a file within its directory
// (`mv p/x.c p/x.log`, as sed -i and editors rename) racing a rename of
// that directory to a name whose rule exempts the file's new name (`mv p
// logs7`, .gitignore `logs*/*.log`) never lands the unread file at the
// exempt name: each rename is checked and made with no rename of a
// directory between (docs/DESIGN.md#exempt-widening). Either order alone
// is allowed (p/x.log is guarded; logs7/x.c is not exempt) or refused
// (p holding x.log renamed to logs7: EXDEV).
func TestExemptRenameRace(t *testing.T) {
	const rounds = 200
	files := map[string]string{".gitignore": "logs*/*.log\n"}
	for i := range rounds {
		files[fmt.Sprintf("p%d/x.c", i)] = "int x;\n"
	}
	m := newMount(t, files, nil)
	script := fmt.Sprintf(`
import os, threading
for i in range(%d):
    bar = threading.Barrier(2)
    def a():
        bar.wait()
        try: os.rename("p%%d" %% i, "logs%%d" %% i)
        except OSError: pass
    def b():
        bar.wait()
        try: os.rename("p%%d/x.c" %% i, "p%%d/x.log" %% i)
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
		if _, err := os.Lstat(m.backing(fmt.Sprintf("logs%d/x.log", i))); err == nil {
			landed = append(landed, fmt.Sprint(i))
		}
	}
	if len(landed) > 0 {
		t.Fatalf("an unread file landed at an exempt name in rounds %v of %d", landed, rounds)
	}
}
