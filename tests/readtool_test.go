package tests

// The Read tool (docs/DESIGN.md#read-tool), window by window, through
// `rubinofs read` on a real mount: the bytes the first time, "unchanged"
// for the same window of the same bytes, the bytes again after any
// change, once after a refused write, per session; an outline of a big
// file whose elided ranges are drill-ins; the whole-file read declared.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

// readToolSession runs `rubinofs read` in one kept session of m, each
// command joined to it (`rubinofs run --session NAME --join`), from the
// mount root.
type readToolSession struct {
	t    *testing.T
	m    *mount
	name string
}

// keptSession registers the kept session name (`rubinofs session new NAME
// --keep`).
func keptSession(t *testing.T, m *mount, name string) readToolSession {
	t.Helper()
	if out, err := m.rubinofs("session", "new", name, "--keep"); err != nil || strings.TrimSpace(out) != name {
		t.Fatalf("session new %s --keep: %v\n%s", name, err, out)
	}
	return readToolSession{t: t, m: m, name: name}
}

// sh runs script with /bin/sh in the mount root, joined to the session,
// with $RUBINOFS the rubinofs binary; it returns the combined output.
func (s readToolSession) sh(script string) (string, error) {
	s.t.Helper()
	bin := rubinofsBin(s.t)
	cmd := exec.Command(bin, "run", "--session", s.name, "--join", "--", "/bin/sh", "-c", `cd "$RUBINO_MOUNT" && `+script)
	cmd.Dir = s.m.tmp
	cmd.Env = append(testEnv(s.m.tmp), "RUBINO_MOUNT="+s.m.mnt, "RUBINOFS="+bin)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// read runs `rubinofs read ARGS...` in the session and fails the test when
// it fails.
func (s readToolSession) read(args ...string) string {
	s.t.Helper()
	out, err := s.sh(readCmd(args...))
	if err != nil {
		s.t.Fatalf("session %s: rubinofs read %s: %v\n%s", s.name, strings.Join(args, " "), err, out)
	}
	return out
}

// readCmd is the shell command running `rubinofs read ARGS...`.
func readCmd(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shq(a)
	}
	return `exec "$RUBINOFS" read ` + strings.Join(q, " ")
}

// wantLines fails unless out shows lines first..last of lines, numbered
// as cat -n numbers them.
func wantLines(t *testing.T, what, out string, lines []string, first, last int) {
	t.Helper()
	var want strings.Builder
	for n := first; n <= last; n++ {
		fmt.Fprintf(&want, "%6d\t%s\n", n, lines[n-1])
	}
	if out != want.String() {
		t.Fatalf("%s: got\n%s\nwant\n%s", what, out, want.String())
	}
}

// wantUnchanged fails unless out is the one-line "unchanged" answer for
// lines first..last (0, 0: the whole file).
func wantUnchanged(t *testing.T, what, out string, first, last int) {
	t.Helper()
	want := fmt.Sprintf("unchanged since your last read of lines %d-%d ", first, last)
	if first == 0 {
		want = "unchanged since your last read of "
	}
	if !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Fatalf("%s: got %q, want the one-line answer %q...", what, out, want)
	}
}

// numberedFile returns n lines "NAME line K" and the file's content.
func numberedFile(name string, n int) ([]string, string) {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("%s line %d", name, i+1)
	}
	return lines, strings.Join(lines, "\n") + "\n"
}

