package tests

// Hostile input through the control files: path
// tricks (.., absolute paths, symlinks, NUL and newline) written to every
// control file that takes a name or a path cannot reach outside the
// workspace or the state directory, and oversized input is refused whole
// with EFBIG and a readable reason.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ctlWrite opens the control file rel (below the mount root) read-write,
// writes payload in one write(2) and returns the errno the writer saw and
// what the same handle reads next: the id of a clone, or "error: REASON"
// after a failure.
func (m *mount) ctlWrite(rel string, payload []byte) (syscall.Errno, string) {
	m.t.Helper()
	f, err := os.OpenFile(m.path(rel), os.O_RDWR, 0)
	if err != nil {
		m.t.Fatalf("open %s: %v", rel, err)
	}
	defer f.Close()
	var errno syscall.Errno
	if _, err := f.Write(payload); err != nil && !errors.As(err, &errno) {
		m.t.Fatalf("write %s: %v", rel, err)
	}
	buf := make([]byte, 8192)
	n, _ := f.ReadAt(buf, 0)
	return errno, string(buf[:n])
}

// pathsUnder lists every path below root (relative), skipping skip.
func pathsUnder(t *testing.T, root, skip string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p == skip {
			return filepath.SkipDir
		}
		if err == nil {
			rel, _ := filepath.Rel(root, p)
			out[rel] = true
		}
		return nil
	})
	return out
}