// TestReadToolWindows: the first read of a window gives the bytes, the
// same window again "unchanged", another window the bytes; another
// session gets the bytes of a window the first one read; after a write
// through the mount, an outside write and the session's own write, the
// same window gives the bytes (once); after a refused write of the file,
// or an edit failure the harness declares, it gives the bytes once
// although they are unchanged.
func TestReadToolWindows(t *testing.T) {
	lines, content := numberedFile("f", 10)
	m := newMount(t, map[string]string{"f.txt": content}, nil)
	a := keptSession(t, m, "a")
	b := keptSession(t, m, "b")

	wantLines(t, "first read of 2-4", a.read("--offset", "2", "--limit", "3", "f.txt"), lines, 2, 4)
	wantUnchanged(t, "second read of 2-4", a.read("--offset", "2", "--limit", "3", "f.txt"), 2, 4)
	wantLines(t, "first read of 3-5", a.read("--offset", "3", "--limit", "3", "f.txt"), lines, 3, 5)
	wantLines(t, "first read of 1-2 by an absolute path", a.read("--limit", "2", m.path("f.txt")), lines, 1, 2)
	wantUnchanged(t, "1-2 again, relative", a.read("--offset", "1", "--limit", "2", "f.txt"), 1, 2)
	wantLines(t, "session b's first read of 2-4", b.read("--offset", "2", "--limit", "3", "f.txt"), lines, 2, 4)
	wantUnchanged(t, "session b's second read of 2-4", b.read("--offset", "2", "--limit", "3", "f.txt"), 2, 4)

	// A write through the mount by another session (the test process's
	// default one).
	m.mustSh("cat f.txt >/dev/null && echo 'f line 11' >> f.txt")
	lines = append(lines, "f line 11")
	wantLines(t, "2-4 after another session appended", a.read("--offset", "2", "--limit", "3", "f.txt"), lines, 2, 4)
	wantUnchanged(t, "2-4 again", a.read("--offset", "2", "--limit", "3", "f.txt"), 2, 4)

	// An outside write.
	mark := m.appliedMark()
	lines[2] = "f line 3, changed outside"
	m.writeBacking("f.txt", strings.Join(lines, "\n")+"\n")
	m.waitApplied(mark, "f.txt")
	wantLines(t, "2-4 after an outside write", a.read("--offset", "2", "--limit", "3", "f.txt"), lines, 2, 4)
	wantUnchanged(t, "2-4 again", a.read("--offset", "2", "--limit", "3", "f.txt"), 2, 4)

	// The session's own write.
	if out, err := a.sh("echo 'f line 12' >> f.txt"); err != nil {
		t.Fatalf("session a's own append: %v\n%s", err, out)
	}
	lines = append(lines, "f line 12")
	wantLines(t, "2-4 after the session's own write", a.read("--offset", "2", "--limit", "3", "f.txt"), lines, 2, 4)
	wantUnchanged(t, "2-4 again", a.read("--offset", "2", "--limit", "3", "f.txt"), 2, 4)

	// Another session rewrites the same bytes: session a's record is
	// stale (docs/DESIGN.md#freshness) though the bytes hash the same, so
	// its write is refused, and that refusal makes its next read fresh.
	m.mustSh("cp f.txt ../f.copy && cat ../f.copy > f.txt")
	if out, err := a.sh("echo 'blind' >> f.txt"); err == nil {
		t.Fatalf("session a's write after another session rewrote the file succeeded:\n%s", out)
	}
	wantLines(t, "2-4 after a refused write (same bytes)", a.read("--offset", "2", "--limit", "3", "f.txt"), lines, 2, 4)
	wantUnchanged(t, "2-4 again", a.read("--offset", "2", "--limit", "3", "f.txt"), 2, 4)
	// A harness's declared edit failure does the same
	// (docs/DESIGN.md#recovery).
	if out, err := a.sh(`printf 'edit-failed f.txt\n' > .rubino/self/ctl`); err != nil {
		t.Fatalf("edit-failed: %v\n%s", err, out)
	}
	wantLines(t, "2-4 after a declared edit failure", a.read("--offset", "2", "--limit", "3", "f.txt"), lines, 2, 4)
	wantUnchanged(t, "2-4 again", a.read("--offset", "2", "--limit", "3", "f.txt"), 2, 4)
	if got := m.readBacking("f.txt"); got != strings.Join(lines, "\n")+"\n" {
		t.Fatalf("f.txt = %q", got)
	}
}

// TestReadToolWhole: a whole-file read shows every line, a second one is
// "unchanged", and it declares the read: with the tool's own reads
// through the mount counting for its process only (rubinofs made a
// scanner, docs/DESIGN.md#scanner-reads), the session may then append
// blind to the file it read whole, while a file it read only a window
// of, and one it never read, are refused. (Not sed -i: sed reads the file
// itself, which counts.)
func TestReadToolWhole(t *testing.T) {
	lines, content := numberedFile("w", 5)
	m := newMount(t, map[string]string{"whole.txt": content, "window.txt": content, "unread.txt": content, "empty.txt": ""},
		func(c *daemon.Config) {
			c.Scanners = append(append([]string(nil), guard.DefaultScanners...), "rubinofs")
		})
	s := keptSession(t, m, "s")
	wantLines(t, "whole read", s.read("whole.txt"), lines, 1, 5)
	wantUnchanged(t, "whole read again", s.read("whole.txt"), 0, 0)
	wantUnchanged(t, "offset 1, no limit: the whole file too", s.read("--offset", "1", "whole.txt"), 0, 0)
	wantLines(t, "a window", s.read("--offset", "2", "--limit", "2", "window.txt"), lines, 2, 3)
	if out := s.read("empty.txt"); out != "empty.txt is empty (0 lines)\n" {
		t.Fatalf("empty file: %q", out)
	}
	if out, err := s.sh("echo appended >> whole.txt"); err != nil {
		t.Fatalf("a blind append to the file read whole was refused: %v\n%s", err, out)
	}
	if out, err := s.sh("echo appended >> window.txt"); err == nil {
		t.Fatalf("a blind append to a file read only in part succeeded:\n%s", out)
	}
	if out, err := s.sh("echo appended >> unread.txt"); err == nil {
		t.Fatalf("a blind append to an unread file succeeded:\n%s", out)
	}
	if got := m.readBacking("whole.txt"); got != content+"appended\n" {
		t.Fatalf("whole.txt = %q", got)
	}
	for _, f := range []string{"window.txt", "unread.txt"} {
		if got := m.readBacking(f); got != content {
			t.Fatalf("%s = %q after a refused append", f, got)
		}
	}
}

// bigSource is a file of blocks: an unindented header, indented body
// lines and an unindented closing line each, over the tool's 2,000-line
// limit.
func bigSource(blocks, body int) []string {
	var lines []string
	for i := 0; i < blocks; i++ {
		lines = append(lines, fmt.Sprintf("func f%d() {", i))
		for j := 0; j < body; j++ {
			lines = append(lines, fmt.Sprintf("\tstep(%d, %d)", i, j))
		}
		lines = append(lines, "}", "")
	}
	return lines
}

var elidedRE = regexp.MustCompile(`… lines (\d+)-(\d+) elided \(read with offset/limit to see them\) …`)