// TestHostileCtlNames writes names and paths meant to escape through every
// control file that takes one, and checks that each is refused with the
// errno the writer sees and a readable reason on the handle and in
// .rubino/errors, and that nothing appeared outside (or inside) the
// workspace and the state directory.
func TestHostileCtlNames(t *testing.T) {
	m := newMount(t, map[string]string{"f": "x\n"}, nil)
	outside := filepath.Join(m.tmp, "PWN") // what an escape would create
	abs := filepath.Join(m.tmp, "ABS-PWN")
	before := pathsUnder(t, m.tmp, m.mnt)
	cases := []struct {
		file    string
		payload string
		errno   syscall.Errno
		reason  string
	}{
		{"sessions/clone", "name=../PWN", syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=../../../PWN", syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=" + abs, syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=a/b", syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=..", syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=.", syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=a\nb", syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=ok\x00/../../PWN", syscall.EINVAL, "NUL"},
		{"sessions/clone", "name=\xff\xfe", syscall.EINVAL, "UTF-8"},
		{"sessions/clone", "name=" + strings.Repeat("a", 65), syscall.EINVAL, "invalid session name"},
		{"sessions/clone", "name=default", syscall.EINVAL, "unregistered callers"},
		{"sessions/clone", "name=task-1", syscall.EPERM, "reserved for tasks"},
		{"sessions/clone", "name=x name=../PWN", syscall.EINVAL, "given twice"},
		{"sessions/ctl", "rename default ../PWN", syscall.EINVAL, "invalid session name"},
		{"sessions/ctl", "rename default " + abs, syscall.EINVAL, "invalid session name"},
		{"sessions/ctl", "end ../../PWN", syscall.EINVAL, "invalid session name"},
		{"sessions/ctl", "end a\x00b", syscall.EINVAL, "NUL"},
		{"agents/clone", `{"subagent":"../../PWN","prompt":"true"}`, syscall.EINVAL, "malformed subagent name"},
		{"agents/clone", "subagent=/bin/sh prompt=true", syscall.EINVAL, "malformed subagent name"},
		{"agents/clone", "subagent=sh\nprompt=true\x00", syscall.EINVAL, "NUL"},
		{"compact/resolve", "../../PWN", syscall.EINVAL, "malformed session id"},
		{"compact/resolve", abs, syscall.EINVAL, "malformed session id"},
		{"compact/new", `{"tokenizer":"../../PWN"}`, syscall.EINVAL, "unknown tokenizer"},
		{"compact/new", `{"model":"a\nb"}`, syscall.EINVAL, "printable"},
	}
	for _, c := range cases {
		errno, got := m.ctlWrite(".rubino/"+c.file, []byte(c.payload))
		if errno != c.errno || !strings.HasPrefix(got, "error: ") || !strings.Contains(got, c.reason) {
			t.Errorf("%s <- %q: errno %v, read %q; want %v and a reason with %q", c.file, c.payload, errno, got, c.errno, c.reason)
		}
		if strings.Count(got, "\n") != 1 {
			t.Errorf("%s <- %q: the reason is not one line: %q", c.file, c.payload, got)
		}
	}
	// The listing of sessions did not change and no name reached the disk.
	if got := m.mustSh("ls .rubino/sessions"); got != "clone\nctl\ndefault\n" {
		t.Errorf("sessions listing after the refusals: %q", got)
	}
	for _, p := range []string{outside, abs, filepath.Join(m.ws, "PWN"), filepath.Join(m.state, "PWN"), "/PWN"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	after := pathsUnder(t, m.tmp, m.mnt)
	for p := range after {
		if !before[p] && (strings.Contains(p, "PWN") || !strings.HasPrefix(p, "state")) {
			t.Errorf("new path %s after hostile control writes", p)
		}
	}
	errs := m.mustSh("cat .rubino/errors")
	if n := strings.Count(errs, "\n"); n < len(cases) {
		t.Errorf("%d entries in .rubino/errors for %d refusals:\n%s", n, len(cases), errs)
	}
	if strings.Contains(errs, "\x00") || !strings.Contains(errs, `"errno":"EINVAL"`) || !strings.Contains(errs, `"errno":"EPERM"`) {
		t.Errorf(".rubino/errors:\n%s", errs)
	}
}

// TestHostileCtlSizes: oversized writes to control files fail with EFBIG
// ("File too large") and a reason naming the limit; nothing of them is
// applied; the errors log quotes at most a bounded reason.
func TestHostileCtlSizes(t *testing.T) {
	m := newMount(t, nil, nil)
	big := func(prefix string, n int) []byte { return append([]byte(prefix), strings.Repeat("A", n)...) }
	for _, c := range []struct {
		file    string
		payload []byte
		reason  string
	}{
		{"sessions/clone", big("cmd=", 70<<10), "exceeds the limit"},
		{"sessions/ctl", big("end ", 2<<10), "exceeds the limit"},
		{"agents/clone", big("subagent=sh prompt=", 70<<10), "exceeds"},
		{"compact/new", big("", 8<<10), "exceed the limit"},
		{"compact/new", big("", 3<<20), "exceed the limit"}, // the kernel splits it: the first piece is refused
	} {
		errno, got := m.ctlWrite(".rubino/"+c.file, c.payload)
		if errno != syscall.EFBIG || !strings.Contains(got, c.reason) || len(got) > 2048 {
			t.Errorf("%s <- %d bytes: errno %v, reason %.200q", c.file, len(c.payload), errno, got)
		}
	}
	// A line that grows across writes on one append handle past the limit.
	id := strings.TrimSpace(m.mustSh(`exec 3<>.rubino/compact/new; echo >&3; cat <&3`))
	f, err := os.OpenFile(m.path(".rubino/compact/sessions/"+id+"/messages"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := []byte(`{"role":"user","content":"` + strings.Repeat("x", 600<<10))
	_, err1 := f.Write(half)
	_, err2 := f.Write(half)
	f.Close()
	if err1 != nil || !errors.Is(err2, syscall.EFBIG) {
		t.Errorf("a 1.2 MiB line across two writes: %v, %v", err1, err2)
	}
	if got := m.mustSh("cat .rubino/compact/sessions/" + id + "/messages"); got != "" {
		t.Errorf("the refused line was stored: %.100q", got)
	}
	if got := m.mustSh("cat .rubino/errors"); len(got) > 64<<10 || !strings.Contains(got, `"errno":"EFBIG"`) {
		t.Errorf("errors log of %d bytes:\n%.500s", len(got), got)
	}
}

// TestHostileCtlTreeOps: the control tree cannot be used to reach or make
// files: creating, linking, renaming into or out of .rubino is refused, and
// `..` below .rubino resolves inside the mount, as on any directory.
func TestHostileCtlTreeOps(t *testing.T) {
	m := newMount(t, map[string]string{"f": "x\n"}, nil)
	for i, op := range []func() error{
		func() error { return os.WriteFile(m.path(".rubino/PWN"), []byte("x"), 0o644) },
		func() error { return os.Mkdir(m.path(".rubino/PWN"), 0o755) },
		func() error { return os.Symlink("/etc", m.path(".rubino/PWN")) },
		func() error { return os.Link(m.path("f"), m.path(".rubino/PWN")) },
		func() error { return os.Rename(m.path("f"), m.path(".rubino/PWN")) },
		func() error { return os.Rename(m.path(".rubino/README"), m.path("PWN")) },
		func() error { return os.Link(m.path(".rubino/status"), m.path("PWN")) },
		func() error { return os.Remove(m.path(".rubino/README")) },
		func() error { return os.Remove(m.path(".rubino/sessions")) },
		func() error { return os.Truncate(m.path(".rubino/README"), 0) },
		func() error { return os.Chmod(m.path(".rubino/sessions/ctl"), 0o777) },
	} {
		if err := op(); err == nil {
			t.Errorf("operation %d on the control tree succeeded", i)
		}
	}
	for _, p := range []string{".rubino/README", ".rubino/sessions", ".rubino/sessions/ctl"} {
		if err := os.Remove(m.path(p)); !errors.Is(err, syscall.EPERM) {
			t.Errorf("remove %s: %v, want EPERM", p, err)
		}
	}
	if !strings.Contains(m.mustSh("cat .rubino/errors"), "control-tree entries cannot be removed") {
		t.Error("a refused removal has no reason in .rubino/errors")
	}
	if got := m.mustSh("ls .rubino/sessions/.. | tr '\\n' ' '"); got != m.mustSh("ls .rubino | tr '\\n' ' '") {
		t.Errorf(".rubino/sessions/.. lists %q", got)
	}
	if got := m.mustSh("cat .rubino/agents/../../f"); got != "x\n" {
		t.Errorf(".rubino/agents/../../f: %q", got)
	}
	if got := m.mustSh("readlink .rubino/self"); got != "sessions/default\n" {
		t.Errorf("self: %q", got)
	}
	// A workspace symlink into the control tree reaches the same file with
	// the same authorisation: the caller is still who it is.
	m.writeBacking("dir/.keep", "")
	if err := os.Symlink("../.rubino/sessions/ctl", m.backing("dir/ctl-link")); err != nil {
		t.Fatal(err)
	}
	errno, got := m.ctlWrite("dir/ctl-link", []byte("rename default ../PWN"))
	if errno != syscall.EINVAL || !strings.Contains(got, "invalid session name") {
		t.Errorf("through a symlink: %v %q", errno, got)
	}
	for _, p := range []string{m.backing(".rubino"), m.backing("PWN"), filepath.Join(m.tmp, "PWN")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	if m.readBacking("f") != "x\n" {
		t.Error("f changed")
	}
}