// TestReadToolSkeleton: a whole-file read of a file over the limit is an
// outline with elided ranges (each block's header, first body line and
// closing line shown); a window inside an elided range gives the bytes
// every time (a drill-in), a window outside every elided range is a
// normal window; the outline again is "unchanged"; --max above the file's
// length shows it whole.
func TestReadToolSkeleton(t *testing.T) {
	lines := bigSource(150, 20) // 3,450 lines
	m := newMount(t, map[string]string{"big.go": strings.Join(lines, "\n") + "\n"}, nil)
	s := keptSession(t, m, "s")
	out := s.read("big.go")
	if !strings.HasPrefix(out, "big.go: 3450 lines, ") {
		t.Fatalf("outline header: %q", strings.SplitN(out, "\n", 2)[0])
	}
	ms := elidedRE.FindAllStringSubmatch(out, -1)
	if len(ms) < 2 {
		t.Fatalf("the outline elides %d ranges:\n%.2000s", len(ms), out)
	}
	for _, want := range []string{"     1\tfunc f0() {\n", "     2\t\tstep(0, 0)\n", "    22\t}\n", "    24\tfunc f1() {\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the outline lacks %q:\n%.2000s", want, out)
		}
	}
	if strings.Contains(out, "step(0, 1)") {
		t.Fatalf("the outline shows an elided line:\n%.2000s", out)
	}
	if n := strings.Count(out, "\n"); n > 2000 {
		t.Fatalf("the outline has %d lines, over the limit", n)
	}
	first, _ := strconv.Atoi(ms[0][1])
	last, _ := strconv.Atoi(ms[0][2])
	if first != 3 || last != 21 {
		t.Fatalf("the first elided range is %d-%d, want 3-21", first, last)
	}
	wantUnchanged(t, "the outline again", s.read("big.go"), 0, 0)

	// Drill-ins: a window inside an elided range, and one overlapping its
	// end, give the bytes every time.
	for i := 0; i < 2; i++ {
		wantLines(t, fmt.Sprintf("drill-in %d into 5-7", i+1), s.read("--offset", "5", "--limit", "3", "big.go"), lines, 5, 7)
		wantLines(t, fmt.Sprintf("drill-in %d across 20-23", i+1), s.read("--offset", "20", "--limit", "4", "big.go"), lines, 20, 23)
	}
	if m := ms[len(ms)-1]; m[2] == strconv.Itoa(len(lines)) {
		t.Fatalf("the outline of 600 lines was cut: its last range is %s-%s", m[1], m[2])
	}
	// Outside every elided range (lines 1-2 and 22-24 are shown): a
	// normal window.
	wantLines(t, "1-2, shown in the outline", s.read("--limit", "2", "big.go"), lines, 1, 2)
	wantUnchanged(t, "1-2 again", s.read("--limit", "2", "big.go"), 1, 2)
	wantLines(t, "22-24, shown in the outline", s.read("--offset", "22", "--limit", "3", "big.go"), lines, 22, 24)
	wantUnchanged(t, "22-24 again", s.read("--offset", "22", "--limit", "3", "big.go"), 22, 24)

	// Another session's outline is its own: it gets it, and its windows
	// inside elided ranges are drill-ins for it too.
	o := keptSession(t, m, "o")
	wantLines(t, "session o's 5-7 before any outline", o.read("--offset", "5", "--limit", "3", "big.go"), lines, 5, 7)
	wantUnchanged(t, "session o's 5-7 again: no outline of its own", o.read("--offset", "5", "--limit", "3", "big.go"), 5, 7)
	if out := o.read("big.go"); !strings.HasPrefix(out, "big.go: 3450 lines, ") {
		t.Fatalf("session o's outline: %.200q", out)
	}
	wantLines(t, "session o's drill-in into 5-7", o.read("--offset", "5", "--limit", "3", "big.go"), lines, 5, 7)

	// An outline over the limit is cut: one last range to the end. (A
	// fresh session: the outline of the same bytes would be "unchanged"
	// for s whatever --max.)
	c := keptSession(t, m, "c")
	out = c.read("--max", "100", "big.go")
	ms = elidedRE.FindAllStringSubmatch(out, -1)
	if n := strings.Count(out, "\n"); n > 100 || len(ms) == 0 || ms[len(ms)-1][2] != strconv.Itoa(len(lines)) {
		t.Fatalf("an outline with --max 100 (%d lines) does not end with a range to line %d:\n%s", n, len(lines), out)
	}
	tail, _ := strconv.Atoi(ms[len(ms)-1][1])
	wantLines(t, "a drill-in into the cut tail", c.read("--offset", strconv.Itoa(tail+5), "--limit", "2", "big.go"), lines, tail+5, tail+6)
	wantLines(t, "the same drill-in again", c.read("--offset", strconv.Itoa(tail+5), "--limit", "2", "big.go"), lines, tail+5, tail+6)

	// --max above the length: the whole file.
	wantLines(t, "--max 5000", s.read("--max", "5000", "big.go"), lines, 1, len(lines))
	// A window longer than the limit stops there and says where to read on.
	out = s.read("--max", "10", "--offset", "3", "big.go")
	if !strings.HasPrefix(out, fmt.Sprintf("%6d\t%s\n", 3, lines[2])) || !strings.Contains(out, "read on with offset 13") ||
		strings.Contains(out, fmt.Sprintf("%6d\t", 13)) {
		t.Fatalf("a window over --max:\n%s", out)
	}
}

// TestReadToolBadInput: a negative offset or limit, a path outside the
// mount, a missing file, a directory, a control file and a binary file
// each give one readable line and exit 1.
func TestReadToolBadInput(t *testing.T) {
	m := newMount(t, map[string]string{"f.txt": "x\n", "d/g.txt": "y\n", "bin.dat": "a\x00b"}, nil)
	s := keptSession(t, m, "s")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--offset=-1", "f.txt"}, "offset -1: must be 0 or more"},
		{[]string{"--limit=-2", "f.txt"}, "limit -2: must be 0 or more"},
		{[]string{"/etc/hostname"}, "/etc/hostname is outside the mount"},
		{[]string{"../outside.txt"}, "../outside.txt is outside the mount"},
		{[]string{"nope.txt"}, "nope.txt: no such file"},
		{[]string{"d"}, "d is a directory, not a file"},
		{[]string{".rubino/status"}, ".rubino/status is a control file of the mount"},
		{[]string{"bin.dat"}, "bin.dat looks binary"},
		{[]string{"--offset", "5", "f.txt"}, "offset 5 is past the end of f.txt, which has 1 line"},
		{[]string{"--max", "0", "f.txt"}, "max 0: must be 1 or more"},
		{[]string{}, "usage: rubinofs read"},
	} {
		out, err := s.sh(readCmd(c.args...) + " 2>&1")
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("read %q: %v, want a non-zero exit\n%s", c.args, err, out)
			continue
		}
		if !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("read %q: got %q, want one line with %q", c.args, out, c.want)
		}
	}
}

// TestReadToolOtherUid: uid 65534 gets nothing of root's session through
// the readtool file: root's session's file refuses it, its own read of a
// window root's session has read gives the bytes, and root's session's
// windows are as they were (still "unchanged" for it).
func TestReadToolOtherUid(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	lines, content := numberedFile("f", 6)
	m := newMount(t, map[string]string{"f.txt": content}, func(c *daemon.Config) { c.Options = append(c.Options, "allow_other") })
	openUp(t, m.tmp)
	bin := sharedBin(t)
	a := keptSession(t, m, "a")
	// (The whole read first: as a declared full view it drops the file's
	// other windows, docs/DESIGN.md#dedup-window.)
	wantLines(t, "root's session: whole", a.read("f.txt"), lines, 1, 6)
	wantLines(t, "root's session: 2-3", a.read("--offset", "2", "--limit", "2", "f.txt"), lines, 2, 3)
	// root's default session too (the test process).
	out, err := cli(t, m.tmp, "read", "--mount", m.mnt, "--offset", "2", "--limit", "2", m.path("f.txt"))
	if err != nil {
		t.Fatalf("root's default session: %v\n%s", err, out)
	}
	wantLines(t, "root's default session: 2-3", out, lines, 2, 3)

	// Not even root from outside every session may ask for session a.
	f, err := os.OpenFile(m.path(".rubino/sessions/a/readtool"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte("window " + m.path("f.txt") + " 2 2\n"))
	f.Close()
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("root's default session asked session a's readtool: %v, want EPERM", err)
	}

	nobody := func(script string) (string, error) {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c", `cd "$MNT" && `+script)
		cmd.Dir = m.tmp
		cmd.Env = append(testEnv(m.tmp), "RUBINOFS="+bin, "MNT="+m.mnt, "RUBINO_MOUNT="+m.mnt)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	for _, sess := range []string{"a", "default"} {
		for _, req := range []string{"window f.txt 2 2", "window f.txt 0 0", "skeleton f.txt 1:6"} {
			script := fmt.Sprintf(`printf '%%s\n' %s > .rubino/sessions/%s/readtool`, shq(req), sess)
			if out, err := nobody(script); err == nil {
				t.Errorf("uid 65534 wrote %q to root's session %s's readtool:\n%s", req, sess, out)
			}
		}
	}
	for i, want := range []string{"bytes", "unchanged"} {
		out, err := nobody(readCmd("--offset", "2", "--limit", "2", "f.txt"))
		if err != nil {
			t.Fatalf("uid 65534's own read %d: %v\n%s", i+1, err, out)
		}
		if want == "bytes" {
			wantLines(t, "uid 65534's first read of 2-3", out, lines, 2, 3)
		} else {
			wantUnchanged(t, "uid 65534's second read of 2-3", out, 2, 3)
		}
	}
	if out, err := nobody(readCmd("f.txt")); err != nil {
		t.Fatalf("uid 65534's whole read: %v\n%s", err, out)
	} else {
		wantLines(t, "uid 65534's whole read", out, lines, 1, 6)
	}
	wantUnchanged(t, "root's session: 2-3 after uid 65534's reads", a.read("--offset", "2", "--limit", "2", "f.txt"), 2, 3)
	wantUnchanged(t, "root's session: whole after uid 65534's reads", a.read("f.txt"), 0, 0)
}
